//! Typed errors of the emulator.

use std::io;

/// Everything that can go wrong while building, running or tearing down a path.
#[derive(Debug, thiserror::Error)]
pub enum NetemError {
    /// A spec value is out of range (loss outside 0..=1, MTU too small, zero rate...).
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// A unit string (`50ms`, `1%`, `100mbit`, `64k`) could not be parsed.
    #[error("cannot parse {what} from {input:?}")]
    Parse {
        /// What was expected (duration, rate, percentage, size).
        what: &'static str,
        /// The text that was given.
        input: String,
    },
    /// A namespace name is empty, too long or contains characters `ip netns` refuses.
    #[error("invalid namespace name {0:?}")]
    InvalidName(String),
    /// A namespace with this name already exists (run `soku-netem down NAME`).
    #[error("namespace {0} already exists")]
    NamespaceExists(String),
    /// An `ip` command failed; holds the command line and its stderr.
    #[error("`{cmd}` failed: {stderr}")]
    Command {
        /// The command line that was run.
        cmd: String,
        /// Its standard error, trimmed.
        stderr: String,
    },
    /// A system call failed (opening the TUN device, setns, thread spawn...).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The underlying OS error.
        #[source]
        source: io::Error,
    },
}

impl NetemError {
    pub(crate) fn io(what: &'static str) -> impl FnOnce(io::Error) -> NetemError {
        move |source| NetemError::Io { what, source }
    }
}

/// Shorthand used throughout the crate.
pub type Result<T> = std::result::Result<T, NetemError>;
