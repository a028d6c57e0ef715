//! A background flow beside a loss-based flow in a shallow queue: does the queue stand
//! above a tenth of its depth for most of a round? (TCP Nice.)
//!
//! A background flow yields to a queue of a quarter of its baseline RTT
//! (`SokuCc::background_queue`), which a drop-tail buffer of a quarter of the
//! bandwidth-delay product never holds: there the flow cut only at the buffer's
//! overflows (`crate::queue_loss`), and in between it held its bound while CUBIC's
//! window grew into the queue. Beside CUBIC (path simulator, 100 Mbit/s, quarter-BDP
//! buffer) it kept 41 % of the link at 50 ms and 28 % at 100 ms.
//!
//! TCP Nice (Venkataramani, Kokku and Dahlin, "TCP Nice: a mechanism for background
//! transfers", OSDI 2002) measures the queue against its own capacity instead of a
//! fixed delay: `minRTT` stands for the empty queue, `maxRTT` for the full one, and a
//! round in which more than a fraction `f` of the packets see an RTT above
//! `minRTT + t x (maxRTT - minRTT)` is congested, and the window halves. Nice's values
//! are `t = 0.1` and `f = 0.5`. In a shallow buffer the range is small (12.5 ms at
//! 50 ms), so a threshold relative to it is what sees the queue at all; LEDBAT's
//! absolute target (RFC 6817 §2.4.2: 100 ms, 60 ms in LEDBAT++,
//! draft-irtf-iccrg-ledbat-plus-plus) is never reached below an overflow.
//!
//! `maxRTT` here is the top of the RTT range when the flow last cut its bound for an
//! overflow of the shallow queue: the RTT of the full queue, measured where it is
//! known to be full. Before such an overflow, or once the loss is no longer the
//! queue's, it is the largest top of the RTT range over the last [`SEEN_ROUNDS`]
//! rounds, of those wide enough to be a queue ([`queue_loss::at_top`]), taken from
//! the cruising rounds of the probe-bw cycle only (`SokuCc`'s `cruise_top`; not the
//! probing round nor the one after, whose acks carry the probe's own queue); and the
//! threshold is then at least [`SEEN_FLOOR`] above the min RTT.
//!
//! Why a depth before an overflow: Linux's CUBIC without a pacer sends in bursts, and
//! a drop-tail buffer drops those rather than the paced flow's packets; the flow never
//! cut for an overflow, had no depth to measure by, and took what the buffer's drops
//! cut from CUBIC's window, at a queue of a few milliseconds: CUBIC kept 69.7-81.6 %
//! of the link at 50 ms (path simulator, quarter-BDP buffer, the window the bench
//! measures), 93.2-94.2 % with this; on the emulator 71-79 Mbit/s of 100 (see
//! `lab/2026-11-30-background-depth` for the figures with this). Why the largest over
//! many rounds, not the current top: beside a CUBIC flow that keeps being cut, the
//! queue reaches its top in fewer than a tenth of the 32 rounds the current top is
//! taken from, which then fell every few rounds to the flow's own few milliseconds,
//! too narrow to be a queue; in those rounds there was no signal and the bound grew by
//! a quarter a round into the buffer (CUBIC 39-75 % of the link). [`SEEN_ROUNDS`]
//! spans one of CUBIC's growth epochs at such rates (`K = cbrt(W_max (1 - beta) / C)`,
//! RFC 9438 §4.2: 6.9 s for the 430 packets of 100 Mbit/s x 50 ms).
//!
//! Why the cruising rounds and the floor: alone, a flow holds a queue of its own, from
//! its probes and its allowance for aggregated acks (5-10 ms at 50 ms on the
//! emulator). With that as the depth, Nice's line stood under a millisecond above the
//! min RTT, inside the RTT's jitter; no cut of the flow's own could bring its RTT
//! under the line, and it halved itself to 40-50 Mbit/s of 100, alone (94.5 before).
//! The floor is HyStart++'s smallest rise of the RTT that counts as a queue (RFC 9406
//! §4.2, `MIN_RTT_THRESH`). A depth an overflow showed is the queue's own and keeps
//! Nice's tenth.
//!
//! The bytes counted are those of ack frames, each by its smallest RTT sample, as
//! `crate::queue_loss` counts them (frames of one packet and probe-RTT's carry the
//! receiver's ack timer and are left out by the caller).
//!
//! How far a congested round cuts ([`Nice::decrease`]). Nice halves; a halving on
//! every such round could not tell the flow's own queue from another flow's: the same
//! bytes in the queue over the same rate give the same delay (Little's law), whoever
//! else sends. So when the other flow left, the flow's own regrowth built a queue
//! above the threshold and each halving took it back to half the link (path
//! simulator, CUBIC leaving a quarter-BDP buffer at 50 ms: 26 % of the link in the
//! 3-8 s after). The flow's own cut is the experiment that tells them apart:
//!
//! - The first cut takes what is in flight to what the flow's delivery rate needs
//!   for a queue at the threshold, `rate x (min + t)`: `(min + t) / rtt` of it, `rtt`
//!   being in flight over rate (Little's law; TCP Vegas's expected against actual
//!   rate, Brakmo and Peterson, IEEE JSAC 13(8), 1995, the window update of FAST TCP,
//!   Jin, Wei and Low, IEEE INFOCOM 2004, and BBR's `bw x min_rtt` plus a queue's
//!   allowance). If the queue is the flow's own, that leaves the threshold's queue and
//!   the link busy.
//! - If the queue does not answer, the next round judged (the second after the cut)
//!   still congested and its smallest RTT not even halfway from the cut's RTT down to
//!   the threshold, it is another flow's, and the cut is Nice's halving, repeated for
//!   as long as that holds.
//!
//! TCP Nice itself runs on Vegas; LEDBAT (RFC 6817) likewise answers its own queue
//! gently and yields by how far the delay stands above its target.

