//! The protocol's one error type. Messages are short and lowercase; the binary adds context.

/// What can go wrong while decoding or checking what a peer sent.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ProtoError {
    /// A frame announced more bytes than the limit allows.
    #[error("frame of {len} bytes exceeds the limit of {limit} bytes")]
    FrameTooLarge {
        /// The announced length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A frame's payload could not be decoded.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The byte stream ended inside a frame.
    #[error("connection closed in the middle of a message")]
    Truncated,
    /// The login noise before the hello was longer than we accept.
    #[error("no soku hello within the first {0} bytes from the remote")]
    NoHello(usize),
    /// The two sides share no protocol version.
    #[error("{}", version_mismatch(remote, *remote_min, *remote_max, *local_min, *local_max))]
    VersionMismatch {
        /// Who the peer is, for the message: "the remote host", "the client".
        remote: &'static str,
        /// Oldest version the remote speaks.
        remote_min: u16,
        /// Newest version the remote speaks.
        remote_max: u16,
        /// Oldest version we speak.
        local_min: u16,
        /// Newest version we speak.
        local_max: u16,
    },
    /// A path from the peer is unsafe or invalid.
    #[error("unsafe path from peer: {0}")]
    UnsafePath(String),
    /// The peer sent a name we did not ask for (the scp CVE-2019-6111 class).
    #[error("peer sent {name:?}, which does not match any requested source")]
    UnexpectedName {
        /// The name the peer sent.
        name: String,
    },
    /// A message arrived that makes no sense at this point of the protocol.
    #[error("protocol violation: {0}")]
    Violation(String),
    /// This side's own code broke a rule of the state machine (a bug, not the peer's).
    #[error("internal error: {0}")]
    Internal(String),
    /// A chunk's content does not match its hash.
    #[error(
        "chunk {index} of {path} failed verification (the source changed while it was \
         copied, or the data was damaged): copy it again"
    )]
    ChunkHashMismatch {
        /// The file's wire path.
        path: String,
        /// The chunk index.
        index: u32,
    },
    /// A file's root hash does not match the sender's.
    #[error(
        "{path} failed verification: its root hash differs from the sender's (the source \
         changed while it was copied, or the data was damaged): copy it again"
    )]
    FileHashMismatch {
        /// The file's wire path.
        path: String,
    },
}

/// The words for [`ProtoError::VersionMismatch`]: both sides' versions, and which side
/// to upgrade (the one whose newest version is older than the other's oldest).
fn version_mismatch(
    remote: &str,
    remote_min: u16,
    remote_max: u16,
    local_min: u16,
    local_max: u16,
) -> String {
    let range = |lo: u16, hi: u16| if lo == hi { format!("{lo}") } else { format!("{lo}-{hi}") };
    let upgrade = if remote_max < local_min {
        format!("upgrade soku on {remote}")
    } else {
        "upgrade soku on this host".to_string()
    };
    format!(
        "soku on {remote} speaks protocol version {}, this soku speaks {}: {upgrade} (or install the same soku version on both)",
        range(remote_min, remote_max),
        range(local_min, local_max)
    )
}
