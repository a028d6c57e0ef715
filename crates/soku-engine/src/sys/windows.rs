//! The Windows side of [`super`]. None of the Linux mechanisms exist here; each
//! function says what stands in for it. The receiver's file operations are
//! `crate::fsops`' Windows side, on `cap-std`.

use std::borrow::Cow;
use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata, TryLockError};
use std::hash::{Hash, Hasher};
use std::os::windows::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::types::{Access, Locked, OsProblem};

/// A handle a file system can be asked about.
pub(crate) use std::os::windows::io::AsHandle as Handle;

/// Win32 error codes (`winerror.h`) that soku words its own way.
const ERROR_TOO_MANY_OPEN_FILES: i32 = 4;
const ERROR_WRITE_PROTECT: i32 = 19;
const ERROR_HANDLE_DISK_FULL: i32 = 39;
const ERROR_DISK_FULL: i32 = 112;
/// "The directory name is invalid": a part of the path is a file.
const ERROR_DIRECTORY: i32 = 267;
/// "An operation is not supported on a directory."
const ERROR_DIRECTORY_NOT_SUPPORTED: i32 = 336;
const ERROR_DISK_QUOTA_EXCEEDED: i32 = 1295;
/// "The name of the file cannot be resolved by the system": a symlink or junction in
/// the way, which soku does not follow into a target.
const ERROR_CANT_RESOLVE_FILENAME: i32 = 1921;

/// `CreateFile`'s flag to open a symlink or junction itself, not what it points to.
const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;

/// Reads at `offset` into `buf`, as many bytes as one call gives (`ReadFile` with an
/// offset; the handle's own position moves too, which no caller uses).
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    file.seek_read(buf, offset)
}

/// Reads at `offset` into the spare capacity of `buf` and grows `buf` by what was read.
/// The spare capacity is zeroed first: Windows has no read into memory not yet
/// initialised that the standard library offers.
pub(crate) fn read_into_spare(
    file: &File,
    buf: &mut Vec<u8>,
    offset: u64,
) -> std::io::Result<usize> {
    let start = buf.len();
    buf.resize(buf.capacity().max(start + 1), 0);
    let read = file.seek_read(&mut buf[start..], offset);
    buf.truncate(start + *read.as_ref().unwrap_or(&0));
    read
}

