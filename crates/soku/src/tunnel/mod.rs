//! `soku tunnel`: a relay pair that carries TCP connections over soku's QUIC transport,
//! so ssh, sftp or rsync traffic crosses a long lossy path on soku's congestion control.
//!
//! The client starts `soku serve` through ssh like a copy does and asks it for a
//! [`Job::Tunnel`](soku_proto::message::Job::Tunnel). Then, for each TCP connection
//! accepted on the local port, it opens one bidirectional QUIC stream, writes
//! [`STREAM_HEADER`](stream::STREAM_HEADER), and relays bytes both ways; the server
//! connects each stream to the destination and relays the same way. One QUIC connection
//! carries them all, encrypted and pinned as every soku session is.
//!
//! # Layout
//! - [`client`]: `soku tunnel` itself: session, listener, one task per connection.
//! - [`server`]: the job inside `soku serve`: one destination connection per stream.
//! - [`pipe`]: relaying one connection both ways, half-close and abort carried across.
//! - [`codec`]: streaming zstd (`-C`), flushed per read, bounded per step.
//! - [`listen`]: the command line's addresses, checked before anything connects.
//! - [`stream`]: the stream header and the connection limit; [`code`]: the error codes
//!   a stream is reset or stopped with.

mod client;
pub mod code;
mod codec;
mod listen;
mod pipe;
#[cfg(unix)]
mod server;
mod stream;

pub use client::run;
pub use listen::parse_remote;
#[cfg(unix)]
pub use server::serve;
