//! The client's hello: its versions, its certificate's fingerprint, and what it asks of
//! the server (a direct data path, a receive preview, a kept server).

use serde::{Deserialize, Serialize};
use std::ops::RangeInclusive;

use super::decode::optional_field;
use super::version::negotiate;
use crate::{ProtoError, PROTOCOL_VERSIONS};

/// The client's opening message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientHello {
    /// Oldest protocol version the client speaks.
    pub min_version: u16,
    /// Newest protocol version the client speaks.
    pub max_version: u16,
    /// SHA-256 of the client's ephemeral certificate.
    pub fingerprint: [u8; 32],
    /// Whether the client wants a direct data path, QUIC or TLS over TCP (false: the data
    /// moves over the ssh channel only).
    pub want_direct: bool,
    /// On a download: what an earlier copy from this host learned about the path, for
    /// the server's congestion controller to resume from. Older clients' hellos end
    /// before this field ([`decode_client_hello`] reads both).
    pub path_memory: Option<PathMemory>,
    /// `--background`: the server's congestion controller, when it sends the data,
    /// yields to other traffic. Absent from older clients' hellos (false).
    pub background: bool,
    /// `soku diagnose`: the server answers the client's [`TransportChoice`](super::TransportChoice) at once
    /// with a [`ServerNote::ChoiceSeen`](super::ServerNote::ChoiceSeen) on the ssh channel, so the client can time a
    /// round trip over ssh. Absent from older clients' hellos (false).
    pub diagnose: bool,
    /// What the receiving side may be asked or told before the copy begins (since
    /// protocol 6). Absent from older clients' hellos (none).
    pub receive_preview: Option<ReceivePreview>,
    /// The server may stay once its job is done, for the client's next copies to reach
    /// over QUIC alone with the same two certificates (since protocol 7, see
    /// [`KEEP_SINCE_VERSION`](super::KEEP_SINCE_VERSION)). Absent from older clients' hellos (false).
    pub keep: bool,
    /// The most descriptors the client may hold open ([`ServerHello::Ready`](super::ServerHello::Ready)'s field of
    /// the same name). Absent from older clients' hellos (none).
    pub open_files: Option<u64>,
}

/// Lets a copy with resume skip the round trip in which the first file's chunks wait
/// for the receiver's first [`crate::message::Held`] report: when the receiver holds
/// nothing under the names that will come (no file and no partial file there), both
/// sides learn so over ssh before the copy begins, and the copy runs without reports
/// (`Sender::with_nothing_held`, `Receiver::with_nothing_held`). Since protocol 6: a
/// server from before ignores it and answers nothing, and the client, seeing the
/// server's version, waits for no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReceivePreview {
    /// An upload: the server will receive into `target` (as the request will say) the
    /// `sources` the client sends, whose top-level names are `names`. The server
    /// answers with [`ServerNote::Holds`](super::ServerNote::Holds) right after reading the hello.
    Upload {
        /// The target as the user typed it.
        target: String,
        /// How many sources the request will name.
        sources: u32,
        /// Each source's top-level name, as its entries will carry it.
        names: Vec<String>,
    },
    /// A download: the client, receiving, holds nothing under the names it asks for, so
    /// the server sends every chunk without waiting for reports.
    NothingHeld,
}

/// The most bytes of target and names an upload's preview carries: the whole hello must
/// stay within the 4096 bytes a server from before protocol 6 reads (it ignores the
/// preview, but refuses a larger frame). A larger preview is not sent.
pub const MAX_PREVIEW_BYTES: usize = 3072;

impl ReceivePreview {
    /// An upload's preview, or `None` when it would not fit in [`MAX_PREVIEW_BYTES`].
    pub fn upload(target: &str, sources: u32, names: Vec<String>) -> Option<Self> {
        let bytes = names.iter().fold(target.len(), |sum, name| sum + name.len() + 2);
        (bytes <= MAX_PREVIEW_BYTES).then(|| ReceivePreview::Upload {
            target: target.to_string(),
            sources,
            names,
        })
    }
}

/// The fields of a client hello before `path_memory` (protocols 2-5).
#[derive(Debug, Deserialize)]
struct ClientHelloV5 {
    min_version: u16,
    max_version: u16,
    fingerprint: [u8; 32],
    want_direct: bool,
}

/// What a copy learned about a path in the direction its data flowed: the rate it
/// delivered and the smallest RTT, for the next connection's careful resume
/// (RFC 9959).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathMemory {
    /// Delivered rate, bits per second.
    pub bandwidth_bps: u64,
    /// Smallest RTT, microseconds.
    pub min_rtt_us: u64,
}

/// Decodes the client's hello: the fields every client since protocol 2 sends, then
/// each later field if the hello goes on that far (an older client's ends sooner; its
/// absent fields take their defaults), ignoring what a newer client added after them.
pub fn decode_client_hello(payload: &[u8]) -> Result<ClientHello, ProtoError> {
    let (old, rest) = postcard::take_from_bytes::<ClientHelloV5>(payload)
        .map_err(|e| ProtoError::Malformed(e.to_string()))?;
    let (path_memory, rest) = optional_field::<Option<PathMemory>>(rest)?;
    let (background, rest) = optional_field::<bool>(rest)?;
    let (diagnose, rest) = optional_field::<bool>(rest)?;
    let (receive_preview, rest) = optional_field::<Option<ReceivePreview>>(rest)?;
    let (keep, rest) = optional_field::<bool>(rest)?;
    let (open_files, _) = optional_field::<Option<u64>>(rest)?;
    Ok(ClientHello {
        min_version: old.min_version,
        max_version: old.max_version,
        fingerprint: old.fingerprint,
        want_direct: old.want_direct,
        path_memory: path_memory.flatten(),
        background: background.unwrap_or(false),
        diagnose: diagnose.unwrap_or(false),
        receive_preview: receive_preview.flatten(),
        keep: keep.unwrap_or(false),
        open_files: open_files.flatten(),
    })
}

impl ClientHello {
    /// A hello with this build's version range.
    pub fn new(fingerprint: [u8; 32], want_direct: bool) -> Self {
        Self::speaking(PROTOCOL_VERSIONS, fingerprint, want_direct)
    }

    /// A hello of a build speaking `versions`.
    pub fn speaking(
        versions: RangeInclusive<u16>,
        fingerprint: [u8; 32],
        want_direct: bool,
    ) -> Self {
        Self {
            min_version: *versions.start(),
            max_version: *versions.end(),
            fingerprint,
            want_direct,
            path_memory: None,
            background: false,
            diagnose: false,
            receive_preview: None,
            keep: false,
            open_files: None,
        }
    }

    /// The versions the client speaks.
    pub fn versions(&self) -> RangeInclusive<u16> {
        self.min_version..=self.max_version
    }

    /// The server's choice: the newest version both this build and the client speak.
    pub fn negotiate(&self) -> Result<u16, ProtoError> {
        negotiate(PROTOCOL_VERSIONS, self.versions(), "the client")
    }
}
