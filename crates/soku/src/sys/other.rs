//! The side of [`super`] for Unix systems other than Linux (macOS, the BSDs).

use std::os::fd::OwnedFd;

use rustix::fs::{OFlags, Stat};

/// Added to [`super::LOOKUP`] to open a symlink itself rather than what it names
/// (`O_SYMLINK` on macOS).
#[cfg(target_vendor = "apple")]
pub(crate) const THE_LINK_ITSELF: OFlags = OFlags::SYMLINK;
/// Without a way to open a symlink itself, `O_NOFOLLOW`: a symlink is then refused
/// (ELOOP) rather than followed.
#[cfg(not(target_vendor = "apple"))]
pub(crate) const THE_LINK_ITSELF: OFlags = OFlags::NOFOLLOW;

/// `st`'s file type and permission bits.
pub(crate) fn full_mode(st: &Stat) -> u32 {
    u32::from(st.st_mode)
}

/// `st`'s count of hard links.
pub(crate) fn links(st: &Stat) -> u64 {
    u64::from(st.st_nlink)
}

/// The status of what `fd` holds.
pub(crate) fn stat_held(fd: &OwnedFd) -> rustix::io::Result<Stat> {
    rustix::fs::fstat(fd)
}

/// No `readlinkat` of a descriptor here: the target of a symlink listed alone is not
/// shown.
pub(crate) fn link_target_held(_fd: &OwnedFd) -> Option<Vec<u8>> {
    None
}

/// Changes the mode of what `fd` holds (opened read-only here, so fchmod takes it).
pub(crate) fn chmod_held(fd: &OwnedFd, mode: u32) -> rustix::io::Result<()> {
    rustix::fs::fchmod(fd, soku_engine::sys::mode(mode))
}

/// No transparent huge pages to turn off here.
pub(crate) fn no_huge_pages() {}
