//! The tunnel stream's format and limits, the same on both sides.

/// The first bytes of every tunnel stream, client to server. QUIC announces a stream to
/// the peer only once something is sent on it; this makes it visible at once, even for
/// protocols whose server speaks first (ssh), and names the stream format's version.
pub const STREAM_HEADER: &[u8; 4] = b"skT1";

/// Concurrent tunnelled connections per tunnel, on each side. The QUIC transport's
/// bidirectional stream credit may admit fewer at once; further connections then wait
/// for a stream rather than fail.
pub const MAX_CONNECTIONS: usize = 256;
