//! When `-C` compresses: only while it makes the copy faster.
//!
//! Compression pays when the link is slower than the compressor and costs when it is
//! not: on loopback zstd took CPU from the transport, and `-C` ran at ~305 MB/s where
//! plain chunks ran at 620-650 (1 GiB of log-like text). The seeds' gzip,
//! turning 75 MB/s into 9 MB/s, is the same failure. Neither side can be predicted
//! from the data alone, so the policy measures both, on the one figure that matters:
//! the bytes the receiver has verified per second (its progress reports).
//!
//! - **Clearly link-bound**: if the compressor removes bytes at least [`CLEAR_WIN`]
//!   times faster than the link carries them (zstd level 1 saves a few hundred MB/s
//!   of text; a 100 Mbit/s path carries 12.5), compression stays on and nothing is
//!   probed. The margin is wide because a compressor that is itself the bottleneck
//!   also holds the observed link rate down.
//! - **Otherwise it is measured** in epochs of time: a stay in the current mode, then
//!   a probe of the other; each is judged on the second half of its epoch (the first
//!   half still drains the chunks prepared in the previous mode: 64 MiB are in
//!   flight, so a probe lasts two drains of that at the measured rate, 0.6-2 s). The faster mode is kept, raw on a near tie (it costs no CPU on either
//!   side). A probe that confirms the current mode doubles the stay, up to 16 s, so a
//!   long copy spends a few percent of its time on the worse mode. The first stay is
//!   0.6 s: a short fast copy pays for about that much compression at most.
//!
//! Chunks that do not shrink by 10 % go raw whatever the mode (see `codec`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// "Clearly link-bound": the compressor's saved-bytes rate over the link's wire rate.
pub const CLEAR_WIN: f64 = 16.0;
/// Length of a probe and of the first stay: two drains of the chunks in flight at
/// the last measured rate (so its second half sees only its own chunks), within
/// these bounds; the upper one before anything was measured.
const MIN_PROBE: Duration = Duration::from_millis(600);
const MAX_PROBE: Duration = Duration::from_secs(2);
/// The first stay: enough progress reports (every 100 ms) to judge its second half.
const FIRST_STAY: Duration = Duration::from_millis(600);
/// The shortest stay after a switch.
const MIN_STAY: Duration = Duration::from_secs(1);
/// The longest stay between probes.
const MAX_STAY: Duration = Duration::from_secs(16);
/// A probe must be this much faster to switch to compression; raw wins near ties.
const SWITCH_MARGIN: f64 = 1.05;

/// Whether the next chunks are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Try zstd on each chunk.
    Compress,
    /// Send chunks as they are.
    Raw,
}

impl Mode {
    fn other(self) -> Mode {
        match self {
            Mode::Compress => Mode::Raw,
            Mode::Raw => Mode::Compress,
        }
    }
}

/// What the current epoch is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Epoch {
    /// Staying in the current mode.
    Stay,
    /// Trying the current mode against `previous`, measured at `baseline` plain
    /// bytes per second just before.
    Probe { previous: Mode, baseline: f64 },
}

/// The policy's state; one per sending run, shared by its chunk tasks and the
/// reader of the receiver's reports.
#[derive(Debug)]
pub struct CompressPolicy {
    mode: Mode,
    epoch: Epoch,
    epoch_start: Instant,
    epoch_end: Instant,
    stay: Duration,
    /// Bytes the sender keeps in flight: what a switch has to drain.
    pipeline: u64,
    /// Verified-bytes reports: (when, total verified).
    verified: VecDeque<(Instant, u64)>,
    /// Compression's effect so far: plain and wire bytes of attempted chunks, and the
    /// time spent compressing them.
    tried_plain: u64,
    tried_wire: u64,
    compress_time: Duration,
}

impl CompressPolicy {
    /// A policy that starts by compressing (the user asked for `-C`), for a sender
    /// that keeps `pipeline` bytes of chunks in flight.
    pub fn new(now: Instant, pipeline: u64) -> Self {
        Self {
            mode: Mode::Compress,
            epoch: Epoch::Stay,
            epoch_start: now,
            epoch_end: now + FIRST_STAY,
            stay: FIRST_STAY,
            pipeline,
            verified: VecDeque::new(),
            tried_plain: 0,
            tried_wire: 0,
            compress_time: Duration::ZERO,
        }
    }

