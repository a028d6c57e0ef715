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

mod status;
mod times;
pub use status::{Found, Kind, Status};

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::{Entry, TargetDir};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{Entry, TargetDir};
