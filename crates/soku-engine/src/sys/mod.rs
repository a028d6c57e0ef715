//! What the engine asks of the operating system that only some kernels give, one
//! function per need. Linux (`linux.rs`) has every mechanism; other Unix systems
//! (`other.rs`: macOS, the BSDs) get a plain path that is as safe and slower or less
//! frugal, never looser:
//!
//! - resolving a path beneath a directory: `openat2` with `RESOLVE_BENEATH`, else a
//!   walk of `openat(O_NOFOLLOW)` one component at a time (`crate::fsops`);
//! - descriptors for lookups only (`O_PATH`), else read-only ones;
//! - direct I/O past the page cache (`O_DIRECT`, the page-cache probe with
//!   `RWF_NOWAIT`, `posix_fadvise`), else the page cache;
//! - a lower priority for the hash-ahead threads, else the process's own.
//!
//! What every Unix system does alike (positional I/O, a file's status, names as bytes,
//! `errno`, `flock`) is `unix.rs`. Windows (`windows.rs`) has its own calls for each of
//! these and none of the Linux mechanisms; the receiver's file operations there are
//! `crate::fsops`' Windows side.
//!
//! The binary calls the public ones too: the lookup flags, a mode to create with,
//! the page-cache advice and positional I/O.

mod types;
#[cfg(unix)]
pub(crate) use types::Beneath;
pub(crate) use types::{Access, Locked, OsProblem};

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::*;
#[cfg(unix)]
pub use unix::{read_at, read_exact_at, write_all_at};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
#[cfg(target_os = "linux")]
pub use linux::{drop_cached, mode, LOOKUP};

#[cfg(all(unix, not(target_os = "linux")))]
mod other;
#[cfg(all(unix, not(target_os = "linux")))]
pub(crate) use other::*;
#[cfg(all(unix, not(target_os = "linux")))]
pub use other::{drop_cached, mode, LOOKUP};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;
#[cfg(windows)]
pub use windows::{drop_cached, read_at, read_exact_at, write_all_at};