use std::time::Duration;

use crate::filters::{Direction, WindowedFilter};
use crate::queue_loss;

/// Rounds over which the top of the RTT range seen stands for the queue's depth until
/// an overflow shows it (10 s at 50 ms; see the module docs).
pub const SEEN_ROUNDS: u64 = 200;
/// The least a threshold from the range seen stands above the min RTT (see the module
/// docs).
pub const SEEN_FLOOR: Duration = Duration::from_millis(4);

/// Nice's threshold `t`: the share of the queue's depth above the min RTT that a
/// sample must exceed.
pub const THRESHOLD: f64 = 0.1;
/// Nice's fraction `f`: the share of a round's bytes that must exceed the threshold.
pub const FRACTION: f64 = 0.5;
/// Nice's multiplicative decrease, the most a congested round cuts.
pub const MIN_DECREASE: f64 = 0.5;

/// The full queue's RTT and the bytes of the current and the last round above and
/// below Nice's threshold.
#[derive(Debug, Clone)]
pub struct Nice {
    /// The RTT at the full queue (Nice's `maxRTT`), once an overflow showed it.
    full: Option<Duration>,
    /// The tops of the RTT range wide enough to be a queue over the last
    /// [`SEEN_ROUNDS`] rounds, microseconds: their largest.
    seen: WindowedFilter,
    /// Bytes above the threshold and all bytes counted, in the round in progress.
    current: (u64, u64),
    /// The same for the last round.
    last: (u64, u64),
    /// The last cut while it awaits the queue's answer: the round it was made in and
    /// the RTT it was made for.
    cut: Option<(u64, Duration)>,
}

impl Default for Nice {
    fn default() -> Self {
        Self::new()
    }
}

impl Nice {
    /// Nothing known.
    pub fn new() -> Self {
        Self {
            full: None,
            seen: WindowedFilter::new(Direction::Max, SEEN_ROUNDS),
            current: (0, 0),
            last: (0, 0),
            cut: None,
        }
    }

    /// The queue overflowed with `top` the largest RTT of the recent rounds and `min`
    /// the min RTT: `top` is the full queue's RTT, if the range is wide enough to tell
    /// a queue by ([`queue_loss::at_top`]); otherwise what was known stays.
    pub fn on_overflow(&mut self, min: Duration, top: Duration) {
        if queue_loss::at_top(top, min, top).is_some() {
            self.full = Some(top);
        }
    }

