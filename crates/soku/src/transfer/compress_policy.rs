//! When `-C` compresses: only while it makes the copy faster.
//!
//! Compression pays when the link is slower than the compressor and costs when it is
//! not: on loopback zstd took CPU from the transport and `-C` ran at 175 MB/s where
//! plain chunks ran at 294 (text, session 2). The seeds' gzip, turning 75 MB/s into
//! 9 MB/s, is the same failure. Neither side can be predicted from the data alone, so
//! the policy measures both:
//!
//! - **Clearly link-bound**: if the compressor removes bytes at least
//!   [`CLEAR_WIN`] times faster than the link carries them (zstd level 1 saves a few
//!   hundred MB/s of text; a 100 Mbit/s path carries 12.5), compression stays on and
//!   nothing is probed. The margin is wide because a compressor that is itself the
//!   bottleneck also holds the observed link rate down.
//! - **Otherwise it is measured**: chunks are compressed (or not) in stretches, and
//!   each stretch's throughput is taken from consecutive completions of chunks of its
//!   own kind (a switch reaches the link only after the chunks already in flight, so
//!   time windows would mix the two). After a stretch in the current mode, a probe
//!   stretch in the other mode (24 chunks; the current mode resumes while they are in
//!   flight); the faster one is kept, raw on a near tie (it costs no CPU on either
//!   side). A probe that confirms the current mode doubles the time to the next one,
//!   up to 1024 chunks, so a copy spends a few percent of its chunks on the worse mode.
//!
//! Chunks that do not compress by 10 % go raw whatever the mode (see `codec`); they
//! count as compressed-mode chunks here because their attempt cost the time.

use std::time::{Duration, Instant};

/// "Clearly link-bound": the compressor's saved-bytes rate over the link's wire rate.
pub const CLEAR_WIN: f64 = 16.0;
/// Chunks in a probe stretch; the stretch is measured once this many of its
/// completions arrived in a row (minus the first, which only starts the clock).
const PROBE_CHUNKS: u32 = 24;
/// Chunks in the current mode before the first probe, and the most between probes.
const FIRST_STAY: u32 = 48;
const MAX_STAY: u32 = 1024;
/// A probe must be this much faster to switch to compression; raw wins ties.
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

/// A stretch of consecutive completions of one mode's chunks.
#[derive(Debug, Clone, Copy)]
struct Run {
    mode: Mode,
    first_done: Instant,
    last_done: Instant,
    /// Plain bytes completed after the first completion.
    plain: u64,
    chunks: u32,
}

impl Run {
    /// Plain bytes per second, once the run spans time and enough chunks.
    fn rate(&self, min_chunks: u32) -> Option<f64> {
        let secs = self.last_done.duration_since(self.first_done).as_secs_f64();
        (self.chunks >= min_chunks && secs > 0.0).then(|| self.plain as f64 / secs)
    }
}

/// The policy's state; one per sending run, shared by its chunk tasks.
#[derive(Debug)]
pub struct CompressPolicy {
    mode: Mode,
    /// Chunks still to start in the current stretch.
    left_in_stretch: u32,
    /// The stretch being started is a probe of `mode` against `probing_against`.
    probing_against: Option<Mode>,
    /// A probe whose chunks are started but not yet measured: its mode.
    awaiting: Option<Mode>,
    /// Chunks to stay in a mode before the next probe.
    stay: u32,
    /// Throughput of the last measured stretch per mode, plain bytes per second.
    rate: [Option<f64>; 2],
    run: Option<Run>,
    /// Compression's effect so far: plain and wire bytes of attempted chunks, and the
    /// time spent compressing them.
    tried_plain: u64,
    tried_wire: u64,
    compress_time: Duration,
    /// Wire bytes and time of all completions since the first, for the link rate.
    first_done: Option<Instant>,
    last_done: Option<Instant>,
    wire_done: u64,
}

fn slot(mode: Mode) -> usize {
    match mode {
        Mode::Compress => 0,
        Mode::Raw => 1,
    }
}

