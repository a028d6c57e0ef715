//! Bootstrap over the ssh channel: versions, the server's UDP port, and both sides'
//! certificate fingerprints, so QUIC can pin exactly those two certificates.
//!
//! The client speaks first (its hello waits in ssh's buffer until `soku serve` starts).
//! The server's stdout may carry noise from login scripts before the hello: the client
//! skips everything before [`MAGIC`](crate::MAGIC) with a [`HelloScanner`].

use serde::{Deserialize, Serialize};

use std::ops::RangeInclusive;

use crate::{ProtoError, MAGIC, PROTOCOL_VERSIONS};

/// Most login noise we skip before giving up on a hello.
pub const MAX_NOISE: usize = 1 << 20;

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
    /// `soku diagnose`: the server answers the client's [`TransportChoice`] at once
    /// with a [`ServerNote::ChoiceSeen`] on the ssh channel, so the client can time a
    /// round trip over ssh. Absent from older clients' hellos (false).
    pub diagnose: bool,
    /// What the receiving side may be asked or told before the copy begins (since
    /// protocol 6). Absent from older clients' hellos (none).
    pub receive_preview: Option<ReceivePreview>,
    /// The server may stay once its job is done, for the client's next copies to reach
    /// over QUIC alone with the same two certificates (since protocol 7, see
    /// [`KEEP_SINCE_VERSION`]). Absent from older clients' hellos (false).
    pub keep: bool,
    /// The most descriptors the client may hold open ([`ServerHello::Ready`]'s field of
    /// the same name). Absent from older clients' hellos (none).
    pub open_files: Option<u64>,
}

/// The first protocol whose server stays when the client's hello asks it to
/// ([`ClientHello::keep`]): it then takes more connections from the client's
/// certificate on its QUIC endpoint, a job each, until it has been idle a while, and
/// ends each job that went well with its [`ServerNote::Summary`] on a bidirectional
/// stream it opens on that connection.
pub const KEEP_SINCE_VERSION: u16 = 7;

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
    /// answers with [`ServerNote::Holds`] right after reading the hello.
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

/// The server's answer. The server answers before it has read the client's hello (that
/// saves a round trip), so each side picks the version from the other's range itself
/// ([`negotiate`]): both get the same answer.
///
/// Hellos only ever grow at the end, and are read with [`decode_server_hello`], which
/// ignores bytes past the fields it knows (a newer peer's hello still tells an older
/// one which versions it speaks) and takes a later field an older server's hello ends
/// before as absent. (Protocol 2's hello is this one without `min_version`.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerHello {
    /// The server is ready.
    Ready {
        /// The newest protocol version the server speaks.
        version: u16,
        /// The UDP port the server listens on (0 if no QUIC endpoint).
        udp_port: u16,
        /// The server's own address as ssh saw it (from SSH_CONNECTION), if known.
        server_addr: Option<std::net::IpAddr>,
        /// SHA-256 of the server's ephemeral certificate.
        fingerprint: [u8; 32],
        /// The server's soku version, for messages.
        soku_version: String,
        /// Warnings for the user (e.g. the kernel capped the UDP receive buffer).
        warnings: Vec<String>,
        /// The oldest protocol version the server speaks (since protocol 3).
        min_version: u16,
        /// The TCP port the server listens on for TLS over TCP (0 if none; since 5).
        tcp_port: u16,
        /// The most descriptors the server may hold open (its soft limit, once raised
        /// as far as the hard limit allows), when it receives: the sender keeps the
        /// files it announces ahead within it, each a temporary file held open on the
        /// receiving side until it is complete. Absent from an older server's hello
        /// (none: the sender bounds them by its own limit alone).
        open_files: Option<u64>,
    },
}

/// The server's hello before `open_files` (protocols 5 to 7): what
/// [`decode_server_hello`] reads first, then each later field if the hello goes on.
#[derive(Debug, Deserialize)]
enum ServerHelloV7 {
    Ready {
        version: u16,
        udp_port: u16,
        server_addr: Option<std::net::IpAddr>,
        fingerprint: [u8; 32],
        soku_version: String,
        warnings: Vec<String>,
        min_version: u16,
        tcp_port: u16,
    },
}

