//! Direct I/O (`O_DIRECT`): which file systems get it, and a second, direct descriptor
//! of a file already open.
//!
//! Both sides move large files past the page cache where that is a plain gain: the
//! receiver writes full chunks straight to the disk (`receive/files.rs`), the sender
//! reads straight from it the chunks that are not cached (`source_file.rs`). Either way
//! no copy between the page cache and the chunk's memory, and a terabyte copy does not
//! push everything else out of the cache. The memory side is `page_buf.rs`.

use std::fs::File;

use crate::page_buf::PAGE;

/// File systems on a local block device, where direct I/O goes straight to the device
/// (their magic numbers, Linux `include/uapi/linux/magic.h`): ext2/3/4, XFS, Btrfs,
/// F2FS. Elsewhere `O_DIRECT` means other things: on NFS or SMB a synchronous round
/// trip per call, on FUSE whatever the daemon does, on tmpfs and overlays no gain, so
/// those keep the page cache.
pub(crate) const LOCAL_DISK_FILE_SYSTEMS: [u64; 4] =
    [0xEF53, 0x5846_5342, 0x9123_683E, 0xF2F5_2010];

/// Whether soku moves large chunks of files on `fd`'s file system past the page cache:
/// only on a local disk's ([`LOCAL_DISK_FILE_SYSTEMS`]).
pub fn applies(fd: impl crate::sys::Handle) -> bool {
    crate::sys::file_system_magic(fd).is_some_and(|kind| LOCAL_DISK_FILE_SYSTEMS.contains(&kind))
}

/// Chunks smaller than this take the page cache: for a small file, a second descriptor
/// to open and the disk's latency on every call cost more than the copy they save.
const DIRECT_MIN: usize = 256 << 10;

/// Whether a chunk of `len` bytes at `offset` is worth direct I/O: large enough, and on a
/// page boundary in the file. (Its memory and length are the caller's to check.)
pub(crate) fn worth_it(len: usize, offset: u64) -> bool {
    len >= DIRECT_MIN && offset.is_multiple_of(PAGE as u64)
}

pub(crate) use crate::sys::Access;

/// A second, `O_DIRECT` descriptor of `file`: the same file whatever happened to its
/// name since (`crate::sys::reopen_direct`). Refused on file systems not in
/// [`LOCAL_DISK_FILE_SYSTEMS`], and where the system has no direct I/O.
pub(crate) fn open_direct(file: &File, access: Access) -> std::io::Result<File> {
    if !applies(file) {
        return Err(std::io::Error::from(std::io::ErrorKind::Unsupported));
    }
    crate::sys::reopen_direct(file, access)
}

/// Whether `err` is the refusal of a direct call the descriptor took at open: alignment
/// the device wants beyond ours, or a file system that checks only at the call.
pub(crate) fn refused(err: &std::io::Error) -> bool {
    err.raw_os_error().is_some() && err.kind() == std::io::ErrorKind::InvalidInput
}
