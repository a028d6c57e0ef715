//! File-system work of the receiver, done so that nothing lands outside the target and no
//! final name ever holds a partial file.
//!
//! - Data goes to a temporary name beside the final one (`.NAME.soku-part`); only a
//!   verified file is renamed into place, and `rename` replaces a symlink at the final
//!   name instead of following it.
//! - Directories below the target root are created by us; a symlink found at a path we
//!   are about to create or enter is refused, so a peer cannot steer writes elsewhere.

use std::fs::{File, FileTimes, OpenOptions};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use soku_proto::manifest::Meta;

use crate::partial::Trailer;

/// The temporary name for a file being received.
pub fn temp_path(local: &Path) -> PathBuf {
    let name = local.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    local.with_file_name(format!(".{name}.soku-part"))
}

/// Refuses `local` if any existing component between `root` and `local` (excluding `root`
/// itself, which the user named) is a symlink.
pub fn check_no_symlinks(root: &Path, local: &Path) -> std::io::Result<()> {
    let Ok(below) = local.strip_prefix(root) else {
        return Err(std::io::Error::other(format!("{} is outside the target", local.display())));
    };
    let mut at = root.to_path_buf();
    for part in below.components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(md) if md.file_type().is_symlink() && at != local => {
                return Err(std::io::Error::other(format!(
                    "{} is a symbolic link: refusing to write through it",
                    at.display()
                )))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Makes sure `local` is a directory we may write into (not a symlink).
pub fn ensure_dir(root: &Path, local: &Path) -> std::io::Result<()> {
    check_no_symlinks(root, local)?;
    match std::fs::symlink_metadata(local) {
        Ok(md) if md.is_dir() => Ok(()),
        Ok(md) if md.file_type().is_symlink() => Err(std::io::Error::other(format!(
            "{} is a symbolic link: refusing to write through it",
            local.display()
        ))),
        Ok(_) => Err(std::io::Error::from_raw_os_error(libc::ENOTDIR)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(local),
        Err(e) => Err(e),
    }
}

/// Creates the temporary file for `local`, sized to `size`, with the partial-file
/// `trailer` after it when resuming is on ([`crate::partial`]). The mode is the sender's
/// permission bits, to which the kernel applies our umask, as scp does.
pub fn create_temp(
    root: &Path,
    local: &Path,
    size: u64,
    mode: u32,
    trailer: Option<&Trailer>,
) -> std::io::Result<File> {
    check_no_symlinks(root, local)?;
    if std::fs::symlink_metadata(local).is_ok_and(|md| md.is_dir()) {
        return Err(std::io::Error::from_raw_os_error(libc::EISDIR));
    }
    let tmp = temp_path(local);
    let _ = std::fs::remove_file(&tmp);
    // Readable too: a resumed copy hashes what an earlier run wrote.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode((mode & 0o777) | 0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    match trailer {
        Some(trailer) => trailer.write_to(&file)?,
        None => file.set_len(size)?,
    }
    Ok(file)
}

/// Cuts a partial file's trailer, applies metadata to the verified temporary file, with
/// `fsync` flushes its data to disk, and renames it into place. The flush comes before
/// the rename, so a final name never holds data the disk does not have, whatever a power
/// cut interrupts (docs/durability.md).
pub fn finish_file(
    local: &Path,
    file: &File,
    size: u64,
    meta: &Meta,
    preserve: bool,
    fsync: bool,
) -> std::io::Result<()> {
    if file.metadata()?.len() != size {
        file.set_len(size)?;
    }
    if fsync {
        file.sync_data()?;
    }
    if preserve {
        file.set_permissions(std::fs::Permissions::from_mode(meta.mode & 0o7777))?;
        file.set_times(times(meta))?;
    } else {
        // The temp file had owner write added so we could fill it; give the sender's
        // bits back (the umask already applied at creation).
        let current = file.metadata()?.permissions().mode() & 0o777;
        let wanted = current & (meta.mode | !0o600);
        file.set_permissions(std::fs::Permissions::from_mode(wanted))?;
    }
    std::fs::rename(temp_path(local), local)
}

/// A file found complete at its final name: with `-p` its metadata is set as for a file
/// received; without, it is left as it is (as scp leaves an overwritten file's mode).
pub fn finish_in_place(local: &Path, meta: &Meta, preserve: bool) -> std::io::Result<()> {
    if preserve {
        let file = OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW).open(local)?;
        file.set_permissions(std::fs::Permissions::from_mode(meta.mode & 0o7777))?;
        file.set_times(times(meta))?;
    }
    Ok(())
}

/// Applies directory metadata (with `-p`).
pub fn finish_dir(local: &Path, meta: &Meta) -> std::io::Result<()> {
    std::fs::set_permissions(local, std::fs::Permissions::from_mode(meta.mode & 0o7777))?;
    File::open(local)?.set_times(times(meta))
}

/// Removes the temporary file of a failed transfer.
pub fn discard(local: &Path) {
    let _ = std::fs::remove_file(temp_path(local));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlinked_directory_below_the_root_is_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        std::os::unix::fs::symlink(outside.path(), root.join("link")).expect("symlink");
        let err = create_temp(root, &root.join("link/x"), 1, 0o644, None).expect_err("refused");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(ensure_dir(root, &root.join("link")).is_err());
        assert_eq!(std::fs::read_dir(outside.path()).expect("read").count(), 0);
    }

    #[test]
    fn a_file_appears_under_its_name_only_when_finished() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let local = tmp.path().join("f");
        let file = create_temp(tmp.path(), &local, 3, 0o640, None).expect("created");
        assert!(!local.exists());
        let meta = Meta { mode: 0o640, mtime: 1_000_000_000, ..Meta::default() };
        finish_file(&local, &file, 3, &meta, true, true).expect("finished");
        let md = std::fs::metadata(&local).expect("exists");
        assert_eq!(md.len(), 3);
        assert_eq!(md.permissions().mode() & 0o777, 0o640);
        assert_eq!(md.modified().expect("mtime"), at(1_000_000_000, 0));
        assert!(!temp_path(&local).exists());
    }
}