/// Reads exactly `buf.len()` bytes at `offset`.
pub fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match file.seek_read(buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// Writes all of `buf` at `offset`.
pub fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match file.seek_write(buf, offset)? {
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            n => {
                buf = &buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// The volume `md`'s file is on: not in the standard library's stable metadata here, so
/// every file counts as on one volume (what asks, the small-step rule, then looks once).
pub(crate) fn device(_md: &Metadata) -> u64 {
    0
}

/// What tells one file from another: its canonical path (symlinks and junctions
/// resolved), hashed. The volume serial number and file index that would name it
/// are not in the standard library's stable metadata.
pub(crate) fn identity(path: &Path, _md: &Metadata) -> (u64, u64) {
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    canonical.hash(&mut hasher);
    (0, hasher.finish())
}

/// How many names `md`'s file has: one (the count is not in the stable metadata).
pub(crate) fn links(_md: &Metadata) -> u64 {
    1
}

/// Permission bits as a Unix peer reads them: Windows has a read-only attribute, not
/// modes, so a directory is 0755, a read-only file 0444, any other 0644.
pub(crate) fn permission_bits(md: &Metadata) -> u32 {
    bits_of(md.is_dir(), md.permissions().readonly())
}

/// [`permission_bits`] of a directory or a file with or without the read-only
/// attribute, however its status was read.
pub(crate) fn bits_of(directory: bool, readonly: bool) -> u32 {
    if directory {
        0o755
    } else if readonly {
        0o444
    } else {
        0o644
    }
}

/// Sets `file` read-only when `bits` give its owner no write permission, writable
/// otherwise: the one permission Windows keeps as an attribute.
pub(crate) fn set_permission_bits(file: &File, bits: u32) -> std::io::Result<()> {
    let mut permissions = file.metadata()?.permissions();
    permissions.set_readonly(bits & 0o200 == 0);
    file.set_permissions(permissions)
}

/// 100-ns intervals from 1601-01-01 (a `FILETIME`) as seconds and nanoseconds since
/// the Unix epoch.
fn unix_time(filetime: u64) -> (i64, i64) {
    const FROM_1601_TO_1970: i128 = 116_444_736_000_000_000;
    let ticks = i128::from(filetime) - FROM_1601_TO_1970;
    let secs = ticks.div_euclid(10_000_000);
    let nanos = ticks.rem_euclid(10_000_000) * 100;
    (i64::try_from(secs).unwrap_or(i64::MAX), nanos as i64)
}

/// When `md`'s file was last written.
pub(crate) fn modified(md: &Metadata) -> (i64, i64) {
    unix_time(md.last_write_time())
}

/// When `md`'s file was last read.
pub(crate) fn accessed(md: &Metadata) -> (i64, i64) {
    unix_time(md.last_access_time())
}

/// The time that stands in for a status change: the creation time, which a program
/// rarely sets back, and which a file put in another's place under its name brings
/// along. (Windows keeps a change time too, not in the stable metadata.)
pub(crate) fn changed(md: &Metadata) -> (i64, i64) {
    unix_time(md.creation_time())
}

/// The block size partial files are checked in: NTFS's usual cluster.
pub(crate) fn block_size(_md: &Metadata) -> u64 {
    4096
}

/// A name's bytes: its UTF-8 (a name that is not valid UTF-16 gets U+FFFD where it is
/// not).
pub(crate) fn name_bytes(name: &OsStr) -> Cow<'_, [u8]> {
    match name.to_string_lossy() {
        Cow::Borrowed(text) => Cow::Borrowed(text.as_bytes()),
        Cow::Owned(text) => Cow::Owned(text.into_bytes()),
    }
}

/// The name these bytes are, read as UTF-8 (U+FFFD for what is not).
pub(crate) fn name_of(bytes: &[u8]) -> Cow<'_, OsStr> {
    match String::from_utf8_lossy(bytes) {
        Cow::Borrowed(text) => Cow::Borrowed(OsStr::new(text)),
        Cow::Owned(text) => Cow::Owned(OsString::from(text)),
    }
}

/// What `err`'s code says, where soku words it its own way.
pub(crate) fn problem(err: &std::io::Error) -> Option<OsProblem> {
    Some(match err.raw_os_error()? {
        ERROR_DISK_FULL | ERROR_HANDLE_DISK_FULL => OsProblem::NoSpace,
        ERROR_DISK_QUOTA_EXCEEDED => OsProblem::QuotaExceeded,
        ERROR_WRITE_PROTECT => OsProblem::ReadOnly,
        ERROR_TOO_MANY_OPEN_FILES => OsProblem::TooManyOpenFiles,
        ERROR_DIRECTORY => OsProblem::NotADirectory,
        ERROR_CANT_RESOLVE_FILENAME => OsProblem::SymlinkInTheWay,
        ERROR_DIRECTORY_NOT_SUPPORTED => OsProblem::IsADirectory,
        _ => return None,
    })
}

/// The error this system gives for `problem`.
pub(crate) fn error_of(problem: OsProblem) -> std::io::Error {
    std::io::Error::from_raw_os_error(match problem {
        OsProblem::NoSpace => ERROR_DISK_FULL,
        OsProblem::QuotaExceeded => ERROR_DISK_QUOTA_EXCEEDED,
        OsProblem::ReadOnly => ERROR_WRITE_PROTECT,
        OsProblem::TooManyOpenFiles => ERROR_TOO_MANY_OPEN_FILES,
        OsProblem::NotADirectory => ERROR_DIRECTORY,
        OsProblem::SymlinkInTheWay => ERROR_CANT_RESOLVE_FILENAME,
        OsProblem::IsADirectory => ERROR_DIRECTORY_NOT_SUPPORTED,
    })
}

/// A directory to open names from: its path (a handle would not save the walk that it
/// saves on Unix, as Windows opens every path from its volume's root anyway).
pub(crate) type DirHandle = PathBuf;

/// The directory `dir` to open names from.
pub(crate) fn open_dir(dir: &Path) -> Option<DirHandle> {
    Some(dir.to_path_buf())
}

/// Opens `name` in `dir` for reading.
pub(crate) fn open_in(dir: &DirHandle, name: &OsStr) -> std::io::Result<File> {
    File::open(dir.join(name))
}

/// Opens `path` for reading; a symlink or junction at its last name is opened itself
/// (which the caller then finds is no regular file), not followed.
pub(crate) fn open_not_following(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new().read(true).custom_flags(FILE_FLAG_OPEN_REPARSE_POINT).open(path)
}

/// Takes the exclusive lock on `file` without waiting (`LockFileEx`).
pub(crate) fn try_lock(file: &File) -> std::io::Result<Locked> {
    match file.try_lock() {
        Ok(()) => Ok(Locked::Taken),
        Err(TryLockError::WouldBlock) => Ok(Locked::Busy),
        Err(TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Unsupported => {
            Ok(Locked::Unsupported)
        }
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// Whether bytes of a file are hole: not asked here (`FSCTL_QUERY_ALLOCATED_RANGES`
/// would tell), so a resumed partial file is read whole.
pub(crate) fn is_hole(_file: &File, _offset: u64, _len: u32) -> std::io::Result<Option<bool>> {
    Ok(None)
}

/// No user id: a directory's access control list, not a sticky bit, decides whose
/// files may be removed, so the per-user temporary name is never needed here.
pub(crate) fn user_id() -> u32 {
    0
}

/// No limit on open files to raise: handles are limited by memory alone.
pub(crate) fn raise_open_files(wanted: u64) -> Option<u64> {
    Some(wanted)
}

/// No direct I/O here: every read and write takes the file cache.
pub(crate) fn reopen_direct(_file: &File, _access: Access) -> std::io::Result<File> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// No file-system magic numbers: direct I/O applies nowhere, small steps wait as
/// "elsewhere".
pub(crate) fn file_system_magic(_handle: impl Handle) -> Option<u64> {
    None
}

/// Never asked without direct I/O.
pub(crate) fn cached(_file: &File, _offset: u64) -> bool {
    true
}

/// No cache advice here.
pub(crate) fn read_only_what_is_asked(_file: &File) {}

/// No cache advice here: a read that follows may come from the cache.
pub fn drop_cached(_file: &File, _offset: u64, _len: u64) {}

/// No per-thread priority here: the hash-ahead threads run at the process's.
pub(crate) fn lower_this_thread(_nice: i32) {}

#[cfg(test)]
mod tests {
    #[test]
    fn filetimes_turn_into_unix_times() {
        assert_eq!(super::unix_time(116_444_736_000_000_000), (0, 0));
        assert_eq!(super::unix_time(116_444_736_000_000_001), (0, 100));
        assert_eq!(super::unix_time(116_444_735_999_999_999), (-1, 999_999_900));
    }
}
