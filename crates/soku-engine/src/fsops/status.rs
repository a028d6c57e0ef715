//! What a name below the target holds, as both platforms' file operations tell it.

/// What a name holds.
#[derive(Debug)]
pub enum Found {
    /// A regular file, opened.
    File(std::fs::File),
    /// A directory.
    Directory,
    /// Nothing, or something that is neither: a symlink (never followed), a device, a
    /// pipe, a socket.
    Neither,
}

impl Found {
    /// The file, if a regular file was found.
    pub fn into_file(self) -> Option<std::fs::File> {
        match self {
            Found::File(file) => Some(file),
            _ => None,
        }
    }
}

/// The kind of what a name holds, the name itself looked at (a symlink is not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symlink (or, on Windows, a junction or another reparse point).
    Symlink,
    /// A device, a pipe, a socket.
    Other,
}

/// The status of what a name holds, not following a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// What it is.
    pub kind: Kind,
    /// Its length in bytes.
    pub size: u64,
    /// When it was last written: seconds and nanoseconds since the Unix epoch.
    pub modified: (i64, u32),
    /// Its permission bits (with set-id and sticky).
    pub mode: u32,
}
