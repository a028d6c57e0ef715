//! Parsing `[user@]host:path`, `[user@][v6addr]:path` and local paths, with scp's rules:
//! a colon before the first slash makes a remote path; `./a:b` and `/a:b` stay local.

/// Where one source or the target lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local path.
    Local(String),
    /// A path on a remote host.
    Remote(Remote),
}

/// A remote path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// The user, if given (`user@`).
    pub user: Option<String>,
    /// The host as typed, without brackets.
    pub host: String,
    /// The path on the remote host; empty means the remote home directory.
    pub path: String,
}

impl Remote {
    /// The destination for ssh: `user@host` or `host`.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(user) => format!("{user}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

/// Parses one command-line path.
pub fn parse(arg: &str) -> Result<Location, String> {
    if arg.is_empty() {
        return Err("empty path: name a file, `host:path` or `user@host:path`".into());
    }
    if arg.starts_with('/') || arg.starts_with("./") || arg.starts_with("../") {
        return Ok(Location::Local(arg.to_string()));
    }
    let (user, rest) = split_user(arg);
    if let Some(bracketed) = rest.strip_prefix('[') {
        let Some((host, after)) = bracketed.split_once(']') else {
            return Err(format!("{arg}: missing `]` after an IPv6 address"));
        };
        let Some(path) = after.strip_prefix(':') else {
            return Err(format!("{arg}: expected `:` after `[{host}]`"));
        };
        return remote(user, host, path, arg);
    }
    match rest.find([':', '/']) {
        Some(i) if rest.as_bytes()[i] == b':' => remote(user, &rest[..i], &rest[i + 1..], arg),
        _ => Ok(Location::Local(arg.to_string())),
    }
}

fn split_user(arg: &str) -> (Option<&str>, &str) {
    // The user ends at the last `@` before the host's colon (user names may hold `@`).
    let host_end = arg.find(':').unwrap_or(arg.len());
    match arg[..host_end].rfind('@') {
        Some(at) if !arg[..at].contains('/') => (Some(&arg[..at]), &arg[at + 1..]),
        _ => (None, arg),
    }
}

fn remote(user: Option<&str>, host: &str, path: &str, arg: &str) -> Result<Location, String> {
    if host.is_empty() {
        return Err(format!("{arg}: empty host name before `:`"));
    }
    if host.starts_with('-') {
        return Err(format!("{arg}: host name may not start with `-`"));
    }
    if user.is_some_and(str::is_empty) {
        return Err(format!("{arg}: empty user name before `@`"));
    }
    Ok(Location::Remote(Remote {
        user: user.map(str::to_string),
        host: host.to_string(),
        path: path.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(user: Option<&str>, host: &str, path: &str) -> Location {
        Location::Remote(Remote {
            user: user.map(str::to_string),
            host: host.into(),
            path: path.into(),
        })
    }

    #[test]
    fn scp_forms() {
        assert_eq!(parse("host:file").expect("ok"), r(None, "host", "file"));
        assert_eq!(parse("me@host:/abs").expect("ok"), r(Some("me"), "host", "/abs"));
        assert_eq!(parse("host:").expect("ok"), r(None, "host", ""));
        assert_eq!(parse("[::1]:x y").expect("ok"), r(None, "::1", "x y"));
        assert_eq!(parse("u@[fe80::1]:p").expect("ok"), r(Some("u"), "fe80::1", "p"));
        assert_eq!(parse("a@b@host:p").expect("ok"), r(Some("a@b"), "host", "p"));
    }

    #[test]
    fn local_forms() {
        for local in ["file", "dir/a:b", "./a:b", "/abs:x", "ünï code", "../x:y"] {
            assert_eq!(parse(local).expect("ok"), Location::Local(local.into()), "{local}");
        }
    }

    #[test]
    fn bad_forms() {
        for bad in ["", ":path", "[::1", "[::1]x", "-oProxyCommand=x:y", "@host:p"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