/// The fields every server hello since protocol 2 starts with: an older server's hello
/// (protocol 2 lacks `min_version`, 3 and 4 lack `tcp_port`) is recognised by them, only
/// to say which side to upgrade.
#[derive(Debug, Deserialize)]
enum ServerHelloV2 {
    Ready {
        version: u16,
        _udp_port: u16,
        _server_addr: Option<std::net::IpAddr>,
        _fingerprint: [u8; 32],
        _soku_version: String,
        _warnings: Vec<String>,
    },
}

/// The client's choice of data transport, sent after it tried QUIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TransportChoice {
    /// The QUIC connection is up; the ssh channel stays open only to keep the server alive.
    Quic {
        /// The client's TLS-over-TCP connections are up too (since protocol 5): if the
        /// data sender finds UDP rate-limited, it closes QUIC with the policed code and
        /// the client moves the copy to TCP.
        tcp_ready: bool,
    },
    /// QUIC did not get through: data and control move over the ssh channel.
    SshChannel,
    /// TLS over TCP (since protocol 5): the client opened one control connection and
    /// `lanes` chunk connections to the server's `tcp_port`, each starting with a
    /// [`TcpPreface`].
    Tcp {
        /// Chunk connections besides the control connection.
        lanes: u8,
    },
}

/// What the server may still say on the ssh channel once the data moves over QUIC
/// (since protocol 5): frames like the hellos'. The ssh channel is reliable where a
/// rate-limited UDP path may drop even QUIC's own close.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerNote {
    /// The server, sending the data, found UDP rate-limited and closed QUIC: the client
    /// moves the copy to TLS over TCP.
    Policed {
        /// What the server saw.
        why: String,
    },
    /// The server's own figures once its job is done, over QUIC or TCP (never over the
    /// ssh channel, which then carries the data): for the client's `--report`. A new
    /// variant at the end: a client from before it fails to decode the note and skips
    /// it (`watch_ssh` in `crates/soku/src/client/session.rs` acts only on notes it knows), so
    /// no version gate is needed.
    Summary(ServerSummary),
    /// The server read the client's [`TransportChoice`] (sent only when the client's
    /// hello asked, with `diagnose`): the client times the round trip over ssh. An older
    /// client would ignore it, as it ignores any note it cannot decode.
    ChoiceSeen,
    /// The answer to the client's [`ClientNote::Ping`] with the same number, written as
    /// soon as the ping is read: the client times round trips over ssh (a TCP path)
    /// beside QUIC's (see `crates/soku/src/carrier/shaping.rs`). An older client ignores it.
    Pong {
        /// The ping's number.
        seq: u32,
    },
    /// The answer to an upload's [`ReceivePreview`] (since protocol 6), written right
    /// after the server read the client's hello, before anything else there: whether
    /// the server holds nothing under the previewed names. With `nothing`, the copy
    /// runs without [`crate::message::Held`] reports.
    Holds {
        /// No file and no partial file exists under any of the names.
        nothing: bool,
    },
}

/// What the client may say on the ssh channel once the data moves over QUIC, after its
/// [`TransportChoice`]: frames like the hellos'. A server from before these notes reads
/// and drops everything there (it only waits for the channel's end), so a client needs
/// no version gate: it simply gets no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientNote {
    /// Asks for a [`ServerNote::Pong`] with the same number at once.
    Ping {
        /// Chosen by the client to match the answer.
        seq: u32,
    },
}

