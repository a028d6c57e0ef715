//! Where a path the client names starts: ssh starts the server in the home directory,
//! so a remote path is relative to it, and `~/` says the same.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Remote paths are relative to the home directory, where ssh starts us; `~/x` is `x`.
pub fn expand_home(path: impl AsRef<OsStr>) -> PathBuf {
    let path = path.as_ref();
    match path.as_bytes() {
        b"" | b"~" => PathBuf::from("."),
        bytes => match bytes.strip_prefix(b"~/") {
            Some(b"") => PathBuf::from("."),
            Some(rest) => PathBuf::from(OsStr::from_bytes(rest)),
            None => PathBuf::from(path),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn home_relative_paths() {
        assert_eq!(expand_home(""), Path::new("."));
        assert_eq!(expand_home("~/a/b"), Path::new("a/b"));
        assert_eq!(expand_home("/abs"), Path::new("/abs"));
    }
}