impl CompressPolicy {
    /// A policy that starts by compressing (the user asked for `-C`).
    pub fn new() -> Self {
        Self {
            mode: Mode::Compress,
            left_in_stretch: FIRST_STAY,
            probing_against: None,
            awaiting: None,
            stay: FIRST_STAY,
            rate: [None, None],
            run: None,
            tried_plain: 0,
            tried_wire: 0,
            compress_time: Duration::ZERO,
            first_done: None,
            last_done: None,
            wire_done: 0,
        }
    }

    /// The mode for the next chunk to start.
    pub fn next_chunk(&mut self) -> Mode {
        if self.left_in_stretch == 0 {
            self.end_stretch();
        }
        self.left_in_stretch = self.left_in_stretch.saturating_sub(1);
        self.mode
    }

    /// The current stretch is fully started: decide the next one.
    fn end_stretch(&mut self) {
        if let Some(previous) = self.probing_against.take() {
            // The probe's chunks are on their way; go back to the previous mode until
            // they are measured (see `judge_probe`).
            self.awaiting = Some(self.mode);
            self.mode = previous;
            self.left_in_stretch = self.stay;
            return;
        }
        if self.awaiting.is_some() || self.rate[slot(self.mode)].is_none() {
            // Nothing to compare yet (the first chunks, or a probe, still in flight).
            self.left_in_stretch = 1;
        } else if self.mode == Mode::Compress && self.clearly_link_bound() {
            self.left_in_stretch = self.stay;
        } else {
            self.probing_against = Some(self.mode);
            self.mode = self.mode.other();
            // The probed mode's old figure is stale: measure it afresh.
            self.rate[slot(self.mode)] = None;
            self.left_in_stretch = PROBE_CHUNKS;
        }
    }

    /// A probe was measured: switch to its mode if it was faster, else probe again
    /// only after twice as long.
    fn judge_probe(&mut self, probed: Mode) {
        let (Some(probed_rate), Some(current_rate)) =
            (self.rate[slot(probed)], self.rate[slot(self.mode)])
        else {
            return;
        };
        self.awaiting = None;
        let better = match probed {
            Mode::Compress => probed_rate > current_rate * SWITCH_MARGIN,
            Mode::Raw => probed_rate * SWITCH_MARGIN >= current_rate,
        };
        if better {
            self.mode = probed;
            self.stay = FIRST_STAY;
        } else {
            self.stay = (self.stay * 2).min(MAX_STAY);
        }
        self.left_in_stretch = self.stay;
    }

    /// Whether the compressor saves bytes far faster than the link moves them.
    fn clearly_link_bound(&self) -> bool {
        let (Some(first), Some(last)) = (self.first_done, self.last_done) else {
            return false;
        };
        let secs = last.duration_since(first).as_secs_f64();
        let spent = self.compress_time.as_secs_f64();
        if secs <= 0.0 || spent <= 0.0 {
            return false;
        }
        let link = self.wire_done as f64 / secs;
        let saving = self.tried_plain.saturating_sub(self.tried_wire) as f64 / spent;
        saving >= CLEAR_WIN * link
    }

    /// Records a compression attempt: its plain and wire sizes and how long it took.
    pub fn on_compressed(&mut self, plain: u64, wire: u64, took: Duration) {
        self.tried_plain += plain;
        self.tried_wire += wire;
        self.compress_time += took;
    }

    /// Records a chunk's completion (handed to the transport): the mode it was
    /// started in and its plain and wire sizes.
    pub fn on_done(&mut self, mode: Mode, plain: u64, wire: u64, now: Instant) {
        self.first_done.get_or_insert(now);
        self.last_done = Some(now);
        self.wire_done += wire;
        match &mut self.run {
            Some(run) if run.mode == mode => {
                run.plain += plain;
                run.chunks += 1;
                run.last_done = now;
                // Take the measurement while the run lasts, so a probe is judged as
                // soon as it has enough completions.
                if let Some(rate) = run.rate(PROBE_CHUNKS - 1) {
                    self.rate[slot(mode)] = Some(rate);
                    if self.awaiting == Some(mode) {
                        self.judge_probe(mode);
                    }
                }
            }
            _ => {
                self.run = Some(Run { mode, first_done: now, last_done: now, plain: 0, chunks: 0 })
            }
        }
    }
}

