//! Tunables of [`SokuCc`](crate::SokuCc).

use std::time::Duration;

use crate::hint::HintSlot;
use crate::shared::BoardSlot;

/// Configuration of [`SokuCc`](crate::SokuCc); the defaults need no tuning.
///
/// Build every field from [`Default`]: `SokuCcConfig { rate_cap_bps: Some(50_000_000),
/// ..SokuCcConfig::default() }`.
#[derive(Debug, Clone)]
pub struct SokuCcConfig {
    /// Window before anything is measured, in bytes (quinn's default: 14720).
    pub initial_window: u64,
    /// Hard rate cap in bits per second (scp's `-l`); `None` for no cap. The window
    /// never exceeds `cap x min_rtt`, so the long-run rate stays at or below it.
    pub rate_cap_bps: Option<u64>,
    /// Yield to other traffic: a smaller window gain, and back off when the RTT shows
    /// a standing queue, not only on heavy loss.
    pub background: bool,
    /// Window gain at steady state, applied to the bandwidth-delay product.
    pub cwnd_gain: f64,
    /// Bytes of queue every flow keeps in its probe-bw window, as this rate (bits/s)
    /// times the min RTT (at most half a BDP): what makes flows sharing a bottleneck
    /// converge to equal shares (see `SokuCc::queue_share`). 0 turns it off.
    pub queue_share_bps: u64,
    /// Extra window gain during the one probing round of each cycle.
    pub probe_gain: f64,
    /// Window cap during startup, in bandwidth-delay products, on a bandwidth estimate
    /// refreshed after every batch of acks. 2 is BBRv3's startup cwnd gain: at most two
    /// BDP in flight once the link is full, what a one-BDP buffer absorbs (BBR's 2/ln 2
    /// put up to 2.9 BDP in flight and overflowed such buffers).
    pub startup_gain: f64,
    /// Loss share of a round above which the round counts as congestion, when it is
    /// also half of this beyond what the path loses at random (`SokuCc::path_loss`);
    /// careful resume retreats from a jump that loses more than this.
    pub loss_threshold: f64,
    /// How far the in-flight bound drops after a congested round (BBRv2's beta).
    pub loss_beta: f64,
    /// Rounds over which the bandwidth max filter looks back.
    pub bw_window_rounds: u64,
    /// How long a min-RTT sample stays valid before a probe-RTT phase refreshes it, on
    /// paths whose min RTT is at most a fortieth of it; longer paths keep it forty round
    /// trips (see `model/probe_rtt.rs`).
    pub min_rtt_window: Duration,
    /// The same for the connection's first probe-RTT, once startup is over; for a flow
    /// whose min RTT has since fallen an eighth below startup's, also the longest the
    /// first probe-RTT waits after startup (see `model.rs`). Stretched to forty round
    /// trips on long paths as `min_rtt_window` is, except in background mode.
    pub first_min_rtt_window: Duration,
    /// Probe-RTT phases in a row that must all see a longer RTT before the min RTT is
    /// raised to it (1: BBR's rule, every probe's minimum is taken as it is).
    pub min_rtt_raise_probes: u32,
    /// How long probe-RTT holds the smaller window.
    pub probe_rtt_duration: Duration,
    /// Seed for the choice of probe phases (connections that start together with
    /// different seeds probe at different times).
    pub seed: u64,
    /// What the application learns late: a remembered path for careful resume
    /// ([`crate::resume`], never used in background mode), and background mode itself
    /// (see [`SokuCcConfig::in_background`]). Empty by default.
    pub hint: HintSlot,
    /// Where the flows on this connection's path share their min RTT
    /// ([`crate::shared`]); empty (no sharing) by default.
    pub board: BoardSlot,
    /// Whether a sender whose path stopped acknowledging probes it every half second
    /// instead of on quinn's doubling probe timeout ([`crate::stall`]). `window()` has
    /// no clock of its own, so this reads the wall clock: off by default, so that
    /// simulations on a synthetic clock are not touched; `soku-transport` turns it on.
    pub stall_probes: bool,
    /// Ack-eliciting packets the peer receives before it acknowledges (RFC 9000
    /// §13.2.2 recommends 2, quinn's default; `soku-transport` asks its peer for 10
    /// through the ACK frequency extension, draft-ietf-quic-ack-frequency). A round
    /// with fewer packets is acknowledged on the peer's ack timer (`max_ack_delay`,
    /// 25 ms), so its RTT carries the timer and says nothing of a queue.
    pub ack_every_packets: u32,
}

impl Default for SokuCcConfig {
    fn default() -> Self {
        Self {
            initial_window: 14_720,
            rate_cap_bps: None,
            background: false,
            // Tried with the queue share: 1.0 (the draft's ProbeBW_CRUISE gain) gave
            // fairer shares in the path simulator (8 x 200 ms 21 % largest deviation
            // against 30 %) but cost single flows their headroom for late acks
            // (100 Mbit/s x 100 ms, 1 % loss, ack jitter 0-50 ms: 95.8 -> 89.3 %) and
            // let a background flow take 31 % instead of 0.4 % next to a normal one.
            cwnd_gain: 1.25,
            queue_share_bps: 5_000_000,
            probe_gain: 0.25,
            startup_gain: 2.0,
            loss_threshold: 0.10,
            loss_beta: 0.85,
            bw_window_rounds: 10,
            min_rtt_window: Duration::from_secs(10),
            // 5 s (BBRv2's ProbeRTT interval) evens out copies started together; not
            // yet the default, see lab/2026-11-24-many-at-once.
            first_min_rtt_window: Duration::from_secs(10),
            // 3 made steady-state sharing worse in the path simulator (same notes).
            min_rtt_raise_probes: 1,
            probe_rtt_duration: Duration::from_millis(200),
            seed: 0x5045_4b55,
            hint: HintSlot::new(),
            board: BoardSlot::new(),
            stall_probes: false,
            ack_every_packets: 2,
        }
    }
}

impl SokuCcConfig {
    /// The default configuration with a rate cap in bits per second.
    pub fn with_rate_cap(rate_cap_bps: u64) -> Self {
        Self { rate_cap_bps: Some(rate_cap_bps), ..Self::default() }
    }

    /// The default configuration in background (yielding) mode: steady gain 1.0, a
    /// smaller probe, no queue share of its own, its first probe-RTT as soon as startup
    /// ends, and a back-off when queueing delay builds.
    pub fn background() -> Self {
        Self::default().in_background()
    }

    /// This configuration in background mode (rate cap, seed and hint kept).
    pub fn in_background(&self) -> Self {
        Self {
            background: true,
            cwnd_gain: 1.0,
            probe_gain: 0.15,
            queue_share_bps: 0,
            first_min_rtt_window: BACKGROUND_FIRST_PROBE,
            ..self.clone()
        }
    }
}

/// How long a background flow's first probe-RTT waits for a lower RTT sample once
/// startup is over: half a second, so it comes right after startup, as LEDBAT++'s
/// initial slowdown does (draft-irtf-iccrg-ledbat-plus-plus §4.3), instead of the
/// default's ten seconds. A flow that started inside another flow's queue drains its
/// own share of it and sees how much of its baseline was its own queue. With ten
/// seconds, a first-copy background flow beside CUBIC (emulator, 100 Mbit/s x 50 ms)
/// held about 50 Mbit/s of bandwidth estimate until its probe, 15 s in, and CUBIC kept
/// 83.5-89.5 Mbit/s; with this, 90.9-94.7 (from `lab/2026-11-27-background-baseline`).
const BACKGROUND_FIRST_PROBE: Duration = Duration::from_millis(500);
