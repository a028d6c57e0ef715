//! A sync's receiving side (see `soku_proto::sync`): the quick check that skips a file
//! before anything of it is read, and `--delete`'s pass once every file is in place.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use soku_proto::manifest::Meta;
use soku_proto::name::Name;
use soku_proto::path::{Target, WirePath};
use soku_proto::sync::{SkipReason, SyncRules};

use crate::filter::Filter;
use crate::fsops::{Kind, TargetDir};
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
        let held = status.filter(|st| st.kind == Kind::File);
        let target = held.map(|st| (st.size, st.modified));
        let reason =
            soku_proto::sync::decide(&self.rules, size, (meta.mtime, meta.mtime_nsec), target);
        if let (Some(SkipReason::Unchanged), Some(st), Some(entry)) = (reason, held, &entry) {
            let wanted = meta.mode & 0o777;
            if preserve && !self.rules.dry_run && st.mode & 0o777 != wanted {
                if let Some(file) = entry.open_final()? {
                    crate::sys::set_permission_bits(&file, wanted)?;
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
            let Ok(listed) = dir.list(&local) else { continue };
            for (name, kind) in listed {
                let Some(name) = Name::from_os(&name) else { continue };
                if names.contains(&name) {
                    continue;
                }
                let mut path = wire.clone();
                path.0.push(name.clone());
                if !self.filter.includes(&path, kind == Kind::Directory) {
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
