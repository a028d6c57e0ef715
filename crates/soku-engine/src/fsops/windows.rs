//! The receiver's file-system work on Windows, on `cap-std` (the Bytecode Alliance's
//! capability-based file system): every path below the target is resolved from a
//! handle of the target directory, and `cap-std` refuses any that would lead outside
//! it, `..` or a symlink or junction pointing out. On top of that, a symlink or
//! junction met on the way to a file is refused, as on Unix: a receiver writes only
//! through directories it can trust. A link swapped in between that look and the open
//! can at most lead elsewhere beneath the target, never outside it.
//!
//! What Windows does not have, or does otherwise:
//! - permissions: the read-only attribute stands for the owner's write bit
//!   (`crate::sys::set_permission_bits`); a file's temporary name is not made private
//!   first, as the user's own directories' access lists already keep others out;
//! - no per-user temporary name: no sticky directories, so the usual temporary name
//!   can always be replaced by its directory's writers;
//! - a read-only file at the final name is made writable first, so that the verified
//!   file can take its place (Windows refuses to replace a read-only file);
//! - names a Windows file system cannot hold (`soku_proto::windows_name`) are refused
//!   with their reason before anything is made;
//! - two names of one copy that differ only in case (`A.txt`, `a.txt`) would be one
//!   file here (NTFS compares names without case): the second is refused with both
//!   names, rather than written over the first ([`Cases`]).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, Metadata, OpenOptions, OpenOptionsExt};
use soku_proto::manifest::Meta;
use soku_proto::name::shown;

use super::status::{Found, Kind, Status};
use super::times::times;
use crate::failure::Outside;
use crate::partial::made_dir::{self, MARK};
use crate::partial::trailer::Trailer;
use crate::small_steps::Keeps;
use crate::sys::{self, OsProblem};
use crate::temp_name::{own_temp_name, temp_name};

/// `CreateFile` access rights to read and write a file's attributes and times only,
/// which a read-only file allows.
const FILE_READ_ATTRIBUTES: u32 = 0x0080;
const FILE_WRITE_ATTRIBUTES: u32 = 0x0100;

/// The target directory of a copy, opened once: everything below it is reached through
/// this handle.
#[derive(Debug)]
pub struct TargetDir {
    dir: Dir,
    path: PathBuf,
    cases: Arc<Cases>,
}

/// The paths below the target this copy has named so far, by their case-folded form:
/// a second path that folds to the same one names the same file here.
#[derive(Debug, Default)]
struct Cases(Mutex<HashMap<String, PathBuf>>);

impl Cases {
    /// Claims `rel` and each directory above it; refuses a path that differs from one
    /// claimed before only in case.
    fn claim(&self, rel: &Path) -> std::io::Result<()> {
        let mut seen = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut prefix = PathBuf::new();
        for part in rel.components() {
            prefix.push(part);
            let folded = prefix.to_string_lossy().to_lowercase();
            match seen.get(&folded) {
                Some(earlier) if *earlier != prefix => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidFilename,
                        format!(
                            "the names {} and {} differ only in case, which Windows does not \
                             tell apart: rename one on the sending side",
                            shown(earlier),
                            shown(&prefix)
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    seen.insert(folded, prefix.clone());
                }
            }
        }
        Ok(())
    }
}

/// A name below the target and its directory, opened.
#[derive(Debug)]
pub struct Entry {
    dir: Dir,
    name: OsString,
}

impl Entry {
    fn temp(&self) -> OsString {
        temp_name(&self.name)
    }

    fn stat(&self) -> std::io::Result<Option<Kind>> {
        Ok(status_at(&self.dir, &self.name)?.map(|(kind, _)| kind))
    }

    /// Creates the temporary file for this name, sized to `size`, with the partial-file
    /// `trailer` after it when resuming is on, replacing whatever an earlier run left at
    /// the temporary name. A directory at the final name is refused now.
    pub fn create_temp(
        &self,
        size: u64,
        mode: u32,
        trailer: Option<&Trailer>,
    ) -> std::io::Result<File> {
        if self.final_is_directory()? {
            return Err(sys::error_of(OsProblem::IsADirectory));
        }
        self.replace_temp(size, mode, trailer)
    }