    /// The top of the RTT range the flow has seen lately (`min` to `top`): the depth
    /// Nice measures against until an overflow shows the full queue's.
    pub fn on_range(&mut self, min: Duration, top: Option<Duration>, round: u64) {
        let wide = top.filter(|&top| queue_loss::at_top(top, min, top).is_some());
        // A narrow range counts as none, so that a wide one leaves the window in time.
        self.seen.update(wide.map_or(0, |top| top.as_micros() as u64), round);
    }

    /// Forgets the full queue's RTT: no signal until the next overflow.
    pub fn forget(&mut self) {
        self.full = None;
        self.cut = None;
    }

    /// The queue's depth in time: from `min` to the full queue's RTT, or to the top of
    /// the range seen lately until an overflow showed that.
    pub fn depth(&self, min: Duration) -> Option<Duration> {
        let seen = self.seen.get().filter(|&us| us > 0).map(Duration::from_micros);
        Some(self.full.or(seen)?.saturating_sub(min))
    }

    /// The RTT above which a sample counts: `min + THRESHOLD x (full - min)`, at least
    /// [`SEEN_FLOOR`] above `min` while the depth is only the range seen.
    pub fn threshold(&self, min: Duration) -> Option<Duration> {
        let above = self.depth(min)?.mul_f64(THRESHOLD);
        match self.full {
            Some(_) => Some(min + above),
            None => Some(min + above.max(SEEN_FLOOR)),
        }
    }

    /// The share of what was in flight that congested round `round` keeps, `rtt` being
    /// what was in flight over the round's delivery rate and `round_min` its smallest
    /// RTT: `(min + t) / rtt`, clamped to [`MIN_DECREASE`] and 1; [`MIN_DECREASE`] if
    /// the queue did not answer the last cut (see the module docs). `None` without a
    /// depth.
    pub fn decrease(
        &self,
        min: Duration,
        round: u64,
        rtt: Duration,
        round_min: Duration,
    ) -> Option<f64> {
        let threshold = self.threshold(min)?;
        if let Some((cut, before)) = self.cut {
            let halfway = threshold + before.saturating_sub(threshold) / 2;
            if round >= cut + 2 && round_min > halfway {
                return Some(MIN_DECREASE);
            }
        }
        let share = threshold.as_secs_f64() / rtt.as_secs_f64().max(f64::MIN_POSITIVE);
        Some(share.clamp(MIN_DECREASE, 1.0))
    }

    /// The flow cut for this rule in `round`, for `rtt` (as [`Nice::decrease`] has it).
    pub fn on_cut(&mut self, round: u64, rtt: Duration) {
        self.cut = Some((round, rtt));
    }

    /// Round `round` ended without a cut for this rule: a cut under test two rounds
    /// back was answered (or another cut came between).
    pub fn on_judged(&mut self, round: u64) {
        if self.cut.is_some_and(|(cut, _)| round >= cut + 2) {
            self.cut = None;
        }
    }

    /// An ack frame acknowledged `bytes` with `rtt` as its smallest sample.
    pub fn on_frame(&mut self, rtt: Duration, bytes: u64, min: Duration) {
        let Some(threshold) = self.threshold(min) else {
            return;
        };
        self.current.1 += bytes;
        if rtt > threshold {
            self.current.0 += bytes;
        }
    }

    /// A round ended.
    pub fn on_round(&mut self) {
        self.last = std::mem::take(&mut self.current);
    }

