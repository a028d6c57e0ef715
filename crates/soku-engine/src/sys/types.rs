//! The types the platform files of [`super`] share.

/// How far a path opened beneath a directory may lead (Unix: Windows resolves beneath
/// a directory through `cap-std`).
#[cfg(unix)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Beneath {
    /// Symlinks are followed while they stay beneath.
    FollowingLinks,
    /// No symlink is followed at all.
    NoLinks,
}

/// The access a second, direct descriptor of a file is opened for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Access {
    Read,
    Write,
}

/// What an operating system's error code says, where soku words it its own way
/// (`crate::failure`): each system has its own codes for these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OsProblem {
    NoSpace,
    QuotaExceeded,
    ReadOnly,
    TooManyOpenFiles,
    NotADirectory,
    SymlinkInTheWay,
    IsADirectory,
}

/// Whether the lock on a file was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Locked {
    /// This process holds it now.
    Taken,
    /// Another holds it.
    Busy,
    /// The file system has no locks: the file is used unlocked.
    Unsupported,
}
