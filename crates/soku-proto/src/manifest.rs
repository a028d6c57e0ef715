//! Manifest entries: what the sender is about to send, one entry per frame.

use serde::{Deserialize, Serialize};

use crate::path::WirePath;

/// File metadata carried for scp's `-p` (times) and for the file mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Meta {
    /// Unix permission bits (the low 12 bits are used).
    pub mode: u32,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
    /// Nanoseconds part of the modification time.
    pub mtime_nsec: u32,
    /// Access time, seconds since the epoch.
    pub atime: i64,
    /// Nanoseconds part of the access time.
    pub atime_nsec: u32,
}

/// One manifest entry. Directories come before what they contain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Entry {
    /// A directory to create.
    Dir {
        /// Where, relative to the target.
        path: WirePath,
        /// Its metadata.
        meta: Meta,
    },
    /// A regular file. Ids count up from 0 in manifest order.
    File {
        /// The id chunks refer to.
        id: u32,
        /// Where, relative to the target.
        path: WirePath,
        /// Its exact size in bytes.
        size: u64,
        /// Its metadata.
        meta: Meta,
    },
}

impl Entry {
    /// The entry's wire path.
    pub fn path(&self) -> &WirePath {
        match self {
            Entry::Dir { path, .. } | Entry::File { path, .. } => path,
        }
    }
}
