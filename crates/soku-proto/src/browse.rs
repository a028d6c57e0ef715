//! `soku sftp`: the remote side of an interactive session. The client asks for
//! [`crate::message::Job::Browse`] and then, one at a time, sends a [`Call`] (as
//! [`crate::message::Message::Call`]) and reads its [`Answer`]s (as
//! [`crate::message::Message::Answer`]): directory listings and the metadata operations
//! of sftp (RFC 4254's subsystem, draft-ietf-secsh-filexfer-02): realpath, stat,
//! mkdir, rmdir, remove, rename, chmod, statvfs. The files themselves move as soku
//! copies, through the same login, never through this job.
//!
//! Paths are bytes ([`Name`]), as in a copy; the server holds each to the same rules as
//! a copy's (its fences, `soku serve --root`).

use serde::{Deserialize, Serialize};

use crate::name::Name;

/// The protocol version from which a server takes [`crate::message::Job::Browse`]: an
/// older one would refuse the request as undecodable.
pub const BROWSE_SINCE_VERSION: u16 = 11;

/// Most entries one [`Answer::Listing`] holds: a listing of any size is told in frames
/// below [`crate::frame::MAX_CONTROL_FRAME`]: an entry is at most a name of 255 bytes
/// (`NAME_MAX`), a link's target of 4 kB (`PATH_MAX`) and a few numbers.
pub const LISTING_BATCH: usize = 128;

/// One request of the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Call {
    /// The absolute path `path` names (a directory `cd` may enter): answered with
    /// [`Answer::Path`]. An empty path is the session's start.
    Directory {
        /// As the user typed it, or the client joined it to the remote directory.
        path: Name,
    },
    /// What a directory holds, or one entry if `path` is not a directory: answered with
    /// [`Answer::Listing`] batches, the last with `more: false`.
    List {
        /// The directory.
        path: Name,
    },
    /// One entry, its link followed if `follow` (sftp's stat and lstat).
    Stat {
        /// The entry.
        path: Name,
        /// Follow a symbolic link.
        follow: bool,
    },
    /// Make a directory with `mode` (less the server's umask).
    MakeDir {
        /// The new directory.
        path: Name,
        /// Its permission bits.
        mode: u32,
    },
    /// Remove an empty directory.
    RemoveDir {
        /// The directory.
        path: Name,
    },
    /// Remove a file (or a symbolic link, never what it points to).
    Remove {
        /// The file.
        path: Name,
    },
    /// Rename `from` to `to`, which must not exist (sftp's rename; POSIX rename would
    /// replace it).
    Rename {
        /// The entry.
        from: Name,
        /// Its new name.
        to: Name,
    },
    /// Set the permission bits (the lower 12) of an entry, its link followed.
    Chmod {
        /// The entry.
        path: Name,
        /// The bits.
        mode: u32,
    },
    /// The space of the file system that holds `path` (sftp's df, statvfs).
    Space {
        /// Any path on the file system.
        path: Name,
    },
}

impl Call {
    /// Whether the call changes what the server holds (a read-only server refuses it).
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Call::MakeDir { .. }
                | Call::RemoveDir { .. }
                | Call::Remove { .. }
                | Call::Rename { .. }
                | Call::Chmod { .. }
        )
    }

    /// Whether the call tells what the server holds (a write-only server refuses it).
    pub fn reads(&self) -> bool {
        matches!(self, Call::List { .. } | Call::Stat { .. })
    }
}

/// The server's answer to a [`Call`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Answer {
    /// Done.
    Done,
    /// The call failed: why, one line, naming the path as the server saw it.
    Failed {
        /// Why.
        message: String,
    },
    /// An absolute path, as a copy to this server names it.
    Path {
        /// The path.
        path: Name,
    },
    /// Part of a listing, in no particular order.
    Listing {
        /// At most [`LISTING_BATCH`] entries.
        entries: Vec<Listed>,
        /// More batches follow.
        more: bool,
    },
    /// One entry.
    Stat {
        /// The entry.
        entry: Listed,
    },
    /// A file system's space.
    Space(Space),
}

/// One entry of a listing, as `ls -l` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    /// Its name in the directory (the path asked for, for a stat).
    pub name: Name,
    /// The file type and permission bits (`st_mode`).
    pub mode: u32,
    /// Hard links.
    pub links: u64,
    /// Owner and group, as numbers.
    pub uid: u32,
    /// The group.
    pub gid: u32,
    /// Owner and group as names on the server, where it has them.
    pub owner: Option<String>,
    /// The group's name.
    pub group: Option<String>,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
    /// Where a symbolic link points (its bytes as read), if it is one.
    pub target: Option<Name>,
}

/// The file type bits of [`Listed::mode`] (`S_IFMT`, POSIX).
pub const TYPE_MASK: u32 = 0o170_000;
/// A directory (`S_IFDIR`).
pub const TYPE_DIR: u32 = 0o040_000;
/// A symbolic link (`S_IFLNK`).
pub const TYPE_LINK: u32 = 0o120_000;
/// A regular file (`S_IFREG`).
pub const TYPE_FILE: u32 = 0o100_000;

impl Listed {
    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.mode & TYPE_MASK == TYPE_DIR
    }

    /// Whether it is a symbolic link.
    pub fn is_link(&self) -> bool {
        self.mode & TYPE_MASK == TYPE_LINK
    }
}

/// A file system's space, as statvfs(3) tells it, in bytes and inodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Space {
    /// Size.
    pub total: u64,
    /// Free for anyone.
    pub free: u64,
    /// Free for this user (without the part kept for root).
    pub available: u64,
    /// Inodes in all.
    pub inodes: u64,
    /// Inodes free.
    pub inodes_free: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_are_told_apart() {
        let path = Name::from("x");
        assert!(Call::Remove { path: path.clone() }.writes());
        assert!(!Call::Remove { path: path.clone() }.reads());
        assert!(Call::List { path: path.clone() }.reads());
        assert!(!Call::Directory { path: path.clone() }.writes());
        assert!(!Call::Space { path }.reads());
    }
}
