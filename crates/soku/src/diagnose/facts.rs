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
    /// The loss while the RTT stayed low (see `Direction::low_rtt_loss`).
    pub random_loss: f64,
    /// Share of the probe's tags that arrived after a later one (`probe.rs`); `None`
    /// when too few arrived to tell (an older peer sends none).
    pub reordering: Option<f64>,
    /// Share of the probe's tags that never arrived: the loss, counted apart from
    /// QUIC's loss detection, which declares a packet overtaken by three others lost.
    pub tag_loss: Option<f64>,
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

/// Fewest tags received to give a reordering share: 2.5 s of probe sends ~2 500.
const MIN_TAGS: u64 = 100;

/// Fewest lost packets to call a pattern.
const MIN_LOSSES: u64 = 5;
/// An RTT range narrower than this (above the base) is no queue at all: a quarter of
/// the base, at least 5 ms (smoothed RTT moves by a few ms from ack timing alone).
fn queue_threshold_us(base_us: u64) -> u64 {
    (base_us / 4).max(5_000)
}
/// Loss rate in the lower half of the RTT range from which loss is random: drop-tail
/// loss leaves that half nearly clean (none in 2 484 and 9 095 packets, 2 in 16 477 on
/// the emulator's queues), random loss hits it at its own rate.
const RANDOM_FLOOR: f64 = 0.001;
/// How many times the loss rate at the upper half of the RTT range must exceed the
/// lower half's for the losses to follow the queue.
const QUEUE_RATIO: f64 = 3.0;

impl LossPattern {
    /// From the sender's packets and losses in the lower and upper half of the RTT's
    /// range (see `probe.rs`). Drop-tail loss comes when the queue is longest
    /// (Jacobson, "Congestion Avoidance and Control", SIGCOMM 1988): the upper half
    /// loses at [`QUEUE_RATIO`] times the lower half's rate or more, and the lower half
    /// stays nearly clean. Random loss also hits the lower half, or comes with no queue
    /// at all; a controller's start-up may add queue losses on top, so random loss is
    /// recognised by the lower half alone.
    pub fn of(sent: &Sent) -> LossPattern {
        if sent.lost < MIN_LOSSES {
            return LossPattern::Unclear;
        }
        let base = match sent.idle_rtt_us {
            0 => sent.min_rtt_us,
            idle => idle.min(sent.min_rtt_us),
        };
        if sent.max_rtt_us.saturating_sub(base) < queue_threshold_us(base) {
            return LossPattern::Random;
        }
        let low = rate(sent.lost_low, sent.packets_low);
        let high = rate(sent.lost_high, sent.packets_high);
        if sent.lost_low >= MIN_LOSSES && low >= RANDOM_FLOOR {
            LossPattern::Random
        } else if sent.lost_high >= MIN_LOSSES && high >= low * QUEUE_RATIO {
            LossPattern::Queue
        } else {
            LossPattern::Unclear
        }
    }
}

fn rate(lost: u64, packets: u64) -> f64 {
    lost as f64 / packets.max(1) as f64
}

impl Direction {
    /// The random loss rate: the loss in the lower half of the RTT range, where no
    /// queue overflows (all of it when the RTT never rose).
    fn low_rtt_loss(&self) -> f64 {
        if self.sent.packets_low == 0 || self.sent.packets_high == 0 {
            self.loss
        } else {
            rate(self.sent.lost_low, self.sent.packets_low)
        }
    }

    /// One probe's two halves put together.
    pub fn new(sent: Sent, received: Received) -> Direction {
        let loss = if sent.packets == 0 { 0.0 } else { sent.lost as f64 / sent.packets as f64 };
        let mut direction = Direction {
            rate_bps: received.steady_bps,
            loss,
            loss_pattern: LossPattern::of(&sent),
            random_loss: 0.0,
            reordering: (received.tags >= MIN_TAGS)
                .then(|| received.reordered as f64 / received.tags as f64),
            tag_loss: (sent.tags >= MIN_TAGS && received.tags > 0)
                .then(|| sent.tags.saturating_sub(received.tags) as f64 / sent.tags as f64),
            sent,
            received,
        };
        direction.random_loss = direction.low_rtt_loss();
        direction
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sender's view as measured on the emulator (idle, min, max RTT in ms).
    fn sent(rtt: (u64, u64, u64), low: (u64, u64), high: (u64, u64)) -> Sent {
        Sent {
            packets: low.0 + high.0,
            lost: low.1 + high.1,
            idle_rtt_us: rtt.0 * 1000,
            min_rtt_us: rtt.1 * 1000,
            max_rtt_us: rtt.2 * 1000,
            packets_low: low.0,
            lost_low: low.1,
            packets_high: high.0,
            lost_high: high.1,
            ..Sent::default()
        }
    }

    #[test]
    fn measured_paths_are_told_apart() {
        // 20 Mbit/s x 50 ms, drop-tail queue: every loss at the top of the RTT range.
        let slow = sent((52, 52, 96), (2484, 0), (1691, 28));
        assert_eq!(LossPattern::of(&slow), LossPattern::Queue);
        // 100 Mbit/s x 20 ms, the same: 2 losses in 16 477 packets low.
        let fast = sent((23, 21, 40), (16_477, 2), (4050, 113));
        assert_eq!(LossPattern::of(&fast), LossPattern::Queue);
        // 100 Mbit/s x 50 ms with 1 % random loss: start-up's queue losses on top.
        let lossy = sent((51, 51, 100), (17_626, 155), (1039, 86));
        assert_eq!(LossPattern::of(&lossy), LossPattern::Random);
        let d = Direction::new(lossy, Received::default());
        assert!((d.random_loss - 0.0088).abs() < 0.0001, "{}", d.random_loss);
        // Loss with no queue ever: random.
        assert_eq!(LossPattern::of(&sent((50, 50, 52), (1000, 10), (0, 0))), LossPattern::Random);
        assert_eq!(
            LossPattern::of(&sent((50, 50, 90), (1000, 1), (1000, 2))),
            LossPattern::Unclear
        );
    }
}
