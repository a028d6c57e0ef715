//! Control messages, exchanged as frames on the control channel (the QUIC control stream,
//! or the ssh channel when QUIC cannot get through).

use serde::{Deserialize, Serialize};

use crate::{chunk::ChunkHeader, manifest::Entry};

/// The client's request: what the server is to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The server's role in this copy.
    pub job: Job,
    /// Copy directories recursively (scp -r).
    pub recursive: bool,
    /// Preserve times and modes (scp -p).
    pub preserve: bool,
    /// Compress chunks where it pays (scp -C).
    pub compress: bool,
    /// Chunk size in bytes chosen by the client; see [`crate::chunk::check_chunk_size`].
    pub chunk_size: u32,
    /// The sender's rate limit in bits per second (scp -l), `None` for none.
    pub rate_limit_bps: Option<u64>,
}

/// What the server does for the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Job {
    /// Upload: the server receives into `target`.
    Receive {
        /// The target path as the user typed it (relative to the remote home).
        target: String,
        /// How many sources the client sends; with more than one, the target must be a
        /// directory.
        sources: u32,
    },
    /// Tunnel: for each bidirectional QUIC stream the client opens, the server connects to
    /// `destination` and relays bytes both ways until either side closes.
    Tunnel {
        /// `HOST:PORT` as seen from the server.
        destination: String,
        /// Whether both directions are zstd-compressed.
        compress: bool,
    },
    /// Download: the server sends these paths.
    Send {
        /// Source paths as the user typed them (globs are expanded by the server).
        sources: Vec<String>,
    },
}

/// A control message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Client to server, first on the control channel.
    Request(Request),
    /// Sender to receiver, before any entry: the size of the whole job (for progress).
    Plan {
        /// Files to send.
        files: u32,
        /// Their total size.
        bytes: u64,
    },
    /// Sender to receiver: one manifest entry.
    Entry(Entry),
    /// Sender to receiver: a source could not be sent (the copy goes on with the rest).
    SourceError {
        /// The source as named by the user.
        path: String,
        /// Why, one line.
        message: String,
    },
    /// Sender to receiver: all chunks of this file were read; their root hash.
    FileSummary {
        /// The file id.
        file: u32,
        /// BLAKE3 over the chunk hashes in order (see [`crate::chunk::root_hash`]).
        root: [u8; 32],
    },
    /// Sender to receiver: a file could not be read to the end; drop it.
    FileAborted {
        /// The file id.
        file: u32,
        /// Why, one line.
        message: String,
    },
    /// Sender to receiver: no more entries.
    EndOfManifest {
        /// Number of file entries sent.
        files: u32,
        /// Their total size.
        bytes: u64,
    },
    /// Receiver to sender: total bytes verified so far.
    Progress {
        /// Verified bytes, cumulative.
        verified_bytes: u64,
    },
    /// Receiver to sender: a file failed on the receiving side.
    FileFailed {
        /// The file id.
        file: u32,
        /// Why, one line.
        message: String,
    },
    /// Receiver to sender: everything is done.
    Finished {
        /// Files written and verified.
        files: u32,
        /// Bytes written and verified.
        bytes: u64,
        /// Files that failed.
        failures: u32,
    },
    /// Either side: the copy cannot go on.
    Fatal {
        /// Why, one line.
        message: String,
    },
    /// Over the ssh channel only: a chunk header; `header.wire_len` raw bytes follow.
    Chunk(ChunkHeader),
}

impl Message {
    /// The message's kind, for error messages: never its content, which may be large or
    /// hostile.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Request(_) => "a request",
            Message::Plan { .. } => "a plan",
            Message::Entry(_) => "a manifest entry",
            Message::SourceError { .. } => "a source error",
            Message::FileSummary { .. } => "a file summary",
            Message::FileAborted { .. } => "a file abort",
            Message::EndOfManifest { .. } => "an end of manifest",
            Message::Progress { .. } => "a progress report",
            Message::FileFailed { .. } => "a file failure",
            Message::Finished { .. } => "a finish report",
            Message::Fatal { .. } => "a fatal error",
            Message::Chunk(_) => "a chunk",
        }
    }
}
