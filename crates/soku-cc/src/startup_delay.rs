//! The queue signal that ends startup before the bottleneck's buffer overflows.
//!
//! BBR leaves startup when the delivery rate stops growing for three rounds. Its window
//! keeps doubling meanwhile, up to `startup_gain x BDP`, so a path whose buffer holds
//! one bandwidth-delay product loses up to a BDP of packets per round for those rounds:
//! on the emulator at 100 Mbit/s and 200-300 ms, 4-5 % of a 125 MB copy was lost that
//! way, all of it in the first seconds. A queue shows up as a rise in the RTT a round
//! before it overflows, so startup also ends when the smallest RTT of the current round
//! has risen above the previous round's by a threshold, as HyStart++ does for slow
//! start ([RFC 9406] §4.2: at least eight samples per round, threshold an eighth of the
//! RTT clamped to 4..16 ms). A sample here is the smallest RTT of one ack frame, not
//! of each packet it acknowledges: those share the frame's ack delay, and with an ack
//! every ten packets or 25 ms, eight per-packet samples from one or two delayed acks
//! ended startup at 50 kB windows on a 200 ms emulated path. Comparing two consecutive rounds' minima, not the all-time
//! minimum, keeps a single early sample (a handshake packet, a timestamp taken late)
//! from either hiding a queue or inventing one.
//!
//! [RFC 9406]: https://www.rfc-editor.org/rfc/rfc9406

use std::time::Duration;

/// Ack frames a round needs before its minimum is trusted (RFC 9406 `N_RTT_SAMPLE`).
const MIN_SAMPLES: u32 = 8;
/// Bounds of the rise that counts as a queue (RFC 9406 `MIN_RTT_THRESH`,
/// `MAX_RTT_THRESH`).
const MIN_RISE: Duration = Duration::from_millis(4);
const MAX_RISE: Duration = Duration::from_millis(16);

/// The RTT rise over `base` that shows a queue: an eighth of it, within 4..16 ms
/// (RFC 9406 §4.2).
pub(crate) fn queue_rise(base: Duration) -> Duration {
    (base / 8).clamp(MIN_RISE, MAX_RISE)
}

/// Per-round RTT minima for the startup exit.
///
/// A round whose minimum rose puts startup on hold (the window stops growing); a
/// second such round in a row, against the same baseline, confirms the queue and
/// ends startup; a round without the rise lets growth resume. That is HyStart++'s
/// conservative slow start in its simplest form: on a path whose RTT jitters (Wi-Fi,
/// a loaded host) one noisy round costs a round of growth, not the rest of startup.
#[derive(Debug, Clone, Default)]
pub struct StartupDelay {
    /// Minimum of the last trusted round that showed no rise.
    baseline: Option<Duration>,
    round_min: Option<Duration>,
    round_samples: u32,
    rose_last_round: bool,
}

impl StartupDelay {
    /// Takes one RTT sample of the current round.
    pub fn on_sample(&mut self, rtt: Duration) {
        self.round_min = Some(self.round_min.map_or(rtt, |m| m.min(rtt)));
        self.round_samples += 1;
    }

    /// Closes the current round. A trusted round without a rise becomes the baseline.
    pub fn on_round_end(&mut self) {
        let rose = self.rising();
        if !rose && self.round_samples >= MIN_SAMPLES {
            self.baseline = self.round_min;
        }
        self.rose_last_round = rose;
        self.round_min = None;
        self.round_samples = 0;
    }

    /// Whether the window should stop growing: this round or the last shows a queue.
    pub fn hold(&self) -> bool {
        self.rose_last_round || self.rising()
    }

    /// Whether the queue is confirmed: the last round rose and this one does too.
    pub fn queue_confirmed(&self) -> bool {
        self.rose_last_round && self.rising()
    }

    /// This round's minimum, over at least [`MIN_SAMPLES`] samples, exceeds the
    /// baseline by the threshold.
    fn rising(&self) -> bool {
        let (Some(base), Some(now)) = (self.baseline, self.round_min) else {
            return false;
        };
        self.round_samples >= MIN_SAMPLES && now >= base + queue_rise(base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn round(d: &mut StartupDelay, rtt: Duration, samples: u32) {
        for _ in 0..samples {
            d.on_sample(rtt);
        }
    }

    #[test]
    fn two_rounds_risen_by_an_eighth_confirm_a_queue() {
        let mut d = StartupDelay::default();
        round(&mut d, ms(100), 10);
        d.on_round_end();
        round(&mut d, ms(112), 10);
        assert!(!d.hold(), "12 ms on 100 ms is below the 12.5 ms threshold");
        d.on_round_end();
        // 112 ms is now the baseline: 126 ms is its rise.
        round(&mut d, ms(126), 8);
        assert!(d.hold() && !d.queue_confirmed(), "one risen round only holds");
        d.on_round_end();
        // The baseline stays at the last round without a rise.
        round(&mut d, ms(127), 8);
        assert!(d.queue_confirmed());
    }

    #[test]
    fn a_single_noisy_round_only_pauses_growth() {
        let mut d = StartupDelay::default();
        round(&mut d, ms(20), 8);
        d.on_round_end();
        round(&mut d, ms(30), 8);
        assert!(d.hold());
        d.on_round_end();
        round(&mut d, ms(21), 8);
        assert!(d.hold() && !d.queue_confirmed(), "held until the round ends");
        d.on_round_end();
        assert!(!d.hold(), "growth resumes after a round without the rise");
    }

    #[test]
    fn thresholds_are_clamped() {
        let mut d = StartupDelay::default();
        round(&mut d, ms(1), 8);
        d.on_round_end();
        round(&mut d, ms(4), 8);
        assert!(!d.hold(), "3 ms is below the 4 ms floor");
        let mut d = StartupDelay::default();
        round(&mut d, ms(300), 8);
        d.on_round_end();
        round(&mut d, ms(316), 8);
        assert!(d.hold(), "16 ms is the ceiling, not 300/8");
    }

    #[test]
    fn too_few_samples_decide_nothing() {
        let mut d = StartupDelay::default();
        round(&mut d, ms(100), 7);
        d.on_round_end();
        round(&mut d, ms(500), 8);
        assert!(!d.hold(), "no trusted baseline");
        d.on_round_end();
        round(&mut d, ms(900), 7);
        assert!(!d.hold(), "current round not trusted yet");
        d.on_sample(ms(900));
        assert!(d.hold());
    }
}
