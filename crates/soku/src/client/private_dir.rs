//! Directories of soku's own under the user's runtime (or cache) directory, private to
//! the user: the shared ssh logins' sockets (`client/launch/shared_login.rs`) and the boards
//! where concurrent copies share a path's min RTT (`client/path_board.rs`).

use std::path::{Path, PathBuf};

use crate::sys;

/// `$XDG_RUNTIME_DIR/soku/<name>`, else `$XDG_CACHE_HOME/soku/<name>`
/// (`~/.cache/soku/<name>`; `%LOCALAPPDATA%\soku\<name>` on Windows): made private to
/// this user (0700), and refused if it is not this user's or someone else could write to
/// it. The error says why, for `-v`.
pub fn soku_runtime_dir(name: &str) -> Result<PathBuf, String> {
    let base = sys::runtime_base()
        .ok_or_else(|| "no $XDG_RUNTIME_DIR, $XDG_CACHE_HOME or $HOME".to_string())?;
    let dir = base.join("soku").join(name);
    sys::make_private_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    check_private(&dir)?;
    Ok(dir)
}

/// `$XDG_CACHE_HOME/soku`, else `~/.cache/soku` (`%LOCALAPPDATA%\soku` on Windows):
/// what soku keeps between copies (path memory, binaries it may send to a remote). Not
/// made here.
pub fn soku_cache_dir() -> Option<PathBuf> {
    Some(sys::cache_base()?.join("soku"))
}

/// Refuses a directory that is not this user's or that others may write to (another
/// user could then put a socket or file of theirs where we look for ours).
pub fn check_private(dir: &Path) -> Result<(), String> {
    let md = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !md.is_dir() || !sys::only_mine(&md) {
        return Err(format!(
            "{} is not a directory of this user's that only it can write to",
            dir.display()
        ));
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_directory_others_can_write_to_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        assert!(check_private(dir.path()).is_ok());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        assert!(check_private(dir.path()).is_err());
    }
}