    /// The sender now keeps `bytes` of chunks in flight (it follows the congestion
    /// window, `crate::pipeline`): what the next probe has to drain.
    pub fn set_pipeline(&mut self, bytes: u64) {
        self.pipeline = bytes;
    }

    /// The mode for a chunk starting now.
    pub fn next_chunk(&mut self, now: Instant) -> Mode {
        if now >= self.epoch_end {
            self.end_epoch(now);
        }
        self.mode
    }

    /// Records a compression attempt: its plain and wire sizes and how long it took.
    pub fn on_compressed(&mut self, plain: u64, wire: u64, took: Duration) {
        self.tried_plain += plain;
        self.tried_wire += wire;
        self.compress_time += took;
    }

    /// Records a progress report: `total` bytes verified by the receiver so far.
    pub fn on_verified(&mut self, total: u64, now: Instant) {
        self.verified.push_back((now, total));
        // Reports come every 100 ms; keep a little more than the longest epoch.
        while self.verified.front().is_some_and(|&(t, _)| now.duration_since(t) > MAX_STAY * 2) {
            self.verified.pop_front();
        }
    }

    fn end_epoch(&mut self, now: Instant) {
        // Judge the second half of the epoch: chunks prepared before it have drained.
        let measured = self.verified_rate(self.epoch_start + (now - self.epoch_start) / 2, now);
        match (self.epoch, measured) {
            (Epoch::Stay, Some(rate))
                if !(self.mode == Mode::Compress && self.clearly_link_bound(rate)) =>
            {
                self.epoch = Epoch::Probe { previous: self.mode, baseline: rate };
                self.mode = self.mode.other();
                let probe = self.probe_length(rate);
                self.begin(now, probe);
                return;
            }
            (Epoch::Stay, _) => {}
            (Epoch::Probe { previous, baseline }, Some(probed)) => {
                let better = match self.mode {
                    Mode::Compress => probed > baseline * SWITCH_MARGIN,
                    Mode::Raw => probed * SWITCH_MARGIN >= baseline,
                };
                if better {
                    self.stay = MIN_STAY.max(self.probe_length(probed));
                } else {
                    self.mode = previous;
                    self.stay = (self.stay * 2).min(MAX_STAY);
                }
            }
            // Nothing verified during the probe: no evidence either way; go back and
            // try again later.
            (Epoch::Probe { previous, .. }, None) => {
                self.mode = previous;
                self.stay = (self.stay * 2).min(MAX_STAY);
            }
        }
        self.epoch = Epoch::Stay;
        self.begin(now, self.stay);
    }

    /// Two drains of the pipeline at `rate` plain bytes per second, bounded.
    fn probe_length(&self, rate: f64) -> Duration {
        let drain = self.pipeline as f64 / rate.max(1.0);
        Duration::from_secs_f64(2.0 * drain).clamp(MIN_PROBE, MAX_PROBE)
    }

    fn begin(&mut self, now: Instant, length: Duration) {
        self.epoch_start = now;
        self.epoch_end = now + length;
    }

    /// Verified plain bytes per second between the first report at or after `from`
    /// and the last at or before `to`.
    fn verified_rate(&self, from: Instant, to: Instant) -> Option<f64> {
        let mut inside = self.verified.iter().filter(|&&(t, _)| t >= from && t <= to);
        let &(t0, v0) = inside.next()?;
        let &(t1, v1) = inside.next_back()?;
        let secs = t1.duration_since(t0).as_secs_f64();
        (secs > 0.0).then(|| v1.saturating_sub(v0) as f64 / secs)
    }

