//! Application error codes on tunnel streams (QUIC `RESET_STREAM` / `STOP_SENDING`).

use quinn::VarInt;

/// The relay failed on this side (I/O error, bad compressed data).
pub const RELAY_FAILED: VarInt = VarInt::from_u32(1);
/// The server could not connect to the destination.
pub const CONNECT_FAILED: VarInt = VarInt::from_u32(2);
/// The server already relays [`MAX_CONNECTIONS`](super::stream::MAX_CONNECTIONS) connections.
pub const TOO_MANY: VarInt = VarInt::from_u32(3);
/// The stream did not start with [`STREAM_HEADER`](super::stream::STREAM_HEADER).
pub const BAD_HEADER: VarInt = VarInt::from_u32(4);
