//! What the server measured of itself during a job, sent to the client at its end for
//! `--report`.

use serde::{Deserialize, Serialize};

/// Most path samples a [`ServerSummary`] carries (about 10 kB on the wire): a longer
/// copy's samples are thinned to every second, fourth, ... one.
pub const MAX_SUMMARY_SAMPLES: usize = 240;

/// What the server measured of itself during a job. Fields only ever grow at the end:
/// the note is the last thing in its frame, so an older client ignores what a newer
/// server appends ([`decode_hello`](super::decode_hello)).
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
