//! The names of users and groups for `ls -l`, from `/etc/passwd` and `/etc/group`
//! (passwd(5), group(5)). Accounts known only to a directory service (NSS: LDAP, sssd)
//! are not in these files and show as numbers, as `ls -n` shows them.

use std::collections::HashMap;

/// Names by id, read once per call.
pub struct Users {
    users: HashMap<u32, String>,
    groups: HashMap<u32, String>,
}

impl Users {
    /// Reads both files; one that cannot be read names nobody.
    pub fn read() -> Users {
        let read = |path: &str| std::fs::read_to_string(path).map(|text| names(&text));
        Users {
            users: read("/etc/passwd").unwrap_or_default(),
            groups: read("/etc/group").unwrap_or_default(),
        }
    }

    pub fn user(&self, uid: u32) -> Option<String> {
        self.users.get(&uid).cloned()
    }

    pub fn group(&self, gid: u32) -> Option<String> {
        self.groups.get(&gid).cloned()
    }
}

/// `name:password:id:...` lines by id; the first line for an id wins, as getpwuid(3)
/// finds it.
fn names(text: &str) -> HashMap<u32, String> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut fields = line.split(':');
        let (Some(name), Some(_), Some(id)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        if let Ok(id) = id.parse() {
            out.entry(id).or_insert_with(|| name.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_first_line() {
        let text = "root:x:0:0:root:/root:/bin/bash\n# note\nbad\nalice:x:1000:1000::/home/a:/bin/sh\nalias:x:1000:5::/:/bin/sh\n";
        let named = names(text);
        assert_eq!(named.get(&0).map(String::as_str), Some("root"));
        assert_eq!(named.get(&1000).map(String::as_str), Some("alice"));
        assert_eq!(named.len(), 2);
    }
}
