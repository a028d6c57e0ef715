//! A sync's receiving side (see `soku_proto::sync`): the quick check that skips a file
//! before anything of it is read, and `--delete`'s pass once every file is in place.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use soku_proto::manifest::Meta;
use soku_proto::name::Name;
use soku_proto::path::{Target, WirePath};
use soku_proto::sync::{SkipReason, SyncRules};

use crate::filter::Filter;
use crate::fsops::TargetDir;
use crate::mutex::lock;

/// What a sync's receiver keeps besides the copy's own state.
pub(super) struct SyncState {
    pub(super) rules: SyncRules,
    filter: Filter,
    /// With delete: each directory announced (the target itself as the empty path,
    /// when the source's contents come into it) and the names announced in it.
    seen: std::sync::Mutex<HashMap<WirePath, HashSet<Name>>>,
}

impl SyncState {
    /// The state for `rules`, whose patterns the sender sent (a bad one ends the copy).
    pub(super) fn new(rules: SyncRules) -> Result<SyncState, crate::filter::BadPattern> {
        let filter = Filter::new(&rules.filter)?;
        let mut seen = HashMap::new();
        if rules.contents {
            seen.insert(WirePath(Vec::new()), HashSet::new());
        }
        Ok(SyncState { rules, filter, seen: std::sync::Mutex::new(seen) })
    }

    /// Notes an entry the sender announced, for delete.
    pub(super) fn record(&self, path: &WirePath, is_dir: bool) {
        if !self.rules.delete {
            return;
        }
        let mut seen = lock(&self.seen);
        if is_dir {
            seen.entry(path.clone()).or_default();
        }
        if let Some((name, parent)) = path.0.split_last() {
            let parent = WirePath(parent.to_vec());
            if let Some(names) = seen.get_mut(&parent) {
                names.insert(name.clone());
            }
        }
    }

    /// The quick check of a file of the sender's `size` and `meta` at `local`; `None`:
    /// receive it. With `preserve`, an unchanged file whose mode differs gets the
    /// source's (rsync's `-a` does the same), unless this is a dry run.
    pub(super) fn check(
        &self,
        dir: &TargetDir,
        local: &Path,
        size: u64,
        meta: &Meta,
        preserve: bool,
    ) -> std::io::Result<Option<SkipReason>> {
        let entry = match dir.entry(local) {
            Ok(entry) => Some(entry),
            // The directory above is not there (yet, or in a dry run at all).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let status = match &entry {
            Some(entry) => entry.final_status()?,
            None => None,
        };
        let held = status.filter(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile);
        let target = held.map(|st| {
            let size = u64::try_from(st.st_size).unwrap_or(0);
            (size, (st.st_mtime, u32::try_from(st.st_mtime_nsec).unwrap_or(0)))
        });
        let reason =
            soku_proto::sync::decide(&self.rules, size, (meta.mtime, meta.mtime_nsec), target);
        if let (Some(SkipReason::Unchanged), Some(st), Some(entry)) = (reason, held, &entry) {
            let wanted = meta.mode & 0o777;
            if preserve && !self.rules.dry_run && crate::sys::mode_bits(&st) & 0o777 != wanted {
                if let Some(file) = entry.open_final()? {
                    use std::os::unix::fs::PermissionsExt;
                    file.set_permissions(std::fs::Permissions::from_mode(wanted))?;
                }
            }
        }
        Ok(reason)
    }

    /// With delete: what the transferred directories hold that the sender did not
    /// announce and no rule excludes, sorted, each with its local path. A directory
    /// that is not there (a dry run's) holds nothing.
    pub(super) fn extras(&self, dir: &TargetDir, target: &Target) -> Vec<(WirePath, PathBuf)> {
        if !self.rules.delete {
            return Vec::new();
        }
        let seen = lock(&self.seen);
        let mut out = Vec::new();
        for (wire, names) in seen.iter() {
            let local = if wire.0.is_empty() {
                target.root().to_path_buf()
            } else {
                match target.local_path(wire) {
                    Ok(local) => local,
                    Err(_) => continue,
                }
            };
            let Ok(fd) = dir.list_dir(&local) else { continue };
            let Ok(listed) = list(&fd) else { continue };
            for (name, kind) in listed {
                let name = Name::from_bytes(name);
                if names.contains(&name) {
                    continue;
                }
                let mut path = wire.clone();
                path.0.push(name.clone());
                if !self.filter.includes(&path, kind == FileType::Directory) {
                    continue;
                }
                let Some(os) = name.to_os() else { continue };
                out.push((path, local.join(os)));
            }
        }
        out.sort_by(|a, b| a.1.cmp(&b.1));
        out
    }
}

/// The entries of an open directory, with their kinds (not following symlinks).
fn list(dir: &OwnedFd) -> std::io::Result<Vec<(Vec<u8>, FileType)>> {
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => {
                rustix::fs::statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                    .map(|st| FileType::from_raw_mode(st.st_mode))?
            }
            kind => kind,
        };
        out.push((name.to_vec(), kind));
    }
    Ok(out)
}

/// Most directory levels a removal goes down: as deep as a wire path may name.
const MAX_DEPTH: usize = soku_proto::path::MAX_DEPTH;

/// Removes `local` below the target: a file or a link itself, a directory with all it
/// holds. Nothing is followed through a symlink, and every step is taken from an open
/// directory, so a link swapped in meanwhile is removed, never its target.
pub(super) fn remove(dir: &TargetDir, local: &Path) -> std::io::Result<()> {
    let entry = dir.entry(local)?;
    let Some(name) = local.file_name() else { return Ok(()) };
    let parent = local.parent().unwrap_or(Path::new(""));
    let parent = dir.list_dir(parent)?;
    match entry.final_status()? {
        None => Ok(()),
        Some(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
            remove_tree(&parent, name, 0)
        }
        Some(_) => Ok(rustix::fs::unlinkat(&parent, name, AtFlags::empty())?),
    }
}

fn remove_tree(parent: &OwnedFd, name: &OsStr, depth: usize) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(std::io::Error::other("deeper than a copy can name: not removed"));
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(parent, name, flags, Mode::empty())?;
    for (child, kind) in list(&fd)? {
        let child = OsStr::from_bytes(&child);
        if kind == FileType::Directory {
            remove_tree(&fd, child, depth + 1)?;
        } else {
            rustix::fs::unlinkat(fd.as_fd(), child, AtFlags::empty())?;
        }
    }
    Ok(rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR)?)
}
