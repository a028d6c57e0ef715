//! What each side says on the ssh channel once the hellos are exchanged: the client's
//! transport choice and pings, the server's notes.

use serde::{Deserialize, Serialize};

use super::summary::ServerSummary;

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
    /// [`TcpPreface`](super::TcpPreface).
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
    /// The answer to an upload's [`ReceivePreview`](super::ReceivePreview) (since protocol 6), written right
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

/// Largest frame payload of a [`ClientNote`] a server reads (a ping takes a few bytes).
pub const MAX_CLIENT_NOTE: usize = 64;
