//! The session's remote directories, and a typed path read against them as sftp(1)
//! reads it: absolute as it is, `~` from the start directory, anything else from the
//! current one. The server resolves what the client joined (`..`, links).

use soku_proto::name::Name;

/// Where the session stands on the remote side.
#[derive(Debug, Clone)]
pub struct RemoteDirs {
    /// The current directory, absolute.
    pub cwd: Name,
    /// The directory the session started in (the login's home unless the
    /// destination named one), for `cd` alone and `~`.
    pub home: Name,
}

impl RemoteDirs {
    /// The path `typed` names.
    pub fn resolve(&self, typed: &str) -> Name {
        self.resolve_bytes(typed.as_bytes())
    }

    /// [`RemoteDirs::resolve`] for a path that may not be UTF-8.
    pub fn resolve_bytes(&self, typed: &[u8]) -> Name {
        if typed.is_empty() {
            return self.cwd.clone();
        }
        if typed.starts_with(b"/") {
            return Name::from_bytes(typed.to_vec());
        }
        if typed == b"~" {
            return self.home.clone();
        }
        if let Some(rest) = typed.strip_prefix(b"~/") {
            return join(&self.home, rest);
        }
        join(&self.cwd, typed)
    }
}

/// `dir/name`, with one slash between.
pub fn join(dir: &Name, name: &[u8]) -> Name {
    let mut out = dir.as_bytes().to_vec();
    if !out.ends_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(name);
    Name::from_bytes(out)
}

/// The directory part of `path` and its last name (`/a/b` is `/a` and `b`).
pub fn split(path: &Name) -> (Name, Vec<u8>) {
    let bytes = path.as_bytes();
    match bytes.iter().rposition(|&b| b == b'/') {
        Some(0) => (Name::from("/"), bytes[1..].to_vec()),
        Some(i) => (Name::from_bytes(bytes[..i].to_vec()), bytes[i + 1..].to_vec()),
        None => (Name::from("."), bytes.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_paths_are_read_against_the_session() {
        let dirs = RemoteDirs { cwd: "/data/run".into(), home: "/home/a".into() };
        assert_eq!(dirs.resolve(""), "/data/run");
        assert_eq!(dirs.resolve("out/x"), "/data/run/out/x");
        assert_eq!(dirs.resolve("/etc"), "/etc");
        assert_eq!(dirs.resolve("~"), "/home/a");
        assert_eq!(dirs.resolve("~/x"), "/home/a/x");
        assert_eq!(dirs.resolve("~x"), "/data/run/~x");
        let root = RemoteDirs { cwd: "/".into(), home: "/".into() };
        assert_eq!(root.resolve("x"), "/x");
        assert_eq!(split(&"/a/b".into()), (Name::from("/a"), b"b".to_vec()));
        assert_eq!(split(&"/b".into()), (Name::from("/"), b"b".to_vec()));
    }
}
