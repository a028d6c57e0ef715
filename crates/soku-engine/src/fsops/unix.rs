//! The receiver's file-system work on Unix: every path below the target resolved by
//! the kernel from one descriptor of it (`openat2`, or a walk of `openat(O_NOFOLLOW)`).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use soku_proto::manifest::Meta;
use soku_proto::name::shown;

use crate::failure::Outside;
use crate::partial::made_dir::{self, MARK};
use crate::partial::trailer::Trailer;
use crate::small_steps::Keeps;
use crate::sys::{self, Beneath};

use super::status::{Found, Kind, Status};
use super::times::times;
use crate::temp_name::{own_temp_name, temp_name};

/// The target directory of a copy, opened once: everything below it is reached through
/// this descriptor.
#[derive(Debug)]
pub struct TargetDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// A name below the target and its directory, opened: what a file's steps that follow
/// one another at once (look for a partial file, then for the final one, then make the
/// temporary file) resolve once rather than each on its own.
#[derive(Debug)]
pub struct Entry {
    dir: OwnedFd,
    name: OsString,
}

impl Entry {
    fn temp(&self) -> OsString {
        temp_name(&self.name)
    }

    fn own_temp(&self) -> OsString {
        own_temp_name(&self.name)
    }

    /// Which temporary name holds `file`: the usual one, unless another user's file
    /// kept this copy off it ([`Self::replace_temp`]). Told by device and inode, so a
    /// file put at either name meanwhile is never the one renamed into place.
    fn temp_of(&self, file: &std::fs::Metadata) -> std::io::Result<OsString> {
        use std::os::unix::fs::MetadataExt;
        for name in [self.temp(), self.own_temp()] {
            match rustix::fs::statat(&self.dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if sys::device_and_inode(&st) == (file.dev(), file.ino()) => {
                    return Ok(name)
                }
                Ok(_) | Err(Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(crate::failure::PartialGone::io())
    }

    fn stat(&self) -> std::io::Result<Option<Kind>> {
        Ok(self.final_status()?.map(|st| st.kind))
    }

    /// Creates the temporary file for this name, sized to `size`, with the partial-file
    /// `trailer` after it when resuming is on ([`crate::partial`]), replacing whatever an
    /// earlier run left at the temporary name. A directory at the final name is refused
    /// now, before any byte is sent for it. The mode is the sender's permission bits, to
    /// which the kernel applies our umask, as scp does.
    pub fn create_temp(
        &self,
        size: u64,
        mode: u32,
        trailer: Option<&Trailer>,
    ) -> std::io::Result<File> {
        if self.final_is_directory()? {
            return Err(Errno::ISDIR.into());
        }
        self.replace_temp(size, mode, trailer)
    }

    /// The permission bits of a regular file at the final name, if one is there (a
    /// symlink there is replaced, not followed, so it has none).
    pub fn final_file_mode(&self) -> std::io::Result<Option<u32>> {
        Ok(self.final_status()?.filter(|st| st.kind == Kind::File).map(|st| st.mode))
    }

    /// Whether a directory is at the final name (a symlink to one is not).
    pub fn final_is_directory(&self) -> std::io::Result<bool> {
        Ok(self.stat()? == Some(Kind::Directory))
    }

    /// [`Self::create_temp`] without its look at the final name, for a caller that
    /// looked already.
    pub fn replace_temp(
        &self,
        size: u64,
        mode: u32,
        trailer: Option<&Trailer>,
    ) -> std::io::Result<File> {
        if let Some(file) = self.create_new_temp(size, mode, trailer)? {
            return Ok(file);
        }
        match rustix::fs::unlinkat(&self.dir, self.temp().as_os_str(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {
                self.create_new_temp(size, mode, trailer)?.ok_or_else(|| Errno::EXIST.into())
            }
            // Another user's file in a sticky directory (as scp, the copy must still
            // succeed there): this user's own temporary name instead.
            Err(Errno::PERM | Errno::ACCESS) => self.replace_own_temp(size, mode, trailer),
            Err(e) => Err(e.into()),
        }
    }

    /// [`Self::replace_temp`] at [`own_temp_name`]. Another user can still have put a
    /// file at this name, which is then left where it is and this file fails with a line
    /// saying whose it is, rather than "File exists".
    fn replace_own_temp(
        &self,
        size: u64,
        mode: u32,
        trailer: Option<&Trailer>,
    ) -> std::io::Result<File> {
        let name = self.own_temp();
        for _ in 0..2 {
            if let Some(file) = self.create_new_at(&name, size, mode, trailer)? {
                return Ok(file);
            }
            match rustix::fs::unlinkat(&self.dir, name.as_os_str(), AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(Errno::PERM | Errno::ACCESS) => {
                    return Err(crate::failure::PlantedPartial::io())
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Errno::EXIST.into())
    }

    /// Creates the temporary file as [`Self::create_temp`] does if nothing is at its
    /// name: `None` if something is (a partial file, maybe another receiver's). The
    /// common case, a file new to the target, costs one system call this way rather
    /// than a look, a removal and the creation.
    pub fn create_new_temp(
        &self,
        size: u64,
        mode: u32,
        trailer: Option<&Trailer>,
    ) -> std::io::Result<Option<File>> {
        self.create_new_at(&self.temp(), size, mode, trailer)
    }

    fn create_new_at(
        &self,
        name: &OsStr,
        size: u64,
        mode: u32,
        trailer: Option<&Trailer>,
    ) -> std::io::Result<Option<File>> {
        // Readable too: a resumed copy hashes what an earlier run wrote. Private until
        // it is renamed into place ([`Self::finish_file`] gives the mode then): in a
        // shared directory no one else can write into bytes about to be verified.
        let flags =
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mode = sys::mode((mode & 0o700) | 0o600);
        let file = match rustix::fs::openat(&self.dir, name, flags, mode) {
            Ok(fd) => File::from(fd),
            Err(Errno::EXIST) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match trailer {
            Some(trailer) => trailer.write_to(&file)?,
            None => file.set_len(size)?,
        }
        Ok(Some(file))
    }

    /// Opens the temporary file of this name for reading and writing, if it is a
    /// regular file this user's soku can have made ([`made_here`]). Anything else at
    /// that name (another user's file, a hard link, one others may write) is treated as
    /// absent: it is replaced, never continued, so it can never become the final file.
    /// The partial file this user's own temporary name holds comes second: one that a
    /// copy made when another user's file sat at the usual name.
    pub fn open_temp(&self) -> std::io::Result<Option<File>> {
        match self.open_made_at(&self.temp())? {
            Some(file) => Ok(Some(file)),
            None => self.open_made_at(&self.own_temp()),
        }
    }

    fn open_made_at(&self, name: &OsStr) -> std::io::Result<Option<File>> {
        match look(&self.dir, name, OFlags::RDWR) {
            Ok(Found::Directory) => Err(Errno::ISDIR.into()),
            Ok(found) => Ok(found.into_file().filter(made_here)),
            // Another user's file this user may not even open.
            Err(e) if e.raw_os_error() == Some(Errno::ACCESS.raw_os_error()) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens the file at this final name for reading, if it is a regular file.
    pub fn open_final(&self) -> std::io::Result<Option<File>> {
        Ok(self.look_final()?.into_file())
    }

    /// What is at this final name, a regular file opened for reading.
    pub fn look_final(&self) -> std::io::Result<Found> {
        look(&self.dir, &self.name, OFlags::RDONLY)
    }

    /// The status of what is at this final name, not following a symlink (`None`:
    /// nothing there).
    pub fn final_status(&self) -> std::io::Result<Option<Status>> {
        match rustix::fs::statat(&self.dir, self.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(status(&st))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

fn status(st: &rustix::fs::Stat) -> Status {
    Status {
        kind: kind(FileType::from_raw_mode(st.st_mode)),
        size: u64::try_from(st.st_size).unwrap_or(0),
        modified: (st.st_mtime, u32::try_from(st.st_mtime_nsec).unwrap_or(0)),
        mode: sys::mode_bits(st),
    }
}

fn kind(kind: FileType) -> Kind {
    match kind {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Directory,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    }
}

impl TargetDir {
    /// Opens the target directory `root` (the user named it: a symlink there is
    /// followed, as scp does).
    pub fn open(root: &Path) -> std::io::Result<TargetDir> {
        let dir = if root.as_os_str().is_empty() { Path::new(".") } else { root };
        let flags = sys::LOOKUP | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(dir, flags, Mode::empty())?;
        Ok(TargetDir { fd, path: root.to_path_buf() })
    }

    /// The target directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory `local` below this one, opened as a target of its own: how a
    /// server confined to this directory (`soku serve --root`) opens the target a
    /// client names, so that nothing of the copy lands outside (see
    /// [`Self::open_beneath`]).
    pub fn open_below(&self, local: &Path) -> std::io::Result<TargetDir> {
        let fd = self.open_beneath(local, sys::LOOKUP | OFlags::DIRECTORY)?;
        Ok(TargetDir { fd, path: local.to_path_buf() })
    }

    /// Opens `local`, a path below this directory as [`Self::path`] names it, with
    /// `flags`, resolved by the kernel beneath this directory: a symlink is followed
    /// while it stays beneath (a client of a confined server names things as the files
    /// there link them, as scp follows links), but `..` past this directory, an
    /// absolute symlink or a relative one leading out fails, at the moment of the open
    /// (`openat2` with `RESOLVE_BENEATH`: no window between a check and the use).
    /// Kernels without `openat2` take a walk one component at a time that follows no
    /// symlink at all and refuses `..`: stricter, never looser.
    pub fn open_beneath(&self, local: &Path, flags: OFlags) -> std::io::Result<OwnedFd> {
        let rel = local.strip_prefix(&self.path).map_err(|_| Outside::io())?;
        let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
        let flags = flags | OFlags::CLOEXEC;
        // EAGAIN: a rename elsewhere raced a `..` in the path; the kernel asks for a
        // retry rather than risk a wrong answer. Bounded: a few tries, then refused.
        for _ in 0..4 {
            match sys::open_beneath(&self.fd, rel, flags, Beneath::FollowingLinks) {
                Some(Err(Errno::AGAIN)) => continue,
                None => return self.walk_beneath(rel, flags),
                Some(Err(Errno::XDEV)) => return Err(Outside::io()),
                Some(other) => return Ok(other?),
            }
        }
        Err(Outside::io())
    }

    /// [`Self::open_beneath`] one component at a time, without following a symlink.
    fn walk_beneath(&self, rel: &Path, flags: OFlags) -> std::io::Result<OwnedFd> {
        let (parent, name) = match (rel.parent(), rel.file_name()) {
            (Some(parent), Some(name)) => (parent, name),
            // `.` (the directory itself), or a path ending in `..`.
            _ => return self.walk_dir(rel, flags),
        };
        let dir = self.walk_dir(parent, sys::LOOKUP)?;
        let opened = rustix::fs::openat(&dir, name, flags | OFlags::NOFOLLOW, Mode::empty());
        opened.map_err(|e| {
            if e == Errno::LOOP || (e == Errno::NOTDIR && self.is_symlink(&dir, name)) {
                Errno::LOOP.into()
            } else {
                e.into()
            }
        })
    }

    /// Where the target's file system keeps its files: which steps may run in place.
    pub(crate) fn keeps(&self) -> Keeps {
        Keeps::of(&self.fd)
    }

    /// The directory `local` below this one, opened as a target of its own, resolved
    /// from the current directory when `beneath` is `None`, else beneath it: how a sync's
    /// target is looked for ([`crate::sync_target`]).
    pub fn open_within(beneath: Option<&TargetDir>, local: &Path) -> std::io::Result<TargetDir> {
        match beneath {
            Some(beneath) => beneath.open_below(local),
            None => TargetDir::open(local),
        }
    }

    /// Makes the directory `name` in this one (what the umask lets of 0777).
    pub fn make_dir(&self, name: &OsStr) -> std::io::Result<()> {
        Ok(rustix::fs::mkdirat(&self.fd, name, Mode::from(0o777))?)
    }

    /// Opens the file `local` below this directory for reading, resolved beneath it
    /// ([`Self::open_beneath`]).
    pub fn open_file_beneath(&self, local: &Path) -> std::io::Result<File> {
        Ok(File::from(self.open_beneath(local, OFlags::RDONLY | OFlags::NOCTTY)?))
    }

    /// The status of `local` below this directory, a symlink followed while it stays
    /// beneath ([`Self::open_beneath`]).
    pub fn metadata_beneath(&self, local: &Path) -> std::io::Result<std::fs::Metadata> {
        File::from(self.open_beneath(local, sys::LOOKUP)?).metadata()
    }

    /// The names in the directory `local` below this one, listed through a descriptor
    /// opened beneath it, each with whether it may be a link: an unknown kind (some file
    /// systems) counts as one, since only its target's status will do.
    pub fn list_beneath(&self, local: &Path) -> std::io::Result<Vec<(OsString, bool)>> {
        let fd = self.open_beneath(local, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let mut out = Vec::new();
        for entry in rustix::fs::Dir::read_from(&fd)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let link = !matches!(entry.file_type(), FileType::RegularFile | FileType::Directory);
            out.push((sys::name_of(name).into_owned(), link));
        }
        Ok(out)
    }

    /// The entries of the directory `local` below the target (the target itself when
    /// `local` is its path), with their kinds, never through a symlink.
    pub fn list(&self, local: &Path) -> std::io::Result<Vec<(OsString, Kind)>> {
        list(&self.list_dir(local)?)
    }

    /// Removes `local` below the target: a file or a link itself, a directory with all
    /// it holds. Nothing is followed through a symlink, and every step is taken from an
    /// open directory, so a link swapped in meanwhile is removed, never its target.
    pub fn remove(&self, local: &Path) -> std::io::Result<()> {
        let entry = self.entry(local)?;
        let Some(name) = local.file_name() else { return Ok(()) };
        let parent = local.parent().unwrap_or(Path::new(""));
        let parent = self.list_dir(parent)?;
        match entry.final_status()? {
            None => Ok(()),
            Some(st) if st.kind == Kind::Directory => remove_tree(&parent, name, 0),
            Some(_) => Ok(rustix::fs::unlinkat(&parent, name, AtFlags::empty())?),
        }
    }

    /// Opens the directory `rel` below the target (`.` for the target itself), never
    /// through a symlink and never outside.
    fn open_dir(&self, rel: &Path, flags: OFlags) -> std::io::Result<OwnedFd> {
        let flags = flags | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
        match sys::open_beneath(&self.fd, rel, flags, Beneath::NoLinks) {
            // Kernels before 5.6, a sandbox that filters the call, or a system without it.
            None => self.walk_dir(rel, flags),
            // A symlink, or a way out of the target: the same refusal either way.
            Some(Err(Errno::XDEV)) => Err(Errno::LOOP.into()),
            Some(other) => Ok(other?),
        }
    }

    /// [`Self::open_dir`] one component at a time, without following a symlink.
    fn walk_dir(&self, rel: &Path, flags: OFlags) -> std::io::Result<OwnedFd> {
        let step = sys::LOOKUP | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut fd = rustix::fs::openat(&self.fd, ".", step, Mode::empty())?;
        for part in rel.components() {
            match part {
                Component::CurDir => {}
                Component::Normal(name) => {
                    // A symlink opened with O_PATH | O_NOFOLLOW is the link itself,
                    // which O_DIRECTORY refuses (ENOTDIR).
                    fd = rustix::fs::openat(&fd, name, step, Mode::empty()).map_err(|e| {
                        if e == Errno::NOTDIR && self.is_symlink(&fd, name) {
                            Errno::LOOP
                        } else {
                            e
                        }
                    })?;
                }
                _ => return Err(Errno::LOOP.into()),
            }
        }
        Ok(rustix::fs::openat(&fd, ".", flags, Mode::empty())?)
    }

    fn is_symlink(&self, dir: &OwnedFd, name: &OsStr) -> bool {
        rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
    }

    /// The directory holding `local`, opened, and its name there.
    pub fn entry(&self, local: &Path) -> std::io::Result<Entry> {
        let rel = local.strip_prefix(&self.path).map_err(|_| {
            std::io::Error::other(format!("{} is outside the target", shown(&local)))
        })?;
        let name = rel
            .file_name()
            .ok_or_else(|| std::io::Error::other(format!("{} names no file", shown(&local))))?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        let dir = self.open_dir(parent, sys::LOOKUP)?;
        Ok(Entry { dir, name: name.to_os_string() })
    }

    /// Makes sure `local` is a directory we may write into (creating it if needed; a
    /// symlink there is refused).
    pub fn ensure_dir(&self, local: &Path) -> std::io::Result<()> {
        let entry = self.entry(local)?;
        match entry.stat()? {
            Some(Kind::Directory) => Ok(()),
            Some(Kind::Symlink) => Err(Errno::LOOP.into()),
            Some(_) => Err(Errno::NOTDIR.into()),
            None => {
                match rustix::fs::mkdirat(&entry.dir, entry.name.as_os_str(), Mode::from(0o777)) {
                    Err(Errno::EXIST) if entry.stat()? == Some(Kind::Directory) => Ok(()),
                    other => Ok(other?),
                }
            }
        }
    }

    /// Cuts a partial file's trailer, applies metadata to the verified temporary file,
    /// with `fsync` flushes its data to disk, and renames it into place. The flush
    /// comes before the rename, so a final name never holds data the disk does not
    /// have, whatever a power cut interrupts (docs/durability.md).
    pub fn finish_file(
        &self,
        local: &Path,
        file: &File,
        size: u64,
        meta: &Meta,
        preserve: bool,
        fsync: bool,
    ) -> std::io::Result<()> {
        // One look serves both the length and the mode: cutting a trailer off leaves the mode.
        let md = file.metadata()?;
        if md.len() != size {
            file.set_len(size)?;
        }
        if fsync {
            file.sync_data()?;
        }
        let entry = self.entry(local)?;
        if preserve {
            file.set_permissions(std::fs::Permissions::from_mode(meta.mode & 0o7777))?;
            file.set_times(times(meta))?;
        } else {
            // A file replaced keeps its mode, as scp and rsync keep it (a read-only
            // target stays read-only). A new one gets the sender's bits within the
            // umask, as a file scp creates does (the temporary file was private).
            let current = md.permissions().mode() & 0o777;
            let wanted = match entry.final_file_mode()? {
                Some(existing) => existing & 0o777,
                None => meta.mode & 0o777 & !umask(),
            };
            if wanted != current {
                file.set_permissions(std::fs::Permissions::from_mode(wanted))?;
            }
        }
        let temp = entry.temp_of(&md)?;
        rustix::fs::renameat(&entry.dir, temp.as_os_str(), &entry.dir, entry.name.as_os_str())
            .map_err(|e| match e {
                Errno::NOENT => crate::failure::PartialGone::io(),
                e => e.into(),
            })
    }

    /// A file found complete at its final name: with `-p` its metadata is set as for a
    /// file received; without, it is left as it is (as scp leaves an overwritten file's
    /// mode).
    pub fn finish_in_place(
        &self,
        local: &Path,
        meta: &Meta,
        preserve: bool,
    ) -> std::io::Result<()> {
        if preserve {
            let Some(file) = self.entry(local)?.open_final()? else {
                return Err(std::io::Error::from(ErrorKind::NotFound));
            };
            file.set_permissions(std::fs::Permissions::from_mode(meta.mode & 0o7777))?;
            file.set_times(times(meta))?;
        }
        Ok(())
    }

    /// Applies directory metadata (with `-p`).
    pub fn finish_dir(&self, local: &Path, meta: &Meta) -> std::io::Result<()> {
        let rel = local.strip_prefix(&self.path).unwrap_or(local);
        let dir = File::from(self.open_dir(rel, OFlags::RDONLY)?);
        dir.set_permissions(std::fs::Permissions::from_mode(meta.mode & 0o7777))?;
        dir.set_times(times(meta))
    }

    /// Marks the directory `local`, made as the target itself for the source `name`,
    /// as an unfinished copy's ([`crate::partial::made_dir`]); replaces whatever mark
    /// is there.
    pub fn mark_made(&self, local: &Path, name: &soku_proto::name::Name) -> std::io::Result<()> {
        let dir = self.open_made(local)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW;
        let fd = rustix::fs::openat(&dir, MARK, flags | OFlags::CLOEXEC, Mode::from(0o644))?;
        std::io::Write::write_all(&mut File::from(fd), &made_dir::mark_bytes(name))
    }

    /// Removes the mark of the directory `local` once its copy is complete: only a mark,
    /// never a file of the same name that a source put there.
    pub fn unmark_made(&self, local: &Path) -> std::io::Result<()> {
        let dir = self.open_made(local)?;
        let Some(file) = look(&dir, OsStr::new(MARK), OFlags::RDONLY)?.into_file() else {
            return Ok(());
        };
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, 1024), &mut bytes)?;
        if made_dir::marked_name(&bytes).is_some() {
            rustix::fs::unlinkat(&dir, MARK, AtFlags::empty())?;
        }
        Ok(())
    }

    /// The directory `local` below the target (the target itself when `local` is its
    /// path), opened for listing, never through a symlink.
    fn list_dir(&self, local: &Path) -> std::io::Result<OwnedFd> {
        let rel = local.strip_prefix(&self.path).map_err(|_| Outside::io())?;
        self.open_dir(rel, OFlags::RDONLY)
    }

    /// The directory `local` below the target, opened as [`Self::open_dir`] does.
    fn open_made(&self, local: &Path) -> std::io::Result<OwnedFd> {
        let rel = local.strip_prefix(&self.path).map_err(|_| {
            std::io::Error::other(format!("{} is outside the target", shown(&local)))
        })?;
        self.open_dir(rel, sys::LOOKUP)
    }

    /// The space the temporary file of `local` takes on disk (its allocated blocks,
    /// not its length: a partial file is sparse where chunks are still to come), if
    /// there is one.
    pub fn temp_space(&self, local: &Path) -> Option<u64> {
        let entry = self.entry(local).ok()?;
        let temp = entry.temp();
        let st = rustix::fs::statat(&entry.dir, temp.as_os_str(), AtFlags::SYMLINK_NOFOLLOW);
        let st = st.ok()?;
        let regular = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile;
        regular.then(|| sys::allocated(&st))
    }

    /// Removes the temporary file of `local`, if there is one.
    pub fn discard(&self, local: &Path) {
        if let Ok(entry) = self.entry(local) {
            for name in [entry.temp(), entry.own_temp()] {
                let _ = rustix::fs::unlinkat(&entry.dir, name.as_os_str(), AtFlags::empty());
            }
        }
    }
}

/// What is at `name` in `dir`, a regular file opened with `access`: one `openat` and,
/// when something is there, one `fstat`, never following a symlink.
/// Whether a file found at a temporary name can be a partial file this user's soku made:
/// owned by this user, writable by no one else, and with no other name (through a hard
/// link its bytes would reach, or come from, another file). A file another user placed
/// there could otherwise be continued and renamed into place with its owner and mode.
fn made_here(file: &File) -> bool {
    rustix::fs::fstat(file).is_ok_and(|st| {
        st.st_uid == rustix::process::geteuid().as_raw()
            && st.st_nlink == 1
            && st.st_mode & 0o022 == 0
    })
}

/// This process's umask, read once (`crate::sys::read_umask`).
fn umask() -> u32 {
    static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UMASK.get_or_init(sys::read_umask)
}

fn look(dir: &OwnedFd, name: &OsStr, access: OFlags) -> std::io::Result<Found> {
    // Non-blocking: opening a FIFO must not wait for a writer.
    let flags = access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(Errno::NOENT | Errno::LOOP) => return Ok(Found::Neither),
        // A directory opened for writing.
        Err(Errno::ISDIR) => return Ok(Found::Directory),
        Err(e) => return Err(e.into()),
    };
    let kind = file.metadata()?.file_type();
    Ok(if kind.is_file() {
        Found::File(file)
    } else if kind.is_dir() {
        Found::Directory
    } else {
        Found::Neither
    })
}

/// The entries of an open directory, with their kinds (not following symlinks).
fn list(dir: &OwnedFd) -> std::io::Result<Vec<(OsString, Kind)>> {
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let found = match entry.file_type() {
            FileType::Unknown => {
                rustix::fs::statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                    .map(|st| FileType::from_raw_mode(st.st_mode))?
            }
            found => found,
        };
        out.push((sys::name_of(name).into_owned(), kind(found)));
    }
    Ok(out)
}

/// Most directory levels a removal goes down: as deep as a wire path may name.
const MAX_DEPTH: usize = soku_proto::path::MAX_DEPTH;

fn remove_tree(parent: &OwnedFd, name: &OsStr, depth: usize) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(std::io::Error::other("deeper than a copy can name: not removed"));
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(parent, name, flags, Mode::empty())?;
    for (child, found) in list(&fd)? {
        if found == Kind::Directory {
            remove_tree(&fd, &child, depth + 1)?;
        } else {
            rustix::fs::unlinkat(&fd, &child, AtFlags::empty())?;
        }
    }
    Ok(rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR)?)
}

#[cfg(test)]
mod tests;
