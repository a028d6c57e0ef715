//! The carriers beside QUIC and the watches that tell when to leave UDP.
//!
//! - [`tcp_path`]: TLS over TCP for one session (control and chunk connections).
//! - [`policing`]: a UDP rate limit told from a slow path, from QUIC's statistics;
//!   [`shaping`]: a UDP shaper, from round trips over ssh timed beside QUIC's.
//! - [`udp_block`]: UDP blocked under a running copy told from an outage;
//!   [`tcp_probe`]: the same round trips as TCP handshakes, for a copy with no ssh.

pub mod policing;
pub mod shaping;
pub mod tcp_path;
pub mod tcp_probe;
pub mod udp_block;