    /// The permission bits of a regular file at the final name, if one is there.
    pub fn final_file_mode(&self) -> std::io::Result<Option<u32>> {
        Ok(self.final_status()?.filter(|st| st.kind == Kind::File).map(|st| st.mode))
    }

    /// Whether a directory is at the final name (a symlink or junction to one is not).
    pub fn final_is_directory(&self) -> std::io::Result<bool> {
        Ok(self.stat()? == Some(Kind::Directory))
    }

    /// [`Self::create_temp`] without its look at the final name.
    pub fn replace_temp(
        &self,
        size: u64,
        mode: u32,
        trailer: Option<&Trailer>,
    ) -> std::io::Result<File> {
        if let Some(file) = self.create_new_temp(size, mode, trailer)? {
            return Ok(file);
        }
        match self.dir.remove_file(self.temp()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        self.create_new_temp(size, mode, trailer)?
            .ok_or_else(|| std::io::ErrorKind::AlreadyExists.into())
    }

    /// Creates the temporary file if nothing is at its name: `None` if something is.
    pub fn create_new_temp(
        &self,
        size: u64,
        _mode: u32,
        trailer: Option<&Trailer>,
    ) -> std::io::Result<Option<File>> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create_new(true);
        let file = match self.dir.open_with(self.temp(), &options) {
            Ok(file) => file.into_std(),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
            Err(e) => return Err(e),
        };
        match trailer {
            Some(trailer) => trailer.write_to(&file)?,
            None => file.set_len(size)?,
        }
        Ok(Some(file))
    }

    /// Opens the temporary file of this name for reading and writing, if it is a
    /// regular file; anything else there is treated as absent and replaced.
    pub fn open_temp(&self) -> std::io::Result<Option<File>> {
        match look(&self.dir, &self.temp(), true)? {
            Found::Directory => Err(sys::error_of(OsProblem::IsADirectory)),
            found => Ok(found.into_file()),
        }
    }

    /// Opens the file at this final name for reading, if it is a regular file.
    pub fn open_final(&self) -> std::io::Result<Option<File>> {
        Ok(self.look_final()?.into_file())
    }

    /// What is at this final name, a regular file opened for reading.
    pub fn look_final(&self) -> std::io::Result<Found> {
        look(&self.dir, &self.name, false)
    }

    /// The status of what is at this final name, not following a symlink (`None`:
    /// nothing there).
    pub fn final_status(&self) -> std::io::Result<Option<Status>> {
        Ok(status_at(&self.dir, &self.name)?.map(|(kind, md)| status(kind, &md)))
    }
}

fn status(kind: Kind, md: &Metadata) -> Status {
    let since_epoch = |time: std::time::SystemTime| match time.duration_since(std::time::UNIX_EPOCH)
    {
        Ok(after) => (i64::try_from(after.as_secs()).unwrap_or(i64::MAX), after.subsec_nanos()),
        Err(before) => {
            let before = before.duration();
            let secs = i64::try_from(before.as_secs()).unwrap_or(i64::MAX);
            match before.subsec_nanos() {
                0 => (-secs, 0),
                nanos => (-secs - 1, 1_000_000_000 - nanos),
            }
        }
    };
    let mode = sys::bits_of(kind == Kind::Directory, md.permissions().readonly());
    Status {
        kind,
        size: md.len(),
        modified: md.modified().map(|time| since_epoch(time.into_std())).unwrap_or((0, 0)),
        mode,
    }
}

/// The kind a file type (not following a link) names.
fn kind(file_type: cap_std::fs::FileType) -> Kind {
    if file_type.is_symlink() {
        Kind::Symlink
    } else if file_type.is_dir() {
        Kind::Directory
    } else if file_type.is_file() {
        Kind::File
    } else {
        Kind::Other
    }
}

