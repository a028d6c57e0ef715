//! What can end a copy. Messages are one line, lowercase, and say what happened in the
//! words a user knows; the binary adds which side and what to do.

use soku_proto::ProtoError;

/// A failure of the data path itself.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The connection under the link failed (QUIC connection lost, stream reset).
    #[error("connection lost: {0}")]
    Lost(String),
    /// Reading or writing the link's byte stream failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The peer's bytes are not a valid frame (too large, malformed, cut short).
    #[error(transparent)]
    Protocol(#[from] ProtoError),
    /// Our side of the link was already closed.
    #[error("connection closed while sending")]
    Closed,
    /// Nothing at all came from the peer, not even a keep-alive, for this long.
    #[error("the peer sent nothing for {} s: it stalled", .0.as_secs())]
    Stalled(std::time::Duration),
}

/// Why a copy stopped.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The peer broke the protocol: a message out of place, an unsafe path, a bad chunk.
    #[error(transparent)]
    Protocol(#[from] ProtoError),
    /// The peer reported that it cannot go on.
    #[error("remote: {0}")]
    Remote(String),
    /// The data path failed.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The peer ended the conversation before the copy was done.
    #[error("the {peer} closed the connection before {what}")]
    PeerClosed {
        /// "sender" or "receiver".
        peer: &'static str,
        /// What was still missing.
        what: &'static str,
    },
    /// A local operation that the whole copy depends on failed (not one file's).
    #[error("{path}: {source}")]
    Local {
        /// The path concerned.
        path: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The target's file system refused in a way that fails every file (full, quota,
    /// read-only); the line names the path and what to do.
    #[error("{0}")]
    Target(String),
    /// The target's file system ran out of space or quota: a [`EngineError::Target`]
    /// that the receiver sums up before the copy ends (`TransferEvent::Unfinished`).
    #[error("{0}")]
    NoSpace(String),
    /// The sources cannot be opened in a way that fails every file (too many open
    /// files); the line names the path and what to do.
    #[error("{0}")]
    Source(String),
    /// The sources could not be walked.
    #[error("reading the sources: {0}")]
    Walk(std::io::Error),
    /// A file has more chunks than this machine can count.
    #[error("{0}: file too large for this machine")]
    TooLarge(String),
    /// A task of the copy panicked or the runtime is shutting down.
    #[error("internal: {0}")]
    Internal(String),
}

impl EngineError {
    /// Whether what a receiver holds after this error is worth keeping for a resume:
    /// yes when the copy was cut off (the link lost, the peer gone, this side's disk
    /// full), no when the peer broke the protocol or this side has a bug.
    pub fn keeps_partial_files(&self) -> bool {
        !matches!(
            self,
            EngineError::Protocol(_)
                | EngineError::Link(LinkError::Protocol(_))
                | EngineError::TooLarge(_)
                | EngineError::Internal(_)
        )
    }

    /// Whether the peer should hear of this error as a `Fatal` message: not when it came
    /// from the peer, and not when the link to it is gone.
    pub fn tell_peer(&self) -> bool {
        !matches!(
            self,
            EngineError::Remote(_) | EngineError::Link(_) | EngineError::PeerClosed { .. }
        )
    }
}

impl From<tokio::task::JoinError> for EngineError {
    fn from(e: tokio::task::JoinError) -> Self {
        EngineError::Internal(format!("a task of the copy ended: {e}"))
    }
}
