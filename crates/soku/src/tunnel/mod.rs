//! `soku tunnel`: a relay pair that carries TCP connections over soku's QUIC transport,
//! so ssh, sftp or rsync traffic crosses a long lossy path on soku's congestion control.
//!
//! The client starts `soku serve` through ssh like a copy does and asks it for a
//! [`Job::Tunnel`](soku_proto::message::Job::Tunnel). Then, for each TCP connection
//! accepted on the local port, it opens one bidirectional QUIC stream, writes
//! [`STREAM_HEADER`], and relays bytes both ways; the server connects each stream to the
//! destination and relays the same way. One QUIC connection carries them all, encrypted
//! and pinned as every soku session is.
//!
//! # Layout
//! - [`client`]: `soku tunnel` itself: session, listener, one task per connection.
//! - [`server`]: the job inside `soku serve`: one destination connection per stream.
//! - [`pipe`]: relaying one connection both ways, half-close and abort carried across.
//! - [`codec`]: streaming zstd (`-C`), flushed per read, bounded per step.
//! - [`listen`]: the command line's addresses, checked before anything connects.

mod client;
mod codec;
mod listen;
mod pipe;
mod server;

pub use client::run;
pub use listen::parse_remote;
pub use server::serve;

/// The first bytes of every tunnel stream, client to server. QUIC announces a stream to
/// the peer only once something is sent on it; this makes it visible at once, even for
/// protocols whose server speaks first (ssh), and names the stream format's version.
pub const STREAM_HEADER: &[u8; 4] = b"skT1";

/// Concurrent tunnelled connections per tunnel, on each side. The QUIC transport's
/// bidirectional stream credit may admit fewer at once; further connections then wait
/// for a stream rather than fail.
pub const MAX_CONNECTIONS: usize = 256;

/// Application error codes on tunnel streams (QUIC `RESET_STREAM` / `STOP_SENDING`).
pub mod code {
    use quinn::VarInt;

    /// The relay failed on this side (I/O error, bad compressed data).
    pub const RELAY_FAILED: VarInt = VarInt::from_u32(1);
    /// The server could not connect to the destination.
    pub const CONNECT_FAILED: VarInt = VarInt::from_u32(2);
    /// The server already relays [`super::MAX_CONNECTIONS`] connections.
    pub const TOO_MANY: VarInt = VarInt::from_u32(3);
    /// The stream did not start with [`super::STREAM_HEADER`].
    pub const BAD_HEADER: VarInt = VarInt::from_u32(4);
}
