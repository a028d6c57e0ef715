//! Where the browse job's calls act: paths as the client names them, taken beneath the
//! fence's root when there is one, each operation made at a descriptor opened through
//! it.
//!
//! Beneath a root, a path is first made plain without the file system (`.` dropped, `..`
//! taking off the name before it and stopping at the root, as it does at `/`), then
//! opened through the root: a symbolic link inside is followed, one that leads out
//! fails. The name an operation acts on is never followed (`unlinkat`, `mkdirat`,
//! `renameat2` act on the entry itself); what is followed (a stat that follows, chmod,
//! df) is opened through the root first and acted on through its descriptor.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use anyhow::Context as _;
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use soku_engine::failure::describe_io;
use soku_proto::browse::{Answer, Listed, Space, LISTING_BATCH};
use soku_proto::name::Name;

use super::super::fence::Fence;
use super::users::Users;
use crate::sys::{self, LOOKUP, THE_LINK_ITSELF};

/// The fence the calls act within.
pub struct Place<'a> {
    fence: &'a Fence,
}

impl<'a> Place<'a> {
    pub fn new(fence: &'a Fence) -> Self {
        Place { fence }
    }

    /// The absolute path `path` names, if it is a directory: as a copy names it (beneath
    /// a root, from the root).
    pub fn directory(&self, path: &Name) -> anyhow::Result<Name> {
        let local = self.local(path)?;
        if !self.fence.is_dir(&local) {
            anyhow::bail!("{}: no such directory", shown_name(path));
        }
        match &self.fence.root {
            Some(root) => {
                let below = local.strip_prefix(root.path()).unwrap_or(Path::new(""));
                let mut named = b"/".to_vec();
                named.extend_from_slice(below.as_os_str().as_bytes());
                Ok(Name::from_bytes(named))
            }
            None => {
                let real = std::fs::canonicalize(&local)
                    .with_context(|| format!("{}: cannot resolve it", shown_name(path)))?;
                Ok(Name::from_bytes(real.as_os_str().as_bytes().to_vec()))
            }
        }
    }

    /// Lists `path` into `out` in batches; a path that is no directory lists as itself.
    /// Stops early when `out` says the client is gone.
    pub fn list(&self, path: &Name, mut out: impl FnMut(Answer) -> bool) -> anyhow::Result<()> {
        let local = self.local(path)?;
        let users = Users::read();
        let dir = match self.open(&local, OFlags::RDONLY | OFlags::DIRECTORY) {
            Ok(dir) => dir,
            Err(err) if err.raw_os_error() == Some(libc::ENOTDIR) => {
                let fd = self.open(&local, LOOKUP | THE_LINK_ITSELF).map_err(failed(path))?;
                let entry =
                    listed(&fd, OsStr::new(""), path.clone(), &users).map_err(failed(path))?;
                out(Answer::Listing { entries: vec![entry], more: false });
                return Ok(());
            }
            Err(err) => return Err(failed(path)(err)),
        };
        let mut reading = rustix::fs::Dir::read_from(&dir).map_err(|e| failed(path)(e.into()))?;
        let mut entries = Vec::with_capacity(LISTING_BATCH);
        for found in reading.by_ref() {
            let found = found.map_err(|e| failed(path)(e.into()))?;
            let name = found.file_name().to_bytes();
            // Gone between the read and the stat: not listed, as `ls` would not.
            let Ok(entry) =
                listed(&dir, OsStr::from_bytes(name), Name::from_bytes(name.to_vec()), &users)
            else {
                continue;
            };
            entries.push(entry);
            if entries.len() == LISTING_BATCH {
                let batch = std::mem::replace(&mut entries, Vec::with_capacity(LISTING_BATCH));
                if !out(Answer::Listing { entries: batch, more: true }) {
                    return Ok(());
                }
            }
        }
        out(Answer::Listing { entries, more: false });
        Ok(())
    }

    /// One entry, its link followed if `follow`.
    pub fn stat(&self, path: &Name, follow: bool) -> anyhow::Result<Listed> {
        let local = self.local(path)?;
        let flags = if follow { LOOKUP } else { LOOKUP | THE_LINK_ITSELF };
        let fd = self.open(&local, flags).map_err(failed(path))?;
        listed(&fd, OsStr::new(""), path.clone(), &Users::read()).map_err(failed(path))
    }

    pub fn make_dir(&self, path: &Name, mode: u32) -> anyhow::Result<()> {
        let (parent, name) = self.parent(path)?;
        rustix::fs::mkdirat(&parent, name.as_os_str(), sys::mode(mode))
            .map_err(|e| failed(path)(e.into()))
    }

    pub fn remove_dir(&self, path: &Name) -> anyhow::Result<()> {
        let (parent, name) = self.parent(path)?;
        rustix::fs::unlinkat(&parent, name.as_os_str(), AtFlags::REMOVEDIR)
            .map_err(|e| failed(path)(e.into()))
    }

    pub fn remove(&self, path: &Name) -> anyhow::Result<()> {
        let (parent, name) = self.parent(path)?;
        rustix::fs::unlinkat(&parent, name.as_os_str(), AtFlags::empty()).map_err(|e| {
            if e == rustix::io::Errno::ISDIR {
                anyhow::anyhow!("{}: is a directory (rmdir removes an empty one)", shown_name(path))
            } else {
                failed(path)(e.into())
            }
        })
    }

