//! The one entry point: run this side's role of a copy over a link. The client and
//! `soku serve` both come here, whichever of them sends.

use std::path::PathBuf;
use std::sync::Arc;

use soku_proto::message::{Job, Message, Request};
use soku_proto::receive::Receiver;
use soku_proto::ProtoError;

use crate::ahead::Walked;
use crate::events::EventSink;
use crate::link::{Inbound, Link};
use crate::EngineError;

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

/// This side's part in a copy.
#[derive(Debug)]
pub enum Role {
    /// Send these sources.
    Send(Walked),
    /// Receive into the receiver's target, whose directory is `root`.
    Receive {
        /// The receiver's rules, with the target and the names it accepts (boxed: the
        /// state machine is several times the size of the other variant).
        receiver: Box<Receiver>,
        /// The directory everything lands in.
        root: PathBuf,
        /// For a confined server (`soku serve --root`): the directory `root` is opened
        /// beneath ([`crate::fsops::TargetDir::open_below`]).
        beneath: Option<Arc<crate::fsops::TargetDir>>,
        /// Tell the sender of nothing held, whatever is there (`soku serve
        /// --write-only`): with resume, the receiver's reports carry the hashes of what
        /// it holds under the copy's names, which would show a client who may only
        /// write what is there. Every file then comes whole.
        blind: bool,
    },
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

/// Runs `role` over `link` until the copy is done or fails. Every task it starts has
/// ended when it returns, and dropping it midway stops them all; a receiver leaves no
/// temporary file behind either way. A local failure is also told to the peer.
pub async fn run(
    role: Role,
    link: &mut Link,
    opts: CopyOptions,
    events: Arc<dyn EventSink>,
) -> Result<Outcome, EngineError> {
    let result = match role {
        Role::Send(walked) => crate::send::run(walked, opts, link, events).await,
        Role::Receive { receiver, root, beneath, blind } => {
            let within = crate::receive::Within { beneath: beneath.as_deref(), blind };
            crate::receive::run(*receiver, root, within, opts, link, events).await
        }
    };
    if let Err(err) = &result {
        if err.tell_peer() {
            let _ = link.tx.send_control(Message::Fatal { message: err.to_string() }).await;
        }
    }
    result
}

/// The server's first read: the client's request. Chunks that overtook it (on a link
/// whose chunks travel apart from control messages) are held for the role to come.
pub async fn read_request(link: &mut Link) -> Result<Request, EngineError> {
    let mut early = Vec::new();
    let request = loop {
        match link.recv().await {
            Some(Ok(Inbound::Control(Message::Request(request)))) => break request,
            Some(Ok(Inbound::Control(other))) => {
                return Err(ProtoError::Violation(format!(
                    "expected a request from the client, got {}",
                    other.kind()
                ))
                .into())
            }
            Some(Ok(Inbound::Chunk(chunk))) if !link.traits.ordered => early.push(chunk),
            Some(Ok(Inbound::Chunk(_))) => {
                return Err(ProtoError::Violation(
                    "expected a request from the client, got a chunk".into(),
                )
                .into())
            }
            Some(Err(e)) => return Err(e.into()),
            None | Some(Ok(Inbound::Closed)) => {
                return Err(EngineError::PeerClosed { peer: "client", what: "sending its request" })
            }
        }
    };
    for chunk in early {
        link.hold(Inbound::Chunk(chunk));
    }
    Ok(request)
}
