//! What both roles of a copy share: the options that shape it (the client's request
//! carries them to the server) and the outcome either side reports.

use soku_proto::message::{CopyFlags, Job, Request};

/// Options that shape a copy: what the client's request asks, which both roles apply,
/// and what each side learns for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyOptions {
    /// What the client asks, as its request carries it.
    pub flags: CopyFlags,
    /// With `flags.preserve`, the receiving side keeps the setuid, setgid and sticky
    /// bits the sender's modes carry; otherwise it clears them (`receive.rs`). Each side
    /// decides this for what it receives: it is not part of the request, and is set
    /// only for a root user who asked (`--keep-special-bits`).
    pub keep_special_bits: bool,
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
    /// The options of a copy asked with `flags`, before either side learned anything.
    pub fn asked(flags: CopyFlags) -> CopyOptions {
        CopyOptions {
            flags,
            keep_special_bits: false,
            nothing_held: false,
            byte_names: false,
            peer_open_files: None,
            tell_unfinished: false,
        }
    }

    /// The request asking the server to do `job` with these options.
    pub fn request(&self, job: Job) -> Request {
        Request { job, flags: self.flags }
    }

    /// The options a request carries, and its job.
    pub fn from_request(request: Request) -> (Job, CopyOptions) {
        (request.job, CopyOptions::asked(request.flags))
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
    /// Of `files`, those completed from chunks the receiver held (resume).
    pub resumed_files: u32,
    /// In a sync: files skipped (not part of `files`).
    pub skipped: u32,
    /// In a sync with delete: paths removed at the target (or, in a dry run, that would be).
    pub deleted: u32,
}

impl Outcome {
    /// The event that tells a sync's counts.
    pub fn sync_totals(&self) -> crate::events::TransferEvent {
        crate::events::TransferEvent::SyncTotals {
            sent: self.files,
            resumed: self.resumed_files,
            skipped: self.skipped,
            deleted: self.deleted,
        }
    }
}
