//! Control messages, exchanged as frames on the control channel (the QUIC control stream,
//! or the ssh channel when QUIC cannot get through).

use serde::{Deserialize, Serialize};

use crate::{chunk::ChunkHeader, manifest::Entry, name::Name};

/// The client's request: what the server is to do, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The server's role in this copy.
    pub job: Job,
    /// How the copy is to be made (a tunnel or a diagnosis takes [`CopyFlags::NONE`]).
    pub flags: CopyFlags,
}

/// How a copy is to be made, as the client asks and both sides apply: scp's options and
/// soku's own. postcard encodes a nested struct as its fields in order, so a request
/// reads on the wire as it did when these were fields of [`Request`] itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyFlags {
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
    /// Continue interrupted copies: the receiver tells the sender which chunks of each
    /// file it already holds ([`Message::Held`]) and the sender sends only the rest.
    pub resume: bool,
    /// The receiver flushes each file to disk before renaming it into place (see
    /// docs/durability.md).
    pub fsync: bool,
}

impl CopyFlags {
    /// No copy: the flags of a job that moves no files.
    pub const NONE: CopyFlags = CopyFlags {
        recursive: false,
        preserve: false,
        compress: false,
        chunk_size: crate::chunk::DEFAULT_CHUNK_SIZE,
        rate_limit_bps: None,
        resume: false,
        fsync: false,
    };
}

/// What the server does for the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Job {
    /// Upload: the server receives into `target`.
    Receive {
        /// The target path as the user typed it (relative to the remote home), as bytes:
        /// UTF-8 or not (a peer from before `BYTE_NAMES_SINCE_VERSION` is sent UTF-8
        /// only, see [`crate::name`]).
        target: Name,
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
        /// Source paths as the user typed them (globs are expanded by the server), as
        /// bytes, like [`Job::Receive`]'s target.
        sources: Vec<Name>,
    },
    /// `soku diagnose`: the server measures its host (disk speed at `target`), sends
    /// [`Message::DiagnoseFacts`], then serves the probes the client opens on QUIC
    /// bidirectional streams (see `crates/soku/src/diagnose/`), answering each with a
    /// [`Message::DiagnoseProbe`]. An older server cannot decode this job and says so
    /// in a [`Message::Fatal`].
    Diagnose {
        /// Where to measure the write speed (as the user typed it; empty: the home).
        target: String,
    },
    /// `soku sync` (since [`crate::sync::SYNC_SINCE_VERSION`]): a copy under these
    /// rules.
    Sync {
        /// The copy.
        copy: SyncCopy,
        /// What the synchronisation adds.
        rules: crate::sync::SyncRules,
    },
    /// `soku sftp` (since [`crate::browse::BROWSE_SINCE_VERSION`]): the server answers
    /// the client's [`Message::Call`]s until the client ends the session.
    Browse,
}

/// The copy of a [`Job::Sync`]: [`Job::Receive`] or [`Job::Send`], with their fields. An
/// enum of its own rather than a nested job, so that no request nests without end (a
/// decoder would recurse as deep as a hostile peer's bytes went).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SyncCopy {
    /// As [`Job::Receive`].
    Receive {
        /// As [`Job::Receive`]'s.
        target: Name,
        /// As [`Job::Receive`]'s.
        sources: u32,
    },
    /// As [`Job::Send`].
    Send {
        /// As [`Job::Send`]'s.
        sources: Vec<Name>,
    },
}

impl Job {
    /// The copy itself, and the synchronisation's rules if it is one.
    pub fn unwrap_sync(self) -> (Job, Option<crate::sync::SyncRules>) {
        match self {
            Job::Sync { copy: SyncCopy::Receive { target, sources }, rules } => {
                (Job::Receive { target, sources }, Some(rules))
            }
            Job::Sync { copy: SyncCopy::Send { sources }, rules } => {
                (Job::Send { sources }, Some(rules))
            }
            job => (job, None),
        }
    }
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
        /// How many of its chunks were sent (the others the receiver holds already):
        /// the receiver settles the file only once it has that many, so a chunk still
        /// on its way cannot be taken for one it holds.
        sent: u32,
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
    /// Receiver to sender, with resume: what the receiver already holds of a file.
    Held(Held),
    /// Either side, after a while with nothing else to send: "still here". The link
    /// drops it on arrival; it only keeps the peer from taking a busy side for a stalled
    /// one.
    KeepAlive,
    /// Server to client, in a diagnose job: what the server's host is.
    DiagnoseFacts(crate::diagnose::HostFacts),
    /// Server to client, in a diagnose job: the server's side of one probe.
    DiagnoseProbe(crate::diagnose::ProbeReport),
    /// Receiver to sender, just before its `Fatal`, when the target ran out of space
    /// (since protocol [`UNFINISHED_SINCE_VERSION`]): what the target holds, for the
    /// user's summary.
    Unfinished(Unfinished),
    /// Receiver to sender, in a sync: file `file` is not sent (told instead of any
    /// [`Message::Held`] report for it); neither side reads it.
    Skipped {
        /// The file id.
        file: u32,
        /// Why.
        reason: crate::sync::SkipReason,
    },
    /// Receiver to sender, in a sync with `delete`, before its finish report: this path
    /// below the target was removed (or, in a dry run, would be).
    Deleted {
        /// The path, relative to the target.
        path: crate::path::WirePath,
    },
    /// Client to server, in a browse job: one request of the session.
    Call(crate::browse::Call),
    /// Server to client, in a browse job: the answer to the last call.
    Answer(crate::browse::Answer),
}