/// What kind of thing `name` in `dir` is, and its status, the name itself looked at.
fn status_at(dir: &Dir, name: &OsStr) -> std::io::Result<Option<(Kind, Metadata)>> {
    match dir.symlink_metadata(name) {
        Ok(md) => Ok(Some((kind(md.file_type()), md))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// What is at `name` in `dir`: a regular file opened for reading (and writing, if
/// `write`), never through a symlink.
fn look(dir: &Dir, name: &OsStr, write: bool) -> std::io::Result<Found> {
    match status_at(dir, name)? {
        Some((Kind::File, _)) => {}
        Some((Kind::Directory, _)) => return Ok(Found::Directory),
        _ => return Ok(Found::Neither),
    }
    let mut options = OpenOptions::new();
    options.read(true).write(write);
    let file = match dir.open_with(name, &options) {
        Ok(file) => file.into_std(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Neither),
        Err(e) => return Err(e),
    };
    // A file swapped for something else between the look and the open.
    Ok(if file.metadata()?.is_file() { Found::File(file) } else { Found::Neither })
}

impl TargetDir {
    /// Opens the target directory `root` (the user named it: a link there is followed,
    /// as scp does).
    pub fn open(root: &Path) -> std::io::Result<TargetDir> {
        let dir = if root.as_os_str().is_empty() { Path::new(".") } else { root };
        let dir = Dir::open_ambient_dir(dir, ambient_authority())?;
        Ok(TargetDir { dir, path: root.to_path_buf(), cases: Arc::default() })
    }

    /// The target directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory `local` below this one, opened as a target of its own, never
    /// through a link.
    pub fn open_below(&self, local: &Path) -> std::io::Result<TargetDir> {
        let rel = local.strip_prefix(&self.path).map_err(|_| Outside::io())?;
        Ok(TargetDir { dir: self.open_dir(rel)?, path: local.to_path_buf(), cases: Arc::default() })
    }

    /// The directory `local`, opened as a target of its own, beneath `beneath` when there
    /// is one ([`Self::open_below`]).
    pub fn open_within(beneath: Option<&TargetDir>, local: &Path) -> std::io::Result<TargetDir> {
        match beneath {
            Some(beneath) => beneath.open_below(local),
            None => TargetDir::open(local),
        }
    }

    /// Makes the directory `name` in this one.
    pub fn make_dir(&self, name: &OsStr) -> std::io::Result<()> {
        self.dir.create_dir(name)
    }

    /// Opens the file `local` below this directory for reading, never through a link.
    pub fn open_file_beneath(&self, local: &Path) -> std::io::Result<File> {
        self.entry(local)?
            .open_final()?
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }

    /// The status of `local` below this directory, never through a link.
    pub fn metadata_beneath(&self, local: &Path) -> std::io::Result<std::fs::Metadata> {
        let rel = local.strip_prefix(&self.path).map_err(|_| Outside::io())?;
        match self.entry(local)?.stat()? {
            Some(Kind::Directory) => self.open_dir(rel)?.into_std_file().metadata(),
            _ => self.open_file_beneath(local)?.metadata(),
        }
    }

    /// The names in the directory `local` below this one, each with whether it is a
    /// link (or of a kind not told).
    pub fn list_beneath(&self, local: &Path) -> std::io::Result<Vec<(OsString, bool)>> {
        Ok(self
            .list(local)?
            .into_iter()
            .map(|(name, kind)| (name, !matches!(kind, Kind::File | Kind::Directory)))
            .collect())
    }

    /// The entries of the directory `local` below the target (the target itself when
    /// `local` is its path), with their kinds, never through a link.
    pub fn list(&self, local: &Path) -> std::io::Result<Vec<(OsString, Kind)>> {
        let rel = local.strip_prefix(&self.path).map_err(|_| Outside::io())?;
        list(&self.open_dir(rel)?)
    }

    /// Removes `local` below the target: a file or a link itself, a directory with all
    /// it holds, nothing followed through a link.
    pub fn remove(&self, local: &Path) -> std::io::Result<()> {
        let entry = self.entry(local)?;
        match entry.stat()? {
            None => Ok(()),
            Some(Kind::Directory) => remove_tree(&entry.dir, &entry.name, 0),
            Some(_) => remove_one(&entry.dir, &entry.name),
        }
    }

    /// Where the target's file system keeps its files: not asked on Windows.
    pub(crate) fn keeps(&self) -> Keeps {
        Keeps::Elsewhere
    }

    /// Opens the directory `rel` below the target (`.` for the target itself), one
    /// component at a time, refusing a link on the way and a name Windows cannot hold.
    fn open_dir(&self, rel: &Path) -> std::io::Result<Dir> {
        let mut dir = self.dir.try_clone()?;
        for part in rel.components() {
            match part {
                Component::CurDir => {}
                Component::Normal(name) => {
                    check_name(name)?;
                    match status_at(&dir, name)? {
                        Some((Kind::Directory, _)) => dir = dir.open_dir(name)?,
                        Some((Kind::Symlink, _)) => {
                            return Err(sys::error_of(OsProblem::SymlinkInTheWay))
                        }
                        Some(_) => return Err(sys::error_of(OsProblem::NotADirectory)),
                        None => return Err(std::io::ErrorKind::NotFound.into()),
                    }
                }
                _ => return Err(Outside::io()),
            }
        }
        Ok(dir)
    }

    /// The directory holding `local`, opened, and its name there.
    pub fn entry(&self, local: &Path) -> std::io::Result<Entry> {
        let rel = local.strip_prefix(&self.path).map_err(|_| {
            std::io::Error::other(format!("{} is outside the target", shown(&local)))
        })?;
        let name = rel
            .file_name()
            .ok_or_else(|| std::io::Error::other(format!("{} names no file", shown(&local))))?;
        check_name(name)?;
        self.cases.claim(rel)?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        let dir = self.open_dir(parent)?;
        Ok(Entry { dir, name: name.to_os_string() })
    }

    /// Makes sure `local` is a directory we may write into (creating it if needed; a
    /// link there is refused).
    pub fn ensure_dir(&self, local: &Path) -> std::io::Result<()> {
        let entry = self.entry(local)?;
        match entry.stat()? {
            Some(Kind::Directory) => Ok(()),
            Some(Kind::Symlink) => Err(sys::error_of(OsProblem::SymlinkInTheWay)),
            Some(_) => Err(sys::error_of(OsProblem::NotADirectory)),
            None => match entry.dir.create_dir(&entry.name) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match entry.stat()? {
                    Some(Kind::Directory) => Ok(()),
                    _ => Err(e),
                },
                other => other,
            },
        }
    }

    /// Cuts a partial file's trailer, applies metadata to the verified temporary file,
    /// with `fsync` flushes its data to disk, and renames it into place. The flush
    /// comes before the rename, so a final name never holds data the disk does not
    /// have (docs/durability.md).
    pub fn finish_file(
        &self,
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
        let entry = self.entry(local)?;
        let existing = entry.final_file_mode()?;
        if preserve {
            file.set_times(times(meta))?;
        }
        // A file replaced keeps its mode, as scp keeps it; a new one gets the sender's.
        let wanted = match existing {
            Some(existing) if !preserve => existing,
            _ => meta.mode,
        };
        if existing.is_some_and(|mode| mode & 0o200 == 0) {
            let mut writable = entry.dir.symlink_metadata(&entry.name)?.permissions();
            writable.set_readonly(false);
            entry.dir.set_permissions(&entry.name, writable)?;
        }
        let temp = entry.temp();
        entry.dir.rename(&temp, &entry.dir, &entry.name).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                crate::failure::PartialGone::io()
            } else {
                e
            }
        })?;
        if wanted & 0o200 == 0 {
            sys::set_permission_bits(file, wanted)?;
        }
        Ok(())
    }

    /// A file found complete at its final name: with `-p` its metadata is set as for a
    /// file received; without, it is left as it is.
    pub fn finish_in_place(
        &self,
        local: &Path,
        meta: &Meta,
        preserve: bool,
    ) -> std::io::Result<()> {
        if preserve {
            let entry = self.entry(local)?;
            if entry.stat()? != Some(Kind::File) {
                return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
            }
            let mut options = OpenOptions::new();
            options.access_mode(FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES);
            let file = entry.dir.open_with(&entry.name, &options)?.into_std();
            file.set_times(times(meta))?;
            sys::set_permission_bits(&file, meta.mode)?;
        }
        Ok(())
    }

    /// Applies directory metadata (with `-p`): its times; a directory's read-only
    /// attribute means something else on Windows (a customised folder) and is left.
    pub fn finish_dir(&self, local: &Path, meta: &Meta) -> std::io::Result<()> {
        let rel = local.strip_prefix(&self.path).unwrap_or(local);
        let (parent, name) = match (rel.parent(), rel.file_name()) {
            (Some(parent), Some(name)) => (self.open_dir(parent)?, name),
            // The target itself.
            _ => (self.dir.try_clone()?, OsStr::new(".")),
        };
        let mut options = OpenOptions::new();
        options.access_mode(FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES);
        let dir = parent.open_with(name, &options)?.into_std();
        dir.set_times(times(meta))
    }

    /// Marks the directory `local`, made as the target itself for the source `name`,
    /// as an unfinished copy's ([`crate::partial::made_dir`]).
    pub fn mark_made(&self, local: &Path, name: &soku_proto::name::Name) -> std::io::Result<()> {
        let dir = self.open_made(local)?;
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        let mut file = dir.open_with(MARK, &options)?.into_std();
        std::io::Write::write_all(&mut file, &made_dir::mark_bytes(name))
    }

    /// Removes the mark of the directory `local` once its copy is complete: only a mark,
    /// never a file of the same name that a source put there.
    pub fn unmark_made(&self, local: &Path) -> std::io::Result<()> {
        let dir = self.open_made(local)?;
        let Some(file) = look(&dir, OsStr::new(MARK), false)?.into_file() else {
            return Ok(());
        };
        let mut bytes = Vec::new();
        file.take(1024).read_to_end(&mut bytes)?;
        if made_dir::marked_name(&bytes).is_some() {
            dir.remove_file(MARK)?;
        }
        Ok(())
    }

    fn open_made(&self, local: &Path) -> std::io::Result<Dir> {
        let rel = local.strip_prefix(&self.path).map_err(|_| {
            std::io::Error::other(format!("{} is outside the target", shown(&local)))
        })?;
        self.open_dir(rel)
    }

    /// The space the temporary file of `local` takes on disk, if there is one: its
    /// length (NTFS allocates a file's whole length when it is set, unless it is marked
    /// sparse).
    pub fn temp_space(&self, local: &Path) -> Option<u64> {
        let entry = self.entry(local).ok()?;
        match status_at(&entry.dir, &entry.temp()).ok()?? {
            (Kind::File, md) => Some(md.len()),
            _ => None,
        }
    }

    /// Removes the temporary file of `local`, if there is one.
    pub fn discard(&self, local: &Path) {
        if let Ok(entry) = self.entry(local) {
            for name in [entry.temp(), own_temp_name(&entry.name)] {
                let _ = entry.dir.remove_file(name);
            }
        }
    }
}

