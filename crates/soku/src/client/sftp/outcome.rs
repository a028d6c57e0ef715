//! What a command of the session leaves behind: go on, end, or a failure and whether
//! the session survives it.

use super::browse::BrowseError;

/// What a command leaves the session to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    /// Read the next command.
    Next,
    /// End the session (`bye`).
    Quit,
}

/// A command that failed: the session goes on, unless the remote side is gone.
#[derive(Debug)]
pub enum Failed {
    /// The line was said; the session goes on.
    Command(String),
    /// The remote session is gone: nothing more can run.
    Lost(String),
}

impl From<BrowseError> for Failed {
    fn from(err: BrowseError) -> Self {
        match err {
            BrowseError::Refused(_) => Failed::Command(err.to_string()),
            BrowseError::Gone(_) => Failed::Lost(err.to_string()),
        }
    }
}

impl From<String> for Failed {
    fn from(line: String) -> Self {
        Failed::Command(line)
    }
}