    pub fn rename(&self, from: &Name, to: &Name) -> anyhow::Result<()> {
        let (from_parent, from_name) = self.parent(from)?;
        let (to_parent, to_name) = self.parent(to)?;
        rustix::fs::renameat_with(
            &from_parent,
            from_name.as_os_str(),
            &to_parent,
            to_name.as_os_str(),
            RenameFlags::NOREPLACE,
        )
        .map_err(|e| {
            if e == rustix::io::Errno::EXIST {
                anyhow::anyhow!(
                    "{}: already exists (rename does not replace; remove it first)",
                    shown_name(to)
                )
            } else {
                anyhow::anyhow!(
                    "{} -> {}: {}",
                    shown_name(from),
                    shown_name(to),
                    describe_io(&e.into())
                )
            }
        })
    }

    pub fn chmod(&self, path: &Name, mode: u32) -> anyhow::Result<()> {
        let local = self.local(path)?;
        let fd = self.open(&local, LOOKUP).map_err(failed(path))?;
        sys::chmod_held(&fd, mode).map_err(|e| failed(path)(e.into()))
    }

    pub fn space(&self, path: &Name) -> anyhow::Result<Space> {
        let local = self.local(path)?;
        let fd = self.open(&local, LOOKUP).map_err(failed(path))?;
        let vfs = rustix::fs::fstatvfs(&fd).map_err(|e| failed(path)(e.into()))?;
        let unit = vfs.f_frsize.max(1);
        Ok(Space {
            total: vfs.f_blocks.saturating_mul(unit),
            free: vfs.f_bfree.saturating_mul(unit),
            available: vfs.f_bavail.saturating_mul(unit),
            inodes: vfs.f_files,
            inodes_free: vfs.f_ffree,
        })
    }

    /// The local path of `path`: beneath the root if there is one, made plain first.
    fn local(&self, path: &Name) -> anyhow::Result<PathBuf> {
        let os = path.to_os().ok_or_else(|| {
            anyhow::anyhow!("{}: a name this system cannot spell", shown_name(path))
        })?;
        if self.fence.root.is_none() {
            return Ok(self.fence.path(os));
        }
        Ok(self.fence.path(plain(os)))
    }

    /// Opens `local` (beneath the root if there is one) with `flags`.
    fn open(&self, local: &Path, flags: OFlags) -> std::io::Result<OwnedFd> {
        match &self.fence.root {
            Some(root) => root.open_beneath(local, flags),
            None => Ok(rustix::fs::open(local, flags | OFlags::CLOEXEC, Mode::empty())?),
        }
    }

    /// The directory that holds `path`'s last name, opened, and that name.
    fn parent(&self, path: &Name) -> anyhow::Result<(OwnedFd, PathBuf)> {
        let local = self.local(path)?;
        let (Some(parent), Some(name)) = (local.parent(), local.file_name()) else {
            anyhow::bail!("{}: names no entry of a directory", shown_name(path));
        };
        if self.fence.root.as_ref().is_some_and(|root| local == root.path()) {
            anyhow::bail!("{}: is the root of this server", shown_name(path));
        }
        let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
        let dir = self.open(parent, LOOKUP | OFlags::DIRECTORY).map_err(failed(path))?;
        Ok((dir, PathBuf::from(name)))
    }
}

/// `path` made plain without the file system, from `/`: `.` dropped, `..` taking off
/// the name before it, none above the top.
fn plain(path: &OsStr) -> PathBuf {
    let mut out = PathBuf::from("/");
    for part in Path::new(path).components() {
        match part {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// The entry `name` at `dir` (empty: `dir` itself), never followed, called `shown_as`.
fn listed(dir: &OwnedFd, name: &OsStr, shown_as: Name, users: &Users) -> std::io::Result<Listed> {
    let stat = if name.is_empty() {
        sys::stat_held(dir)?
    } else {
        rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?
    };
    let mode = sys::full_mode(&stat);
    let target = if mode & soku_proto::browse::TYPE_MASK == soku_proto::browse::TYPE_LINK {
        let target = if name.is_empty() {
            sys::link_target_held(dir)
        } else {
            rustix::fs::readlinkat(dir, name, Vec::new()).ok().map(|t| t.into_bytes())
        };
        target.map(Name::from_bytes)
    } else {
        None
    };
    Ok(Listed {
        name: shown_as,
        mode,
        links: sys::links(&stat),
        uid: stat.st_uid,
        gid: stat.st_gid,
        owner: users.user(stat.st_uid),
        group: users.group(stat.st_gid),
        size: u64::try_from(stat.st_size).unwrap_or(0),
        mtime: stat.st_mtime,
        target,
    })
}

/// The error of a call on `path`, for the client's line.
fn failed(path: &Name) -> impl Fn(std::io::Error) -> anyhow::Error + '_ {
    move |err| anyhow::anyhow!("{}: {}", shown_name(path), describe_io(&err))
}

/// A path for an error line, as bytes that are not UTF-8 are shown (`\xNN`); the
/// client makes the line visible (`crate::ui::visible`) before the terminal sees it.
fn shown_name(path: &Name) -> String {
    soku_proto::name::shown_bytes(path.as_bytes()).into_owned()
}
