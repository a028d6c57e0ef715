//! The one type the platform files of [`super`] share.

/// How far a path opened beneath a directory may lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Beneath {
    /// Symlinks are followed while they stay beneath.
    FollowingLinks,
    /// No symlink is followed at all.
    NoLinks,
}
