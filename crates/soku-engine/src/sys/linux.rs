//! The Linux side of [`super`].

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use rustix::fs::{Advice, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::{Errno, ReadWriteFlags};

use super::types::{Access, Beneath};

/// Open flags for a descriptor used only to look names up beneath it (`O_PATH`): it
/// needs no read permission on the directory.
pub const LOOKUP: OFlags = OFlags::PATH;

/// Opens `rel` beneath `dir` in one call the kernel checks (`openat2`, Linux 5.6), or
/// `None` where the kernel has no such call or a sandbox filters it (ENOSYS, EPERM):
/// then the caller walks the path itself.
pub(crate) fn open_beneath(
    dir: &OwnedFd,
    rel: &Path,
    flags: OFlags,
    how: Beneath,
) -> Option<rustix::io::Result<OwnedFd>> {
    let resolve = match how {
        Beneath::FollowingLinks => ResolveFlags::BENEATH,
        Beneath::NoLinks => ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
    };
    match rustix::fs::openat2(dir, rel, flags, Mode::empty(), resolve) {
        Err(Errno::NOSYS | Errno::PERM) => None,
        other => Some(other),
    }
}

/// The permission bits (with set-id and sticky) of `st`.
pub(crate) fn mode_bits(st: &Stat) -> u32 {
    st.st_mode & 0o7777
}

/// `bits`' permission bits (with set-id and sticky) as a mode to create with.
pub fn mode(bits: u32) -> Mode {
    Mode::from_bits_truncate(bits & 0o7777)
}

/// The device and inode of `st`: what tells one file from another.
pub(crate) fn device_and_inode(st: &Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

/// The magic number of the file system `fd` is on (32 bits: `f_type`'s width differs
/// between architectures).
pub(crate) fn file_system_magic(fd: impl AsFd) -> Option<u64> {
    rustix::fs::fstatfs(fd).ok().map(|stats| stats.f_type as u64 & 0xFFFF_FFFF)
}

/// A second, `O_DIRECT` descriptor of `file` opened with `access`, through
/// `/proc/self/fd`: the same file whatever happened to its name since.
pub(crate) fn reopen_direct(file: &File, access: Access) -> std::io::Result<File> {
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    let access = match access {
        Access::Read => OFlags::RDONLY,
        Access::Write => OFlags::WRONLY,
    };
    let flags = access | OFlags::DIRECT | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::open(path, flags, Mode::empty())?))
}

/// Whether the page at `offset` is in the page cache: a one-byte read that may not
/// wait for the disk (`RWF_NOWAIT`). Anything but "it would wait" counts as cached, so
/// the page cache's read reports a real error.
pub(crate) fn cached(file: &File, offset: u64) -> bool {
    let mut one = [0u8; 1];
    let probe = rustix::io::preadv2(
        file,
        &mut [std::io::IoSliceMut::new(&mut one)],
        offset,
        ReadWriteFlags::NOWAIT,
    );
    probe != Err(Errno::AGAIN)
}

/// Tells the page cache to read only what is asked of `file` (`POSIX_FADV_RANDOM`).
/// Advice only: a refusal changes nothing.
pub(crate) fn read_only_what_is_asked(file: &File) {
    let _ = rustix::fs::fadvise(file, 0, None, Advice::Random);
}

/// Tells the page cache to drop the clean pages of `len` bytes of `file` at `offset`
/// (0: to the end), which will not be read again from it (`POSIX_FADV_DONTNEED`).
/// Advice only.
pub fn drop_cached(file: &File, offset: u64, len: u64) {
    let _ = rustix::fs::fadvise(file, offset, std::num::NonZeroU64::new(len), Advice::DontNeed);
}

/// Lowers the calling thread's priority to `nice` (Linux sets it per thread). Best
/// effort.
pub(crate) fn lower_this_thread(nice: i32) {
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), nice);
}

/// This process's umask, from `/proc/self/status` (Linux 4.7): umask(2) can only read
/// it by setting it, for every thread at once. 022 where it cannot be read.
pub(crate) fn read_umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Umask:"))?;
            u32::from_str_radix(line.trim_start_matches("Umask:").trim(), 8).ok()
        })
        .unwrap_or(0o022)
}
