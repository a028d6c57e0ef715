//! What both roles of a copy share: the options that shape it (the client's request
//! carries them to the server) and the outcome either side reports.

use soku_proto::message::{Job, Request};

/// Options that shape a copy, shared by both roles (the client's request carries them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyOptions {
    /// Copy directories (scp -r).
    pub recursive: bool,
    /// Preserve times and full mode (scp -p).
    pub preserve: bool,
    /// With `preserve`, the receiving side keeps the setuid, setgid and sticky bits
    /// the sender's modes carry; otherwise it clears them (`receive.rs`). Each side
    /// decides this for what it receives: it is not part of the request, and is set
    /// only for a root user who asked (`--keep-special-bits`).
    pub keep_special_bits: bool,
    /// Compress chunks where it pays (scp -C).
    pub compress: bool,
    /// Chunk size in bytes.
    pub chunk_size: u32,
    /// The sender's rate limit in bits per second (scp -l).
    pub rate_limit_bps: Option<u64>,
    /// Continue what an interrupted copy left (on by default; `--no-resume` turns it
    /// off): see [`crate::partial`].
    pub resume: bool,
    /// Flush each received file to disk before it takes its final name (on by default;
    /// `--no-fsync` turns it off): see docs/durability.md.
    pub fsync: bool,
    /// With resume: the receiving side said over ssh, before the copy began, that it
    /// holds nothing under the names that come (`soku_proto::hello::ReceivePreview`), so
    /// the copy runs without `Held` reports and saves their round trip. Not part of the
    /// request: both sides learn it from the hellos.
    pub nothing_held: bool,
    /// The peer takes names that are not UTF-8 (it speaks
    /// `soku_proto::name::BYTE_NAMES_SINCE_VERSION` or later). Without it the sender
    /// reports each such name as a failed source instead of sending what the peer could
    /// not decode. Not part of the request: both sides learn it from the hellos.
    pub byte_names: bool,
    /// The most descriptors the other side may hold open, as its hello said (`None`: a
    /// peer that does not say). A sender keeps the files it has open at the receiver
    /// within it ([`crate::limits::for_files`]). Not part of the request either.
    pub peer_open_files: Option<u64>,
    /// A receiver that runs out of space tells the sender what it holds
    /// (`Message::Unfinished`): only a peer of protocol
    /// `soku_proto::message::UNFINISHED_SINCE_VERSION` or later understands it, and only
    /// a server's sender (the client) shows it. Not part of the request: the server sets
    /// it from the hellos.
    pub tell_unfinished: bool,
}

impl CopyOptions {
    /// The request asking the server to do `job` with these options.
    pub fn request(&self, job: Job) -> Request {
        Request {
            job,
            recursive: self.recursive,
            preserve: self.preserve,
            compress: self.compress,
            chunk_size: self.chunk_size,
            rate_limit_bps: self.rate_limit_bps,
            resume: self.resume,
            fsync: self.fsync,
        }
    }

    /// The options a request carries, and its job.
    pub fn from_request(request: Request) -> (Job, CopyOptions) {
        let Request {
            job,
            recursive,
            preserve,
            compress,
            chunk_size,
            rate_limit_bps,
            resume,
            fsync,
        } = request;
        let opts = CopyOptions {
            recursive,
            preserve,
            keep_special_bits: false,
            compress,
            chunk_size,
            rate_limit_bps,
            resume,
            fsync,
            nothing_held: false,
            byte_names: false,
            peer_open_files: None,
            tell_unfinished: false,
        };
        (job, opts)
    }
}

/// What a finished copy reports (the receiver's count, on both sides).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Files verified and in place.
    pub files: u32,
    /// Bytes verified.
    pub bytes: u64,
    /// Files that failed on either side.
    pub failures: u32,
    /// Of `bytes`, those already held by the receiver (resume): not sent again.
    pub resumed: u64,
}
