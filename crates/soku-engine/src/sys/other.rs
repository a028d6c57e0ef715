//! The side of [`super`] for Unix systems other than Linux (macOS, the BSDs).

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{OFlags, Stat};

use super::types::{Access, Beneath};

/// Open flags for a descriptor used only to look names up beneath it. Without
/// `O_PATH`, a read-only descriptor: a directory the user may search but not read
/// cannot be a target here.
pub const LOOKUP: OFlags = OFlags::RDONLY;

/// No kernel-checked resolution beneath a directory here: the caller walks the path
/// one component at a time, following no symlink (stricter than Linux's
/// `RESOLVE_BENEATH`, which follows those that stay beneath).
pub(crate) fn open_beneath(
    _dir: &OwnedFd,
    _rel: &Path,
    _flags: OFlags,
    _how: Beneath,
) -> Option<rustix::io::Result<OwnedFd>> {
    None
}

/// The permission bits (with set-id and sticky) of `st`.
pub(crate) fn mode_bits(st: &Stat) -> u32 {
    u32::from(st.st_mode) & 0o7777
}

/// `bits`' permission bits (with set-id and sticky) as a mode to create with
/// (`mode_t` is 16 bits on macOS; the permission bits fit).
pub fn mode(bits: u32) -> rustix::fs::Mode {
    rustix::fs::Mode::from_bits_truncate((bits & 0o7777) as rustix::fs::RawMode)
}

/// The device and inode of `st`: what tells one file from another.
pub(crate) fn device_and_inode(st: &Stat) -> (u64, u64) {
    // `dev_t` is signed on macOS; the bits are what identify the device.
    (st.st_dev as u64, st.st_ino)
}

/// No file-system magic numbers to match: direct I/O applies nowhere here.
pub(crate) fn file_system_magic(_fd: impl AsFd) -> Option<u64> {
    None
}

/// No direct I/O here: every read and write takes the page cache.
pub(crate) fn reopen_direct(_file: &File, _access: Access) -> std::io::Result<File> {
    Err(rustix::io::Errno::OPNOTSUPP.into())
}

/// Never asked without direct I/O; the page cache serves every read.
pub(crate) fn cached(_file: &File, _offset: u64) -> bool {
    true
}

/// No page-cache advice here.
pub(crate) fn read_only_what_is_asked(_file: &File) {}

/// No page-cache advice here: a read that follows may come from the cache.
pub fn drop_cached(_file: &File, _offset: u64, _len: u64) {}

/// No per-thread priority here: the hash-ahead threads run at the process's.
pub(crate) fn lower_this_thread(_nice: i32) {}

/// This process's umask. umask(2) reads it only by setting it, so it is set to 077 and
/// put back at once: a file another thread creates in between gets 077, stricter than
/// any umask, never looser. (The receiver creates its files owner-only and sets their
/// final modes itself, `crate::fsops`.)
pub(crate) fn read_umask() -> u32 {
    let old = rustix::process::umask(rustix::fs::Mode::from_bits_truncate(0o077));
    rustix::process::umask(old);
    u32::from(old.bits())
}