impl Default for CompressPolicy {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A pipeline with `depth` chunks in flight: a chunk completes `depth` starts
    /// after it started, each mode's chunks complete at its own plain-byte rate, and
    /// compressed chunks shrink to `ratio`.
    struct Pipe {
        policy: CompressPolicy,
        in_flight: std::collections::VecDeque<Mode>,
        now: Instant,
        raw_rate: f64,
        compressed_rate: f64,
        ratio: f64,
        compress_secs: f64,
        compressed_chunks: u32,
    }

    impl Pipe {
        fn new(raw_rate: f64, compressed_rate: f64, ratio: f64, compress_secs: f64) -> Self {
            Pipe {
                policy: CompressPolicy::new(),
                in_flight: Default::default(),
                now: Instant::now(),
                raw_rate,
                compressed_rate,
                ratio,
                compress_secs,
                compressed_chunks: 0,
            }
        }

        fn run(&mut self, chunks: u32, depth: usize) {
            for _ in 0..chunks {
                let mode = self.policy.next_chunk();
                if mode == Mode::Compress {
                    self.compressed_chunks += 1;
                    let wire = (MIB as f64 * self.ratio) as u64;
                    let took = Duration::from_secs_f64(self.compress_secs);
                    self.policy.on_compressed(MIB, wire, took);
                }
                self.in_flight.push_back(mode);
                if self.in_flight.len() > depth {
                    let done = self.in_flight.pop_front().expect("in flight");
                    let (rate, wire) = match done {
                        Mode::Compress => (self.compressed_rate, MIB as f64 * self.ratio),
                        Mode::Raw => (self.raw_rate, MIB as f64),
                    };
                    self.now += Duration::from_secs_f64(MIB as f64 / rate);
                    self.policy.on_done(done, MIB, wire as u64, self.now);
                }
            }
        }
    }

    #[test]
    fn a_cpu_bound_link_ends_up_raw_and_rarely_probes() {
        // Loopback-like: raw 450 MB/s, compressing 175 MB/s (text at ratio 0.3).
        let mut p = Pipe::new(450e6, 175e6, 0.3, 0.002);
        p.run(4000, 64);
        assert_eq!(p.policy.mode, Mode::Raw);
        let share = f64::from(p.compressed_chunks) / 4000.0;
        assert!(share < 0.08, "{:.1} % of chunks compressed", 100.0 * share);
    }

    #[test]
    fn a_slow_link_keeps_compressing_without_probes() {
        // 100 Mbit/s WAN: compressed chunks move 3x the plain bytes of raw ones, and
        // zstd saves 0.7 MiB in 2 ms, ~30x the link's rate.
        let mut p = Pipe::new(12.5e6, 37.5e6, 0.3, 0.002);
        p.run(1000, 64);
        assert_eq!(p.policy.mode, Mode::Compress);
        assert_eq!(p.compressed_chunks, 1000, "never probed raw");
    }

    #[test]
    fn a_close_call_is_measured_and_compression_kept_when_faster() {
        // 1 Gbit/s with a slowish compressor: not clearly link-bound, but compressed
        // chunks still move 2x the plain bytes.
        let mut p = Pipe::new(125e6, 250e6, 0.4, 0.004);
        p.run(2000, 64);
        assert_eq!(p.policy.mode, Mode::Compress);
        assert!(p.compressed_chunks > 1800, "{} of 2000 compressed", p.compressed_chunks);
    }

    #[test]
    fn incompressible_data_goes_raw_on_a_tie() {
        // Nothing saved: both modes move the same plain bytes; raw costs no CPU.
        let mut p = Pipe::new(125e6, 124e6, 1.0, 0.001);
        p.run(1000, 64);
        assert_eq!(p.policy.mode, Mode::Raw);
    }
}
