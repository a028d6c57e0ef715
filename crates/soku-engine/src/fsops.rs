//! File-system work of the receiver, done so that nothing lands outside the target and no
//! final name ever holds a partial file.
//!
//! - Every path below the target directory is resolved from a handle of that directory,
//!   opened once ([`TargetDir`]). On Unix (`fsops/unix.rs`) the kernel resolves it:
//!   `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` (Linux 5.6), else a walk of
//!   `openat(O_NOFOLLOW)` one component at a time. There is no window between checking
//!   a path and using it: a local process that swaps a directory for a symlink mid-copy
//!   makes that file fail, never a write outside the target. On Windows
//!   (`fsops/windows.rs`) `cap-std` resolves each path beneath the directory's handle,
//!   and a symlink or junction met on the way is refused.
//! - Data goes to a temporary name beside the final one (`.NAME.soku-part`); only a
//!   verified file is renamed into place (`renameat` within one directory descriptor on
//!   Unix), and the rename replaces a symlink at the final name instead of following it.

use std::fs::FileTimes;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use soku_proto::manifest::Meta;

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::{Entry, TargetDir};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{Entry, TargetDir};

/// What a name holds.
#[derive(Debug)]
pub enum Found {
    /// A regular file, opened.
    File(std::fs::File),
    /// A directory.
    Directory,
    /// Nothing, or something that is neither: a symlink (never followed), a device, a
    /// pipe, a socket.
    Neither,
}

impl Found {
    /// The file, if a regular file was found.
    pub fn into_file(self) -> Option<std::fs::File> {
        match self {
            Found::File(file) => Some(file),
            _ => None,
        }
    }
}

/// The kind of what a name holds, the name itself looked at (a symlink is not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symlink (or, on Windows, a junction or another reparse point).
    Symlink,
    /// A device, a pipe, a socket.
    Other,
}

/// The status of what a name holds, not following a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// What it is.
    pub kind: Kind,
    /// Its length in bytes.
    pub size: u64,
    /// When it was last written: seconds and nanoseconds since the Unix epoch.
    pub modified: (i64, u32),
    /// Its permission bits (with set-id and sticky).
    pub mode: u32,
}

fn times(meta: &Meta) -> FileTimes {
    FileTimes::new()
        .set_accessed(at(meta.atime, meta.atime_nsec))
        .set_modified(at(meta.mtime, meta.mtime_nsec))
}

fn at(secs: i64, nsec: u32) -> SystemTime {
    let nanos = Duration::from_nanos(u64::from(nsec.min(999_999_999)));
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs()) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nanos
    }
}