/// The protocol version from which a receiver that runs out of space tells the sender
/// what it holds ([`Message::Unfinished`]): an older sender would take the message for
/// a malformed frame.
pub const UNFINISHED_SINCE_VERSION: u16 = 9;

/// Most partial files an [`Unfinished`] names: the user reads a handful, and the count
/// says how many more there are.
pub const UNFINISHED_NAMES: usize = 10;

/// What a receiver that stopped for lack of space holds at its target: the files that
/// arrived whole, and the partial files it keeps for the same command to resume.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unfinished {
    /// The target directory, as the receiving side names it.
    pub target: String,
    /// Files the sender planned to send (0 when it had not told yet).
    pub planned: u32,
    /// Files verified and in place under their final names.
    pub whole: u32,
    /// Partial files kept (`.NAME.soku-part` beside each NAME).
    pub partial: u32,
    /// The space they take on the target's file system, in bytes.
    pub partial_bytes: u64,
    /// The final names of the first [`UNFINISHED_NAMES`] of them, sorted.
    pub names: Vec<String>,
}

/// Most chunks one [`Held`] message lists (37 kB on the wire), so a file of any size is
/// told in frames far below [`crate::frame::MAX_CONTROL_FRAME`].
pub const HELD_BATCH: usize = 1024;

/// Receiver to sender, with resume: of the chunks `from..to` of `file`, the receiver
/// holds exactly these, with the BLAKE3 of the bytes it holds. The sender sends a chunk
/// only after a `Held` covering it: the batches of a file come in order, the first from
/// chunk 0, the last up to its chunk count. Each chunk listed is checked against the
/// source (it is read and hashed there anyway): one that matches is not sent, one that
/// does not is sent again; the file's root hash checks the whole at the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// The file id.
    pub file: u32,
    /// Where the held chunks are (the same in every batch of a file).
    pub base: HeldBase,
    /// First chunk index this batch speaks for.
    pub from: u32,
    /// One past the last chunk index this batch speaks for.
    pub to: u32,
    /// The chunks held in `from..to`, in ascending index order.
    pub chunks: Vec<HeldChunk>,
}

/// One chunk the receiver holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldChunk {
    /// The chunk's index.
    pub index: u32,
    /// BLAKE3 of the bytes the receiver holds for it.
    pub hash: [u8; 32],
}

/// What a receiver found for a file before receiving it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HeldBase {
    /// Nothing: the whole file is to be sent.
    Nothing,
    /// The partial file of an interrupted copy of this same source (size and modification
    /// time as recorded when it began).
    Partial,
    /// A file of the same size already at the final name.
    Complete,
    /// There was a partial file, but the source changed since (the reason, one line):
    /// it was discarded and the whole file is to be sent.
    Restarted {
        /// What changed.
        reason: String,
    },
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
            Message::Held(_) => "a held-chunks report",
            Message::KeepAlive => "a keep-alive",
            Message::DiagnoseFacts(_) => "a diagnose report",
            Message::DiagnoseProbe(_) => "a probe report",
            Message::Unfinished(_) => "a report of unfinished files",
            Message::Skipped { .. } => "a skipped-file report",
            Message::Deleted { .. } => "a deletion report",
            Message::Call(_) => "a session request",
            Message::Answer(_) => "a session answer",
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    /// A request as peers from before [`CopyFlags`] wrote it: every flag a field of the
    /// request itself.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct FlatRequest {
        job: Job,
        recursive: bool,
        preserve: bool,
        compress: bool,
        chunk_size: u32,
        rate_limit_bps: Option<u64>,
        resume: bool,
        fsync: bool,
    }

    #[test]
    fn a_request_reads_on_the_wire_as_the_flat_one_of_older_peers() {
        let flags = CopyFlags {
            recursive: true,
            preserve: false,
            compress: true,
            chunk_size: 4 << 20,
            rate_limit_bps: Some(8_000_000),
            resume: true,
            fsync: false,
        };
        let job = Job::Receive { target: "dst".into(), sources: 3 };
        let request = Request { job: job.clone(), flags };
        let flat = FlatRequest {
            job,
            recursive: true,
            preserve: false,
            compress: true,
            chunk_size: 4 << 20,
            rate_limit_bps: Some(8_000_000),
            resume: true,
            fsync: false,
        };
        let ours = postcard::to_stdvec(&request).expect("encode");
        assert_eq!(ours, postcard::to_stdvec(&flat).expect("encode"));
        let theirs: Request = postcard::from_bytes(&ours).expect("decode");
        assert_eq!(theirs, request);
    }
}