    /// Whether more than [`FRACTION`] of the last round's bytes saw the queue above
    /// the threshold.
    pub fn congested(&self) -> bool {
        let (above, total) = self.last;
        total > 0 && above as f64 > FRACTION * total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A round of frames at `rtts`, 10 kB each.
    fn round(n: &mut Nice, rtts: &[u64]) {
        for &r in rtts {
            n.on_frame(ms(r), 10_000, ms(50));
        }
        n.on_round();
    }

    #[test]
    fn no_signal_without_a_depth() {
        let mut n = Nice::new();
        round(&mut n, &[60, 60, 60]);
        assert!(!n.congested());
        // A range too narrow to be a queue (under an eighth of the min RTT).
        n.on_overflow(ms(50), ms(53));
        n.on_range(ms(50), Some(ms(53)), 1);
        round(&mut n, &[60, 60, 60]);
        assert!(!n.congested());
    }

    #[test]
    fn the_range_seen_lately_gives_the_depth_until_an_overflow_does() {
        let mut n = Nice::new();
        n.on_range(ms(50), Some(ms(70)), 1);
        assert_eq!(n.depth(ms(50)), Some(ms(20)));
        // Later tops within the window do not lower it, nor does a narrow range.
        n.on_range(ms(50), Some(ms(55)), 2);
        n.on_range(ms(50), Some(ms(52)), 3);
        assert_eq!(n.depth(ms(50)), Some(ms(20)));
        // A tenth of the depth is 2 ms, inside the RTT's jitter: the floor holds.
        assert_eq!(n.threshold(ms(50)), Some(ms(50) + SEEN_FLOOR));
        round(&mut n, &[53, 53, 51]);
        assert!(!n.congested());
        round(&mut n, &[56, 56, 51]);
        assert!(n.congested());
        // An overflow's full queue takes precedence, and its tenth stands.
        n.on_overflow(ms(50), ms(62));
        assert_eq!(n.depth(ms(50)), Some(ms(12)));
        assert_eq!(n.threshold(ms(50)), Some(ms(50) + Duration::from_micros(1200)));
        // Once the window passed, the tops within it.
        n.forget();
        n.on_range(ms(50), Some(ms(58)), 1 + SEEN_ROUNDS + 1);
        assert_eq!(n.depth(ms(50)), Some(ms(8)));
    }

    #[test]
    fn most_of_a_round_above_a_tenth_of_the_depth_is_congestion() {
        let mut n = Nice::new();
        n.on_overflow(ms(50), ms(62));
        assert_eq!(n.threshold(ms(50)), Some(ms(50) + Duration::from_micros(1200)));
        round(&mut n, &[52, 52, 51]);
        assert!(n.congested());
        round(&mut n, &[52, 50, 50]);
        assert!(!n.congested());
        n.forget();
        round(&mut n, &[52, 52, 52]);
        assert!(!n.congested());
    }

    #[test]
    fn the_cut_leaves_the_threshold_s_queue_and_at_most_halves() {
        let mut n = Nice::new();
        assert_eq!(n.decrease(ms(50), 10, ms(60), ms(60)), None);
        // Depth 12 ms: threshold at 51.2 ms.
        n.on_overflow(ms(50), ms(62));
        let d = n.decrease(ms(50), 10, ms(53), ms(52)).unwrap();
        assert!((d - 51.2 / 53.0).abs() < 1e-9, "{d}");
        assert_eq!(n.decrease(ms(50), 10, ms(200), ms(52)), Some(MIN_DECREASE));
        assert_eq!(n.decrease(ms(50), 10, ms(50), ms(50)), Some(1.0));
    }

    #[test]
    fn a_queue_that_does_not_answer_the_cut_is_halved_on() {
        let mut n = Nice::new();
        n.on_overflow(ms(50), ms(62));
        n.on_cut(10, ms(57));
        // The round after the cut still carries the queue the cut answered.
        assert!(n.decrease(ms(50), 11, ms(57), ms(56)).unwrap() > MIN_DECREASE);
        // Two rounds on, the queue stood above halfway to the threshold (54.1 ms).
        assert_eq!(n.decrease(ms(50), 12, ms(57), ms(55)), Some(MIN_DECREASE));
        // It fell below: our own, cut to the threshold's queue again.
        assert!(n.decrease(ms(50), 12, ms(53), ms(52)).unwrap() > MIN_DECREASE);
        // A round without a cut ends the test.
        n.on_judged(12);
        assert!(n.decrease(ms(50), 13, ms(57), ms(56)).unwrap() > MIN_DECREASE);
    }
}