/// The first frame on the stream a client opens for its job on a kept server (since
/// protocol 7, see [`KEEP_SINCE_VERSION`]), before the job's request: what the client's
/// hello carried over ssh for the first job, where it still applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptOpening {
    /// A download's [`ReceivePreview::NothingHeld`]. An upload's preview is not sent:
    /// its answer would come a round trip after the handshake, as late as the held
    /// report it spares.
    pub receive_preview: Option<ReceivePreview>,
    /// [`ClientHello::open_files`] of this client, which may not be the process whose
    /// hello the server read over ssh. Absent from an older client's opening (none);
    /// read with [`decode_kept_opening`].
    pub open_files: Option<u64>,
}

/// Largest frame payload of a [`ClientNote`] a server reads (a ping takes a few bytes).
pub const MAX_CLIENT_NOTE: usize = 64;

/// Most path samples a [`ServerSummary`] carries (about 10 kB on the wire): a longer
/// copy's samples are thinned to every second, fourth, ... one.
pub const MAX_SUMMARY_SAMPLES: usize = 240;

/// What the server measured of itself during a job. Fields only ever grow at the end:
/// the note is the last thing in its frame, so an older client ignores what a newer
/// server appends ([`decode_hello`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerSummary {
    /// CPU time (user and system) of the server process, microseconds.
    pub cpu_us: u64,
    /// Wall time from the server's start to the end of its job, microseconds.
    pub wall_us: u64,
    /// Whether the server sent the data (a download): its samples then describe the
    /// data's direction.
    pub sent_data: bool,
    /// The server's view of the QUIC path, every half second from the connection's
    /// start (empty over TCP), at most [`MAX_SUMMARY_SAMPLES`].
    pub samples: Vec<PathPoint>,
}

/// One sample of a QUIC path, as one side saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathPoint {
    /// Milliseconds since the connection was established.
    pub at_ms: u64,
    /// Smoothed RTT, microseconds.
    pub rtt_us: u64,
    /// Smallest RTT seen, microseconds.
    pub min_rtt_us: u64,
    /// Packets this side sent so far.
    pub sent_packets: u64,
    /// Of those, declared lost.
    pub lost_packets: u64,
    /// The congestion window, bytes.
    pub cwnd: u64,
    /// The controller's bottleneck estimate, bits per second (0: none yet).
    pub bandwidth_bps: u64,
    /// The controller's phase (`startup`, `probe_bw`, ...; empty: unknown).
    pub phase: String,
}

/// The first two bytes a client sends on each TLS-over-TCP connection: which one it is
/// (0: control, 1..=lanes: chunks) and how many chunk connections the session has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPreface {
    /// 0 for the control connection, `1..=lanes` for chunk connections.
    pub index: u8,
    /// Chunk connections of the session.
    pub lanes: u8,
}

impl TcpPreface {
    /// Its two bytes.
    pub fn to_bytes(self) -> [u8; 2] {
        [self.index, self.lanes]
    }

    /// Reads one from its two bytes; an index beyond the lanes, or no lanes at all, is
    /// malformed.
    pub fn from_bytes(bytes: [u8; 2]) -> Result<TcpPreface, ProtoError> {
        let [index, lanes] = bytes;
        if lanes == 0 || index > lanes {
            return Err(ProtoError::Malformed(format!(
                "tcp connection preface {index}/{lanes}: expected an index of 0..={lanes} \
                 and at least one lane"
            )));
        }
        Ok(TcpPreface { index, lanes })
    }
}

/// The newest version in both `local` and `remote`, or why there is none; `remote`
/// names the peer in the error ("the remote host", "the client").
pub fn negotiate(
    local: RangeInclusive<u16>,
    remote_range: RangeInclusive<u16>,
    remote: &'static str,
) -> Result<u16, ProtoError> {
    let lo = (*local.start()).max(*remote_range.start());
    let hi = (*local.end()).min(*remote_range.end());
    if lo <= hi {
        Ok(hi)
    } else {
        Err(ProtoError::VersionMismatch {
            remote,
            remote_min: *remote_range.start(),
            remote_max: *remote_range.end(),
            local_min: *local.start(),
            local_max: *local.end(),
        })
    }
}

