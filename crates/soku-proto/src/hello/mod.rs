//! Bootstrap over the ssh channel: versions, the server's UDP port, and both sides'
//! certificate fingerprints, so QUIC can pin exactly those two certificates.
//!
//! The client speaks first (its hello waits in ssh's buffer until `soku serve` starts).
//! The server's stdout may carry noise from login scripts before the hello: the client
//! skips everything before [`MAGIC`](crate::MAGIC) with a [`HelloScanner`].
//!
//! One file per message, their items re-exported here: `client.rs` and `server.rs` for
//! the hellos, `version.rs` for the version both pick and `decode.rs` for reading a
//! hello of another build; `notes.rs` for what is said on the ssh channel afterwards;
//! `summary.rs` for the server's figures of a job; `kept.rs` for the kept server;
//! `tcp_preface.rs` for each TLS-over-TCP connection; `scanner.rs` for skipping login
//! noise.

mod client;
mod decode;
mod kept;
mod notes;
mod scanner;
mod server;
mod summary;
mod tcp_preface;
mod version;

pub use client::{decode_client_hello, ClientHello, PathMemory, ReceivePreview, MAX_PREVIEW_BYTES};
pub use decode::decode_hello;
pub use kept::{decode_kept_opening, KeptOpening, KEEP_SINCE_VERSION};
pub use notes::{ClientNote, ServerNote, TransportChoice, MAX_CLIENT_NOTE};
pub use scanner::{HelloScanner, Scan, MAX_NOISE};
pub use server::{decode_server_hello, ServerHello};
pub use summary::{PathPoint, ServerSummary, MAX_SUMMARY_SAMPLES};
pub use tcp_preface::TcpPreface;
pub use version::negotiate;

#[cfg(test)]
mod tests;
