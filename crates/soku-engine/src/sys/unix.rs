//! What every Unix system of [`super`] does alike: positional reads and writes, a
//! file's status from `stat`, names as the bytes they are, `errno`'s codes, `flock`.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use rustix::io::Errno;

use super::types::{Locked, OsProblem};

/// A handle a file system can be asked about: a descriptor.
pub(crate) use std::os::fd::AsFd as Handle;

/// Reads at `offset` into `buf` (`pread`), as many bytes as one call gives.
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    file.read_at(buf, offset)
}

/// Reads at `offset` into the spare capacity of `buf`, without zeroing it first, and
/// grows `buf` by what was read.
pub(crate) fn read_into_spare(
    file: &File,
    buf: &mut Vec<u8>,
    offset: u64,
) -> std::io::Result<usize> {
    Ok(rustix::io::pread(file, rustix::buffer::spare_capacity(buf), offset)?)
}

/// Reads exactly `buf.len()` bytes at `offset`.
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    file.read_exact_at(buf, offset)
}

/// Writes all of `buf` at `offset` (`pwrite`).
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    file.write_all_at(buf, offset)
}

/// The device `md`'s file is on.
pub(crate) fn device(md: &Metadata) -> u64 {
    md.dev()
}

/// The device and inode of `md`'s file (at `_path`): what tells one file from another.
pub(crate) fn identity(_path: &Path, md: &Metadata) -> (u64, u64) {
    (md.dev(), md.ino())
}

/// How many names `md`'s file has.
pub(crate) fn links(md: &Metadata) -> u64 {
    md.nlink()
}

/// The permission bits (with set-id and sticky) of `md`'s file.
pub(crate) fn permission_bits(md: &Metadata) -> u32 {
    md.mode() & 0o7777
}

/// Sets the permission bits (with set-id and sticky) of `file` to `bits`.
pub(crate) fn set_permission_bits(file: &File, bits: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(bits & 0o7777))
}

/// When `md`'s file was last written: seconds and nanoseconds since the Unix epoch.
pub(crate) fn modified(md: &Metadata) -> (i64, i64) {
    (md.mtime(), md.mtime_nsec())
}

/// When `md`'s file was last read.
pub(crate) fn accessed(md: &Metadata) -> (i64, i64) {
    (md.atime(), md.atime_nsec())
}

/// When `md`'s status last changed (`ctime`): the one time no program can set back.
pub(crate) fn changed(md: &Metadata) -> (i64, i64) {
    (md.ctime(), md.ctime_nsec())
}

/// The space `st`'s file takes on disk: its allocated blocks, not its length.
pub(crate) fn allocated(st: &rustix::fs::Stat) -> u64 {
    u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512)
}

/// The file system's preferred block size for `md`'s file.
pub(crate) fn block_size(md: &Metadata) -> u64 {
    md.blksize()
}

/// A name's bytes, as they are.
pub(crate) fn name_bytes(name: &OsStr) -> Cow<'_, [u8]> {
    Cow::Borrowed(name.as_bytes())
}

/// The name these bytes are, as they are.
pub(crate) fn name_of(bytes: &[u8]) -> Cow<'_, OsStr> {
    Cow::Borrowed(OsStr::from_bytes(bytes))
}

/// What `err`'s code says, where soku words it its own way.
pub(crate) fn problem(err: &std::io::Error) -> Option<OsProblem> {
    Some(match err.raw_os_error()? {
        libc::ENOSPC => OsProblem::NoSpace,
        libc::EDQUOT => OsProblem::QuotaExceeded,
        libc::EROFS => OsProblem::ReadOnly,
        libc::EMFILE | libc::ENFILE => OsProblem::TooManyOpenFiles,
        libc::ENOTDIR => OsProblem::NotADirectory,
        libc::ELOOP => OsProblem::SymlinkInTheWay,
        libc::EISDIR => OsProblem::IsADirectory,
        _ => return None,
    })
}

/// The error this system gives for `problem`.
pub(crate) fn error_of(problem: OsProblem) -> std::io::Error {
    std::io::Error::from_raw_os_error(match problem {
        OsProblem::NoSpace => libc::ENOSPC,
        OsProblem::QuotaExceeded => libc::EDQUOT,
        OsProblem::ReadOnly => libc::EROFS,
        OsProblem::TooManyOpenFiles => libc::EMFILE,
        OsProblem::NotADirectory => libc::ENOTDIR,
        OsProblem::SymlinkInTheWay => libc::ELOOP,
        OsProblem::IsADirectory => libc::EISDIR,
    })
}

/// A directory held open to open names from: a descriptor.
pub(crate) type DirHandle = std::os::fd::OwnedFd;

/// The directory `dir` held open to open names from (`.` for an empty path); `None`
/// where it cannot be opened.
pub(crate) fn open_dir(dir: &Path) -> Option<DirHandle> {
    use rustix::fs::{Mode, OFlags};
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let flags = super::LOOKUP | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::open(dir, flags, Mode::empty()).ok()
}

/// Opens `name` in `dir` for reading (`openat`).
pub(crate) fn open_in(dir: &DirHandle, name: &OsStr) -> std::io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::openat(dir, name, flags, Mode::empty())?))
}

/// Opens `path` for reading, refusing a symlink at its last name, and without waiting
/// for a writer if it is a FIFO.
pub(crate) fn open_not_following(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// Takes the exclusive lock on `file` without waiting (`flock`).
pub(crate) fn try_lock(file: &File) -> std::io::Result<Locked> {
    use rustix::fs::{flock, FlockOperation};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Locked::Taken),
        Err(Errno::WOULDBLOCK) => Ok(Locked::Busy),
        // Some network file systems.
        Err(Errno::NOLCK | Errno::OPNOTSUPP) => Ok(Locked::Unsupported),
        Err(e) => Err(e.into()),
    }
}

/// Whether `len` bytes of `file` at `offset` are all hole (`SEEK_DATA`), `None` where
/// the file system cannot tell.
pub(crate) fn is_hole(file: &File, offset: u64, len: u32) -> std::io::Result<Option<bool>> {
    match rustix::fs::seek(file, rustix::fs::SeekFrom::Data(offset)) {
        Ok(next_data) => Ok(Some(next_data >= offset + u64::from(len))),
        // ENXIO: no data at or after `offset`.
        Err(Errno::NXIO) => Ok(Some(true)),
        Err(Errno::INVAL | Errno::OPNOTSUPP) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The effective user id, which names this user's own temporary files.
pub(crate) fn user_id() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The soft limit on open descriptors (`wanted` if it is unlimited), raised first to
/// the hard limit (at most `wanted`).
pub(crate) fn raise_open_files(wanted: u64) -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    let soft = now.current.unwrap_or(wanted);
    let wanted = now.maximum.map_or(wanted, |hard| hard.min(wanted));
    if soft < wanted {
        let raised = Rlimit { current: Some(wanted), maximum: now.maximum };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return Some(wanted);
        }
    }
    Some(soft)
}

#[cfg(test)]
mod tests {
    #[test]
    fn raising_the_open_files_limit_never_lowers_it() {
        use rustix::process::{getrlimit, Resource};
        let wanted = 1 << 16;
        let before = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
        let limit = super::raise_open_files(wanted).expect("a Unix limit");
        assert!(limit >= before.min(wanted), "{limit} after {before}");
        let now = getrlimit(Resource::Nofile).current;
        assert!(now.is_none_or(|now| now == limit), "in force: {now:?}, said: {limit}");
    }
}