/// Decodes a hello payload, ignoring bytes after the fields this build knows (a newer
/// peer's additions).
pub fn decode_hello<T: serde::de::DeserializeOwned>(payload: &[u8]) -> Result<T, ProtoError> {
    postcard::take_from_bytes(payload)
        .map(|(hello, _)| hello)
        .map_err(|e| ProtoError::Malformed(e.to_string()))
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

/// Decodes a [`KeptOpening`]: an older client's ends after its preview.
pub fn decode_kept_opening(payload: &[u8]) -> Result<KeptOpening, ProtoError> {
    let (receive_preview, rest) = postcard::take_from_bytes::<Option<ReceivePreview>>(payload)
        .map_err(|e| ProtoError::Malformed(e.to_string()))?;
    let (open_files, _) = optional_field::<Option<u64>>(rest)?;
    Ok(KeptOpening { receive_preview, open_files: open_files.flatten() })
}

/// The next field of a hello, `None` if the hello ended before it.
fn optional_field<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> Result<(Option<T>, &[u8]), ProtoError> {
    if bytes.is_empty() {
        return Ok((None, bytes));
    }
    let (value, rest) =
        postcard::take_from_bytes(bytes).map_err(|e| ProtoError::Malformed(e.to_string()))?;
    Ok((Some(value), rest))
}

/// Decodes the server's hello: the fields every server since protocol 5 sends, then
/// each later field if the hello goes on that far, ignoring what a newer server added
/// after them. A protocol 2 server, whose hello lacks its oldest version, is a version
/// mismatch that names both versions.
pub fn decode_server_hello(payload: &[u8]) -> Result<ServerHello, ProtoError> {
    let err = match postcard::take_from_bytes::<ServerHelloV7>(payload) {
        Ok((old, rest)) => {
            let ServerHelloV7::Ready {
                version,
                udp_port,
                server_addr,
                fingerprint,
                soku_version,
                warnings,
                min_version,
                tcp_port,
            } = old;
            let (open_files, _) = optional_field::<Option<u64>>(rest)?;
            return Ok(ServerHello::Ready {
                version,
                udp_port,
                server_addr,
                fingerprint,
                soku_version,
                warnings,
                min_version,
                tcp_port,
                open_files: open_files.flatten(),
            });
        }
        Err(e) => ProtoError::Malformed(e.to_string()),
    };
    match decode_hello::<ServerHelloV2>(payload) {
        Ok(ServerHelloV2::Ready { version, .. }) => {
            negotiate(PROTOCOL_VERSIONS, version..=version, "the remote host").and(Err(err))
        }
        Err(_) => Err(err),
    }
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

impl ServerHello {
    /// The versions the server speaks.
    pub fn versions(&self) -> RangeInclusive<u16> {
        let ServerHello::Ready { min_version, version, .. } = self;
        *min_version..=*version
    }

    /// The client's choice: the newest version both this build and the server speak.
    pub fn negotiate(&self) -> Result<u16, ProtoError> {
        negotiate(PROTOCOL_VERSIONS, self.versions(), "the remote host")
    }
}

/// Finds [`MAGIC`] in a byte stream, keeping what came before it (login noise) aside.
#[derive(Debug, Default)]
pub struct HelloScanner {
    seen: Vec<u8>,
}

/// What the scanner found.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan {
    /// No magic yet; feed more bytes.
    NeedMore,
    /// Found: the noise before the magic, and the bytes after it (start of the frames).
    Found {
        /// Bytes before the magic (shown to the user in verbose mode).
        noise: Vec<u8>,
        /// Bytes after the magic.
        rest: Vec<u8>,
    },
}

impl HelloScanner {
    /// Adds bytes from the server's stdout and looks for the magic.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Scan, ProtoError> {
        // What was seen before holds no magic, so one can only end in the new bytes:
        // scanning from there keeps a stream fed in small pieces linear, not quadratic.
        let from = self.seen.len().saturating_sub(MAGIC.len() - 1);
        self.seen.extend_from_slice(bytes);
        let found = self.seen[from..].windows(MAGIC.len()).position(|w| w == MAGIC);
        if let Some(at) = found.map(|at| from + at) {
            let rest = self.seen.split_off(at + MAGIC.len());
            self.seen.truncate(at);
            return Ok(Scan::Found { noise: std::mem::take(&mut self.seen), rest });
        }
        if self.seen.len() > MAX_NOISE {
            return Err(ProtoError::NoHello(MAX_NOISE));
        }
        Ok(Scan::NeedMore)
    }

    /// Everything seen so far (for error messages when the stream ends without a hello).
    pub fn seen(&self) -> &[u8] {
        &self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_hellos_with_and_without_a_path_memory_decode() {
        let mut hello = ClientHello::new([3; 32], true);
        hello.path_memory = Some(PathMemory { bandwidth_bps: 95_000_000, min_rtt_us: 200_000 });
        let new = postcard::to_allocvec(&hello).expect("encodes");
        assert_eq!(decode_client_hello(&new).expect("decodes"), hello);
        // A protocol-5 client's hello: the same fields without the memory.
        let old =
            postcard::to_allocvec(&(1u16, hello.max_version, [3u8; 32], true)).expect("encodes");
        let decoded = decode_client_hello(&old).expect("decodes");
        assert_eq!(decoded, ClientHello { path_memory: None, min_version: 1, ..hello.clone() });
        // A client from before `background`: the memory, then the end.
        let mid =
            postcard::to_allocvec(&(1u16, hello.max_version, [3u8; 32], true, hello.path_memory))
                .expect("encodes");
        assert_eq!(
            decode_client_hello(&mid).expect("decodes"),
            ClientHello { min_version: 1, ..hello.clone() }
        );
        let mut background = hello.clone();
        background.background = true;
        let bytes = postcard::to_allocvec(&background).expect("encodes");
        assert_eq!(decode_client_hello(&bytes).expect("decodes"), background);
        // A client from before `diagnose`: background, then the end.
        let pre_diagnose = postcard::to_allocvec(&(
            1u16,
            hello.max_version,
            [3u8; 32],
            true,
            hello.path_memory,
            true,
        ))
        .expect("encodes");
        assert_eq!(decode_client_hello(&pre_diagnose).expect("decodes"), {
            let mut want = background.clone();
            want.min_version = 1;
            want
        });
        let mut diagnose = hello.clone();
        diagnose.diagnose = true;
        let bytes = postcard::to_allocvec(&diagnose).expect("encodes");
        assert_eq!(decode_client_hello(&bytes).expect("decodes"), diagnose);
        // A newer client's additions after the memory are ignored.
        let mut newer = new.clone();
        newer.extend_from_slice(&[1, 2, 3]);
        assert_eq!(decode_client_hello(&newer).expect("decodes"), hello);
        assert!(decode_client_hello(&old[..10]).is_err());
        // Since protocol 6, the receive preview; a client from before ends after
        // `diagnose`.
        for preview in [
            ReceivePreview::upload("dst/", 2, vec!["a".into(), "b c".into()]),
            Some(ReceivePreview::NothingHeld),
        ] {
            let mut previewing = hello.clone();
            previewing.receive_preview = preview;
            let bytes = postcard::to_allocvec(&previewing).expect("encodes");
            assert_eq!(decode_client_hello(&bytes).expect("decodes"), previewing);
        }
        let pre_preview = postcard::to_allocvec(&(
            1u16,
            hello.max_version,
            [3u8; 32],
            true,
            hello.path_memory,
            false,
            true,
        ))
        .expect("encodes");
        let decoded = decode_client_hello(&pre_preview).expect("decodes");
        assert_eq!(decoded.receive_preview, None);
        assert!(decoded.diagnose);
        // Since protocol 7, `keep`; a client from before ends after the preview.
        let mut keeping = hello.clone();
        keeping.keep = true;
        let bytes = postcard::to_allocvec(&keeping).expect("encodes");
        assert_eq!(decode_client_hello(&bytes).expect("decodes"), keeping);
        let mut pre_keep = bytes.clone();
        assert_eq!(pre_keep.pop(), Some(0), "no open-file limit is the last byte");
        assert_eq!(pre_keep.pop(), Some(1), "keep is the one before");
        assert!(!decode_client_hello(&pre_keep).expect("decodes").keep);
    }

    /// Catches: a receiver's open-file limit lost on the way, or a peer from before it
    /// (whose hello or opening ends sooner) refused instead of taken as not telling.
    #[test]
    fn the_open_file_limit_round_trips_and_older_hellos_lack_it() {
        let mut hello = ClientHello::new([3; 32], true);
        hello.keep = true;
        hello.open_files = Some(256);
        let bytes = postcard::to_allocvec(&hello).expect("encodes");
        assert_eq!(decode_client_hello(&bytes).expect("decodes"), hello);
        let mut newer = bytes.clone();
        newer.extend_from_slice(&[9, 9]);
        assert_eq!(decode_client_hello(&newer).expect("a newer client's"), hello);
        // A client from before the limit: its hello ends after `keep`.
        let old = postcard::to_allocvec(&ClientHello { open_files: None, ..hello.clone() })
            .expect("encodes");
        let old = &old[..old.len() - 1];
        assert_eq!(old.last(), Some(&1), "keep is the last byte");
        let decoded = decode_client_hello(old).expect("decodes");
        assert_eq!(decoded, ClientHello { open_files: None, ..hello.clone() });

        let mut server = server_hello(5..=7);
        let ServerHello::Ready { open_files, .. } = &mut server;
        *open_files = Some(u64::MAX);
        let bytes = postcard::to_allocvec(&server).expect("encodes");
        assert_eq!(decode_server_hello(&bytes), Ok(server.clone()));
        let mut newer = bytes.clone();
        newer.extend_from_slice(&[1, 2, 3]);
        assert_eq!(decode_server_hello(&newer), Ok(server.clone()));
        // A server from before the limit: its hello ends after `tcp_port`.
        let old = postcard::to_allocvec(&server_hello(5..=7)).expect("encodes");
        let old = &old[..old.len() - 1];
        assert_eq!(old.last(), Some(&2), "tcp_port is the last byte");
        assert_eq!(decode_server_hello(old), Ok(server_hello(5..=7)));
        assert!(decode_server_hello(&old[..old.len() - 1]).is_err(), "cut inside the fields");

        let opening = KeptOpening {
            receive_preview: Some(ReceivePreview::NothingHeld),
            open_files: Some(1024),
        };
        let bytes = postcard::to_allocvec(&opening).expect("encodes");
        assert_eq!(decode_kept_opening(&bytes), Ok(opening.clone()));
        // A client from before the limit: its opening is the preview alone.
        for preview in [None, Some(ReceivePreview::NothingHeld)] {
            let old = postcard::to_allocvec(&preview).expect("encodes");
            let want = KeptOpening { receive_preview: preview, open_files: None };
            assert_eq!(decode_kept_opening(&old), Ok(want));
        }
        assert!(decode_kept_opening(&[]).is_err());
    }

    /// Catches: a preview that makes the hello larger than a server from before
    /// protocol 6 reads (4096 bytes): such a preview is not made.
    #[test]
    fn an_upload_preview_keeps_the_hello_small_enough_for_older_servers() {
        let names = |n: usize| (0..n).map(|i| format!("{i:0>250}")).collect::<Vec<_>>();
        let mut hello = ClientHello::new([3; 32], true);
        hello.path_memory = Some(PathMemory { bandwidth_bps: u64::MAX, min_rtt_us: u64::MAX });
        hello.open_files = Some(u64::MAX);
        hello.receive_preview = ReceivePreview::upload(&"t".repeat(1000), 2, names(8));
        assert!(hello.receive_preview.is_some(), "1000 + 8 x 252 bytes fit");
        assert!(postcard::to_allocvec(&hello).expect("encodes").len() <= 4096);
        assert_eq!(ReceivePreview::upload(&"t".repeat(1000), 9, names(9)), None);
        assert_eq!(ReceivePreview::upload("t", 100, names(100)), None);
    }

    /// Catches: a summary note that an older client could not skip, or that a newer
    /// server's additions would break.
    #[test]
    fn a_summary_note_round_trips_and_older_readers_skip_it() {
        let note = ServerNote::Summary(ServerSummary {
            cpu_us: 1_500_000,
            wall_us: 9_000_000,
            sent_data: true,
            samples: vec![PathPoint {
                at_ms: 500,
                rtt_us: 50_100,
                min_rtt_us: 50_000,
                sent_packets: 9000,
                lost_packets: 45,
                cwnd: 1 << 20,
                bandwidth_bps: 95_000_000,
                phase: "probe_bw".into(),
            }],
        });
        let mut bytes = postcard::to_allocvec(&note).expect("encodes");
        assert_eq!(decode_hello::<ServerNote>(&bytes).expect("decodes"), note);
        bytes.extend_from_slice(&[7, 7, 7]);
        assert_eq!(decode_hello::<ServerNote>(&bytes).expect("a newer server's"), note);
        /// The note as a client from before the summary knew it.
        #[derive(Debug, Deserialize)]
        enum OldNote {
            Policed { _why: String },
        }
        assert!(decode_hello::<OldNote>(&bytes).is_err());
        let policed = postcard::to_allocvec(&ServerNote::Policed { why: "x".into() }).expect("ok");
        assert!(decode_hello::<OldNote>(&policed).is_ok());
    }

    #[test]
    fn login_noise_before_the_hello_is_skipped() {
        let mut wire = b"Welcome to host!\nlast login: yesterday\n".to_vec();
        wire.extend_from_slice(MAGIC);
        wire.extend_from_slice(b"frames");
        let mut scanner = HelloScanner::default();
        let mut result = Scan::NeedMore;
        for piece in wire.chunks(5) {
            result = scanner.feed(piece).expect("within limit");
            if result != Scan::NeedMore {
                break;
            }
        }
        let Scan::Found { noise, mut rest } = result else { panic!("magic not found") };
        assert_eq!(noise, b"Welcome to host!\nlast login: yesterday\n");
        // Bytes after the magic in the same piece are kept.
        rest.extend_from_slice(&wire[wire.len() - (b"frames".len() - rest.len())..]);
        assert_eq!(rest, b"frames");
    }

    #[test]
    fn endless_noise_is_an_error() {
        let mut scanner = HelloScanner::default();
        let block = vec![b'x'; 64 * 1024];
        let mut last = Ok(Scan::NeedMore);
        for _ in 0..20 {
            last = scanner.feed(&block);
            if last.is_err() {
                break;
            }
        }
        assert_eq!(last, Err(ProtoError::NoHello(MAX_NOISE)));
    }

    fn server_hello(versions: RangeInclusive<u16>) -> ServerHello {
        ServerHello::Ready {
            version: *versions.end(),
            udp_port: 1,
            server_addr: None,
            fingerprint: [7; 32],
            soku_version: "x".into(),
            warnings: vec!["w".into()],
            min_version: *versions.start(),
            tcp_port: 2,
            open_files: None,
        }
    }

    /// An older build (speaking 3) and a newer one (speaking 3-4) agree on 3, whichever
    /// of them is the client: each side's choice from the other's hello is the same.
    #[test]
    fn an_older_and_a_newer_build_agree_on_the_newest_common_version() {
        for (client, server) in [(3..=3, 3..=4), (3..=4, 3..=3), (2..=5, 4..=7)] {
            let hello = ClientHello::speaking(client.clone(), [0; 32], true);
            let server_side = negotiate(server.clone(), hello.versions(), "the client");
            let client_side =
                negotiate(client.clone(), server_hello(server).versions(), "the remote host");
            assert_eq!(server_side, client_side);
        }
        assert_eq!(negotiate(3..=3, 3..=4, "the client"), Ok(3));
        assert_eq!(negotiate(2..=5, 4..=7, "the client"), Ok(5));
    }

    #[test]
    fn no_common_version_names_both_and_the_side_to_upgrade() {
        let old_remote = negotiate(5..=6, 3..=4, "the remote host").unwrap_err().to_string();
        assert_eq!(
            old_remote,
            "soku on the remote host speaks protocol version 3-4, this soku speaks 5-6: \
             upgrade soku on the remote host (or install the same soku version on both)"
        );
        let old_here = negotiate(3..=3, 4..=4, "the client").unwrap_err().to_string();
        assert!(
            old_here.contains(
                "speaks protocol version 4, this soku speaks 3: upgrade soku on this host"
            ),
            "{old_here}"
        );
    }

    #[test]
    fn a_newer_hello_with_fields_appended_still_decodes() {
        let hello = server_hello(3..=9);
        let mut payload = postcard::to_stdvec(&hello).unwrap();
        payload.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(decode_server_hello(&payload), Ok(hello));
        let client = ClientHello::speaking(3..=9, [1; 32], false);
        let mut payload = postcard::to_stdvec(&client).unwrap();
        payload.push(42);
        assert_eq!(decode_hello::<ClientHello>(&payload), Ok(client));
    }

    /// Protocol 4's hello (no TCP port) is refused with both versions named.
    #[test]
    fn a_protocol_4_server_is_told_to_upgrade() {
        #[derive(Serialize)]
        enum V4 {
            Ready {
                version: u16,
                udp_port: u16,
                server_addr: Option<std::net::IpAddr>,
                fingerprint: [u8; 32],
                soku_version: String,
                warnings: Vec<String>,
                min_version: u16,
            },
        }
        let old = V4::Ready {
            version: 4,
            udp_port: 9,
            server_addr: None,
            fingerprint: [0; 32],
            soku_version: "0.1.0".into(),
            warnings: vec![],
            min_version: 4,
        };
        let payload = postcard::to_stdvec(&old).unwrap();
        let message = decode_server_hello(&payload).unwrap_err().to_string();
        assert!(
            message.contains("remote host speaks protocol version 4")
                && message.contains("upgrade soku on the remote host"),
            "{message}"
        );
    }

    #[test]
    fn a_tcp_preface_round_trips_and_nonsense_is_refused() {
        for (index, lanes) in [(0, 1), (0, 4), (4, 4), (1, 255)] {
            let preface = TcpPreface { index, lanes };
            assert_eq!(TcpPreface::from_bytes(preface.to_bytes()), Ok(preface));
        }
        for bad in [[0, 0], [5, 4], [255, 1]] {
            assert!(TcpPreface::from_bytes(bad).is_err(), "{bad:?}");
        }
    }

    /// Protocol 2's hello (no oldest version) is refused with both versions named.
    #[test]
    fn a_protocol_2_server_is_told_to_upgrade() {
        #[derive(Serialize)]
        enum V2 {
            Ready {
                version: u16,
                udp_port: u16,
                server_addr: Option<std::net::IpAddr>,
                fingerprint: [u8; 32],
                soku_version: String,
                warnings: Vec<String>,
            },
        }
        let old = V2::Ready {
            version: 2,
            udp_port: 9,
            server_addr: None,
            fingerprint: [0; 32],
            soku_version: "0.1.0".into(),
            warnings: vec![],
        };
        let payload = postcard::to_stdvec(&old).unwrap();
        let message = decode_server_hello(&payload).unwrap_err().to_string();
        assert!(
            message.starts_with(&format!(
                "soku on the remote host speaks protocol version 2, this soku speaks {}",
                PROTOCOL_VERSIONS.start()
            )),
            "{message}"
        );
        assert!(message.contains("upgrade soku on the remote host"), "{message}");
    }
}