/// A name Windows cannot hold, refused with its reason.
fn check_name(name: &OsStr) -> std::io::Result<()> {
    match soku_proto::windows_name::problem(&sys::name_bytes(name)) {
        Some(problem) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidFilename,
            format!("the name {} {problem}: rename it on the sending side", shown(name)),
        )),
        None => Ok(()),
    }
}

/// The entries of an open directory, with their kinds (not following links).
fn list(dir: &Dir) -> std::io::Result<Vec<(OsString, Kind)>> {
    let mut out = Vec::new();
    for entry in dir.entries()? {
        let entry = entry?;
        out.push((entry.file_name(), kind(entry.file_type()?)));
    }
    Ok(out)
}

/// Most directory levels a removal goes down: as deep as a wire path may name.
const MAX_DEPTH: usize = soku_proto::path::MAX_DEPTH;

/// Removes a file, or a link itself (a link to a directory is removed as a directory
/// on Windows).
fn remove_one(dir: &Dir, name: &OsStr) -> std::io::Result<()> {
    dir.remove_file(name).or_else(|e| match status_at(dir, name) {
        Ok(Some((Kind::Symlink, _))) => dir.remove_dir(name),
        _ => Err(e),
    })
}

fn remove_tree(parent: &Dir, name: &OsStr, depth: usize) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(std::io::Error::other("deeper than a copy can name: not removed"));
    }
    let dir = parent.open_dir(name)?;
    for (child, kind) in list(&dir)? {
        if kind == Kind::Directory {
            remove_tree(&dir, &child, depth + 1)?;
        } else {
            remove_one(&dir, &child)?;
        }
    }
    drop(dir);
    parent.remove_dir(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: a second name that differs only in case written over the first.
    #[test]
    fn names_that_differ_only_in_case_are_refused() {
        let cases = Cases::default();
        for ok in ["A.txt", "A.txt", "Dir/x", "Dir/y", "b"] {
            cases.claim(Path::new(ok)).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for clash in ["a.txt", "dir/z", "Dir/X", "DIR"] {
            let err = cases.claim(Path::new(clash)).expect_err(clash);
            assert!(err.to_string().contains("differ only in case"), "{clash}: {err}");
        }
    }
}
