//! What `soku diagnose` measured, in one plain structure: the input of the verdict
//! (`verdict.rs`) and, with it, the `--json` output.

use serde::Serialize;
use soku_proto::diagnose::{HostFacts, Received, Sent};

/// Everything measured on one path.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PathFacts {
    /// The remote host as named (`[user@]host`).
    pub host: String,
    /// What carried the session's data ("QUIC to ...", "TLS/TCP to ...", "the ssh channel").
    pub transport: String,
    /// Round trip over the ssh channel, milliseconds.
    pub ssh_rtt_ms: Option<f64>,
    /// Smallest round trip QUIC measured, milliseconds.
    pub quic_rtt_ms: Option<f64>,
    /// The UDP payload size QUIC's path MTU discovery settled on, bytes.
    pub mtu: Option<u16>,
    /// Whether QUIC's handshake got through (UDP passes).
    pub udp: bool,
    /// Whether TLS over TCP got through (`None`: not tried).
    pub tcp: Option<bool>,
    /// This host to the remote (an upload's direction).
    pub upload: Option<Direction>,
    /// The remote to this host (a download's direction).
    pub download: Option<Direction>,
    /// This host.
    pub local: Side,
    /// The remote host, if its soku answered.
    pub remote: Option<Side>,
    /// Whether quinn reports reordering (it does not: kept so the output says so).
    pub reordering: Option<f64>,
}

/// One direction's probe: the receiver's rate and the sender's view of loss and RTT.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Direction {
    /// The steady delivered rate, bits per second.
    pub rate_bps: u64,
    /// Packets lost / packets sent, as the sender counted them.
    pub loss: f64,
    /// Whether the losses came with a queue.
    pub loss_pattern: LossPattern,
    /// The sender's view.
    pub sent: Sent,
    /// The receiver's view.
    pub received: Received,
}

/// One host's facts, as it measured them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Side {
    /// "this host" or the remote's name, for the verdict's sentences.
    pub name: String,
    /// The facts.
    pub facts: HostFacts,
}

/// What the RTT did when packets were lost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LossPattern {
    /// Too few losses to tell (or none), or the signs disagree.
    #[default]
    Unclear,
    /// The losses came while the RTT stood near its base: no queue was full, so
    /// something else drops packets (a noisy link, a policer without a queue).
    Random,
    /// The RTT rose toward the losses: the bottleneck's queue filled and overflowed.
    Queue,
}

/// Fewest lost packets to call a pattern.
const MIN_LOSSES: u64 = 5;
/// RTT above the base that counts as a queue: a quarter of the base, at least 5 ms
/// (smoothed RTT moves by a few ms from ack timing alone).
fn queue_threshold_us(base_us: u64) -> u64 {
    (base_us / 4).max(5_000)
}

impl LossPattern {
    /// From the sender's RTTs. Random: at the losses the RTT stood within the queue
    /// threshold of its base. Queue: at the losses it stood above the threshold and
    /// clearly above its mean over the probe (1.3 times as far from the base): the
    /// losses come where the queue is longest, the drop-tail signature (Jacobson,
    /// "Congestion Avoidance and Control", SIGCOMM 1988). Anything else is unclear.
    pub fn of(sent: &Sent) -> LossPattern {
        if sent.lost < MIN_LOSSES || sent.loss_rtt_us == 0 {
            return LossPattern::Unclear;
        }
        let base = match (sent.idle_rtt_us, sent.min_rtt_us) {
            (0, min) => min,
            (idle, min) => idle.min(min.max(1)),
        };
        let at_loss = sent.loss_rtt_us.saturating_sub(base);
        let mean = sent.mean_rtt_us.saturating_sub(base);
        let threshold = queue_threshold_us(base);
        if at_loss < threshold {
            LossPattern::Random
        } else if at_loss * 10 > mean * 13 {
            LossPattern::Queue
        } else {
            LossPattern::Unclear
        }
    }
}

impl Direction {
    /// One probe's two halves put together.
    pub fn new(sent: Sent, received: Received) -> Direction {
        let loss = if sent.packets == 0 { 0.0 } else { sent.lost as f64 / sent.packets as f64 };
        Direction {
            rate_bps: received.steady_bps,
            loss,
            loss_pattern: LossPattern::of(&sent),
            sent,
            received,
        }
    }
}
