//! The Linux side of [`super`].

use std::os::fd::{AsRawFd, OwnedFd};

use rustix::fs::{AtFlags, OFlags, Stat};

/// Added to [`super::LOOKUP`] to open a symlink itself rather than what it names: with
/// `O_PATH`, `O_NOFOLLOW` gives a descriptor of the link.
pub(crate) const THE_LINK_ITSELF: OFlags = OFlags::NOFOLLOW;

/// `st`'s file type and permission bits.
pub(crate) fn full_mode(st: &Stat) -> u32 {
    st.st_mode
}

/// `st`'s count of hard links.
pub(crate) fn links(st: &Stat) -> u64 {
    st.st_nlink
}

/// The status of what `fd` holds (a symlink opened as itself included).
pub(crate) fn stat_held(fd: &OwnedFd) -> rustix::io::Result<Stat> {
    rustix::fs::statat(fd, "", AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW)
}

/// The target of the symlink `fd` holds, opened as itself.
pub(crate) fn link_target_held(fd: &OwnedFd) -> Option<Vec<u8>> {
    rustix::fs::readlinkat(fd, "", Vec::new()).ok().map(|target| target.into_bytes())
}

/// Changes the mode of what `fd` holds. A descriptor opened with `O_PATH` takes no
/// fchmod; its /proc link names the very file it holds (proc(5)), which no rename since
/// can change.
pub(crate) fn chmod_held(fd: &OwnedFd, mode: u32) -> rustix::io::Result<()> {
    let held = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::chmod(held.as_str(), soku_engine::sys::mode(mode))
}

/// Turns transparent huge pages off for this process and what it starts (best effort).
pub(crate) fn no_huge_pages() {
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}
