//! The local side's paths and errors as the session shows them.

use std::path::PathBuf;

/// A local path as typed: `~` from $HOME, relative ones from the local directory.
pub fn local_path(typed: &str) -> PathBuf {
    let home = || std::env::var_os("HOME").map(PathBuf::from);
    if typed == "~" {
        if let Some(home) = home() {
            return home;
        }
    }
    if let (Some(rest), Some(home)) = (typed.strip_prefix("~/"), home()) {
        return home.join(rest);
    }
    let path = PathBuf::from(typed);
    if path.is_absolute() {
        return path;
    }
    std::env::current_dir().map(|here| here.join(&path)).unwrap_or(path)
}

/// An I/O error in scp's words, as a copy's lines say it.
pub use soku_engine::failure::describe_io as reason;