    /// Whether the compressor saves bytes far faster than the link moves them, with
    /// `verified` plain bytes per second arriving while compressing.
    fn clearly_link_bound(&self, verified: f64) -> bool {
        let spent = self.compress_time.as_secs_f64();
        if self.tried_plain == 0 || spent <= 0.0 {
            return false;
        }
        let wire_rate = verified * self.tried_wire as f64 / self.tried_plain as f64;
        let saving_rate = self.tried_plain.saturating_sub(self.tried_wire) as f64 / spent;
        saving_rate >= CLEAR_WIN * wire_rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A copy in 10 ms steps, one chunk started per step. The receiver verifies
    /// plain bytes at the rate of the mode chunks were started in `lag` earlier (the
    /// chunks in flight), and reports every 100 ms.
    struct Copy {
        policy: CompressPolicy,
        start: Instant,
        raw_rate: f64,
        compressed_rate: f64,
        ratio: f64,
        compress_secs: f64,
        modes: VecDeque<Mode>,
        verified: f64,
        compressed_steps: u32,
    }

    impl Copy {
        fn new(raw_rate: f64, compressed_rate: f64, ratio: f64, compress_secs: f64) -> Self {
            let start = Instant::now();
            Copy {
                policy: CompressPolicy::new(start, 64 * MIB),
                start,
                raw_rate,
                compressed_rate,
                ratio,
                compress_secs,
                modes: VecDeque::new(),
                verified: 0.0,
                compressed_steps: 0,
            }
        }

        /// The mode outside a probe.
        fn settled(&self) -> Mode {
            match self.policy.epoch {
                Epoch::Probe { previous, .. } => previous,
                Epoch::Stay => self.policy.mode,
            }
        }

        fn run(&mut self, seconds: u32) -> f64 {
            const LAG_STEPS: usize = 30;
            let steps = seconds * 100;
            for step in 1..=steps {
                let now = self.start + Duration::from_millis(u64::from(step) * 10);
                let mode = self.policy.next_chunk(now);
                if mode == Mode::Compress {
                    self.compressed_steps += 1;
                    let wire = (MIB as f64 * self.ratio) as u64;
                    let took = Duration::from_secs_f64(self.compress_secs);
                    self.policy.on_compressed(MIB, wire, took);
                }
                self.modes.push_back(mode);
                let arriving = if self.modes.len() > LAG_STEPS {
                    self.modes.pop_front().expect("queued")
                } else {
                    Mode::Compress
                };
                self.verified += match arriving {
                    Mode::Compress => self.compressed_rate,
                    Mode::Raw => self.raw_rate,
                } / 100.0;
                if step % 10 == 0 {
                    self.policy.on_verified(self.verified as u64, now);
                }
            }
            f64::from(self.compressed_steps) / f64::from(steps)
        }
    }

    #[test]
    fn a_cpu_bound_link_ends_up_raw_and_rarely_probes() {
        // Loopback-like: plain chunks 630 MB/s, compressed 305 MB/s (measured).
        let mut c = Copy::new(630e6, 305e6, 0.26, 0.0025);
        let share = c.run(60);
        assert_eq!(c.settled(), Mode::Raw);
        assert!(share < 0.08, "{:.1} % of the time compressing", 100.0 * share);
    }

    #[test]
    fn a_slow_link_keeps_compressing_without_probes() {
        // 100 Mbit/s: compressed chunks carry 1/0.3 the plain bytes, and zstd saves
        // 0.7 MiB in 2.5 ms, ~24x the link's wire rate.
        let mut c = Copy::new(12.5e6, 41e6, 0.3, 0.0025);
        let share = c.run(30);
        assert_eq!(c.settled(), Mode::Compress);
        assert_eq!(share, 1.0, "never probed raw");
    }

    #[test]
    fn a_close_call_is_measured_and_compression_kept_when_faster() {
        // 1 Gbit/s: not clearly link-bound, but compressed chunks still verify twice
        // the plain bytes.
        let mut c = Copy::new(118e6, 250e6, 0.4, 0.004);
        let share = c.run(60);
        assert_eq!(c.settled(), Mode::Compress);
        assert!(share > 0.85, "{:.1} % of the time compressing", 100.0 * share);
    }

    #[test]
    fn incompressible_data_goes_raw_on_a_tie() {
        let mut c = Copy::new(118e6, 117e6, 1.0, 0.001);
        c.run(20);
        assert_eq!(c.settled(), Mode::Raw);
    }

    #[test]
    fn a_probe_lasts_two_drains_of_what_is_in_flight_now() {
        let mut p = CompressPolicy::new(Instant::now(), 64 * MIB);
        // At 12.5 MB/s, 64 MiB take 5.4 s to drain: the probe is held to its bound.
        assert_eq!(p.probe_length(12.5e6), MAX_PROBE);
        p.set_pipeline(8 * MIB);
        // 8 MiB drain in 0.67 s.
        let probe = p.probe_length(12.5e6).as_secs_f64();
        assert!((1.3..1.4).contains(&probe), "a probe of {probe} s");
    }

    #[test]
    fn no_reports_no_switch() {
        let mut p = CompressPolicy::new(Instant::now(), 64 * MIB);
        let later = Instant::now() + Duration::from_secs(5);
        assert_eq!(p.next_chunk(later), Mode::Compress, "no evidence, no probe");
    }
}
