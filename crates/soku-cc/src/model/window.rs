//! The window each phase asks for: the model's bandwidth-delay product times the
//! phase's gain, plus the allowances for the sender's bursts, for acks that come in
//! clumps and for the flow's fixed share of the queue; then bounded by the loss bound,
//! the other flows' shares and the rate cap.

use std::time::{Duration, Instant};

use super::{bytes_in, Mode, SokuCc, CYCLE_LEN, MIN_WINDOW_PACKETS};

/// quinn's pacer releases the window in bursts of this much time's worth, clamped to
/// `MIN_BURST_PACKETS..=MAX_BURST_PACKETS` packets (quinn-proto `connection/pacing.rs`),
/// and quinn sends up to 10 datagrams per GSO call (quinn `MAX_TRANSMIT_SEGMENTS`).
const PACER_BURST: Duration = Duration::from_millis(2);
const MIN_BURST_PACKETS: u64 = 10;
const MAX_BURST_PACKETS: u64 = 256;
/// Sender bursts of headroom in every model-derived window (BBRv3's quantization
/// budget is three send quanta; two of quinn's larger bursts cover the same ground).
const BURST_ALLOWANCE: u64 = 2;
/// Rounds over which the ack-aggregation estimate is a max (BBR: 10).
const EXTRA_ACKED_ROUNDS: u64 = 10;
/// The ack-aggregation allowance never exceeds this much time at the estimated
/// bandwidth (Linux BBR's `bbr_extra_acked_max_us`).
const EXTRA_ACKED_MAX: Duration = Duration::from_millis(100);
/// At most this share of the BDP goes into [`SokuCc::queue_share`], so a flow alone on
/// a slow link does not queue more than the 1.25 cruise gain it replaces did.
const QUEUE_SHARE_MAX_BDP: f64 = 0.5;
/// While other flows write the path's board ([`crate::shared`]), the ack-aggregation
/// allowance is at most the BDP divided by this. The allowance keeps the link busy while
/// a flow waits for acks that come in clumps; with others on the bottleneck their queue
/// does that, and each flow's allowance, estimated from its own clumps (a loaded host
/// delays acks by milliseconds, much of a 20 ms round trip), set the flows' shares apart.
/// Four copies each way at 100 Mbit/s x 20 ms through the emulator, fastest against
/// slowest per direction: 6-40 % (10 of 24 within 20 %) at full allowance, 9-27 % (15
/// of 18) with this cap (from `lab/2026-11-25-many-at-once`). On long paths the cap
/// seldom binds. Halving the allowance instead did as well at 20 ms but worse on a
/// 200 ms path in the path simulator (four flows: 23 % largest deviation against 14 %).
const SHARED_AGGREGATION_BDP_DIVISOR: u64 = 8;
/// The most random loss a window is lifted for ([`SokuCc::loss_lift`]): a third more in
/// flight at most.
const MAX_LIFTED_LOSS: f64 = 0.25;

impl SokuCc {
    /// Bytes the window carries to ride out ack aggregation: the most data acknowledged
    /// beyond what the bandwidth estimate explains within one aggregation epoch, over
    /// the last ten rounds, capped at 100 ms at the estimated bandwidth, and at an
    /// eighth of the BDP while other soku flows share the path (see
    /// `SHARED_AGGREGATION_BDP_DIVISOR`).
    pub fn ack_aggregation(&self) -> u64 {
        match (self.extra_acked.get(), self.max_bw.get()) {
            (Some(extra), Some(bw)) => {
                let allowance = extra.min(bytes_in(bw, EXTRA_ACKED_MAX));
                match (self.others_now, self.min_rtt) {
                    (true, Some(rtt)) => {
                        allowance.min(bytes_in(bw, rtt) / SHARED_AGGREGATION_BDP_DIVISOR)
                    }
                    _ => allowance,
                }
            }
            _ => 0,
        }
    }

    /// Bytes of headroom for the sender's own bursts: two of quinn's pacer bursts
    /// (2 ms at the estimated bandwidth, 10 to 256 packets), so a window that is
    /// nearly full still admits a whole GSO batch and acks arriving while one burst is
    /// out do not stall the next.
    pub fn burst_allowance(&self) -> u64 {
        let burst = self.max_bw.get().map_or(0, |bw| bytes_in(bw, PACER_BURST));
        BURST_ALLOWANCE * burst.clamp(MIN_BURST_PACKETS * self.mtu, MAX_BURST_PACKETS * self.mtu)
    }

    pub(super) fn min_window(&self) -> u64 {
        MIN_WINDOW_PACKETS * self.mtu
    }

    /// Bandwidth-delay product in bytes, once both estimates exist.
    pub(super) fn bdp(&self) -> Option<u64> {
        let bw = self.max_bw.get()?;
        let rtt = self.min_rtt?;
        u64::try_from(u128::from(bw) * rtt.as_nanos() / 1_000_000_000).ok()
    }

    /// `gain x BDP` plus the burst allowance, in bytes in flight: lifted by
    /// [`loss_lift`](Self::loss_lift), since packets the path loses at random are in
    /// flight too.
    pub(super) fn gained(&self, gain: f64) -> Option<u64> {
        self.bdp().map(|bdp| (bdp as f64 * gain * self.loss_lift()) as u64 + self.burst_allowance())
    }

    /// How much more than the delivery rate must be in flight for the path to deliver
    /// at that rate: `1 / (1 - path_loss)`. The bandwidth estimate counts what was
    /// delivered, a window every packet sent until it is acknowledged or declared lost:
    /// with random loss a window of one BDP sends below the rate it was built on, and
    /// each probe-bw cycle's draining round left the link idle for that share of a
    /// round (path simulator, `random_loss_costs_only_the_lost_packets`).
    /// [`path_loss`](Self::path_loss) rises only with loss that comes at every rate, so
    /// congestion (a policer, a full queue) lifts nothing; and never above
    /// `MAX_LIFTED_LOSS`.
    pub(super) fn loss_lift(&self) -> f64 {
        1.0 / (1.0 - self.path_loss().min(MAX_LIFTED_LOSS))
    }

    /// [`gained`](Self::gained) plus the ack-aggregation allowance: the window of every
    /// phase that keeps the pipe full (BBR's `max_inflight`).
    pub(super) fn target(&self, gain: f64) -> Option<u64> {
        self.gained(gain).map(|w| w + self.ack_aggregation())
    }

    /// BBR's ack-aggregation estimate (draft-cardwell-iccrg-bbr-congestion-control
    /// §4.5.5, Linux `bbr_update_ack_aggregation`): an epoch starts whenever the acks
    /// fall behind `bw x time`; the bytes acknowledged beyond that within the epoch
    /// are data the receiver or the path held back and released at once (delayed and
    /// stretched acks, Wi-Fi and GRO aggregation, a sender or receiver descheduled for
    /// a while). Without that much extra window the sender stalls until the next
    /// burst of acks.
    pub(super) fn update_ack_aggregation(&mut self, now: Instant) {
        let acked = std::mem::take(&mut self.batch_acked);
        let Some(bw) = self.max_bw.get() else {
            return;
        };
        if acked == 0 {
            return;
        }
        let start = *self.ack_epoch_start.get_or_insert(now);
        let mut expected = bytes_in(bw, now.saturating_duration_since(start));
        if self.ack_epoch_delivered <= expected {
            self.ack_epoch_delivered = 0;
            self.ack_epoch_start = Some(now);
            expected = 0;
        }
        self.ack_epoch_delivered += acked;
        let extra = self.ack_epoch_delivered.saturating_sub(expected).min(self.window);
        // In startup the bandwidth estimate lags: remember only the last round.
        self.extra_acked.set_window(if self.filled_pipe { EXTRA_ACKED_ROUNDS } else { 1 });
        self.extra_acked.update(extra, self.delivery.round());
    }

    pub(super) fn cycle_gain(&self) -> f64 {
        match self.cycle_index {
            0 => self.config.cwnd_gain + self.config.probe_gain,
            1 => 1.0_f64.min(self.config.cwnd_gain),
            _ => self.config.cwnd_gain,
        }
    }

    pub(super) fn probe_rtt_window(&self) -> u64 {
        self.bdp().map_or(self.min_window(), |b| b / 2).max(self.min_window())
    }

    /// The bandwidth a cruising round's window is built on: the best whole-round
    /// delivery rate of the last cycle (bytes delivered *or lost* over the round's
    /// time, so random loss does not shrink it), never above the max filter. `None`
    /// until a full cycle of probe-bw rounds, none of them app-limited, is known.
    ///
    /// Why not the max filter, as BBR cruises on: its peak comes from the probe round's
    /// acks and from moments other flows drained (probe-RTT, their own drain rounds),
    /// and how far it overshoots a flow's actual rate differs from flow to flow (traced
    /// in the path simulator, 8 flows x 200 ms: 7 % for one flow, 31 % for another at
    /// the same time). A flow's window, and so its share of a full queue, follows that
    /// overshoot, so a lucky sample stayed a larger share. A whole round's rate is
    /// what the flow actually got. (The draft's BBRv3 bounds, `bw_lo`/`inflight_lo`,
    /// also keep cruise below the max filter, but only after loss.)
    pub fn cruise_bw(&self) -> Option<u64> {
        if self.round_rates.len() < CYCLE_LEN {
            return None;
        }
        let best = self.round_rates.iter().try_fold(0u64, |m, r| r.map(|r| m.max(r)))?;
        Some(best.min(self.max_bw.get()?))
    }

    /// Bytes every probe-bw window holds beyond `gain x BDP` (in place of the burst
    /// allowance when larger): `queue_share_bps x min_rtt`, at most half a BDP.
    ///
    /// A window of `gain x bw x min_rtt` keeps in the bottleneck queue a share
    /// proportional to the flow's own rate, and a FIFO queue serves flows in
    /// proportion to what they hold in it: every split of the link is then an
    /// equilibrium, and shares drift (draft-cardwell-iccrg-bbr-congestion-control
    /// relies on probing to move them, which on long paths is slow: 200 ms rounds
    /// and a 10-round filter). A fixed number of bytes per flow in the queue, TCP
    /// Vegas's `alpha` (Brakmo and Peterson, 1995; FAST TCP's too), has one
    /// equilibrium, equal rates: each flow's `rate x queueing delay` equals the same
    /// `alpha`. The share scales with the min RTT, as the noise it must outweigh does
    /// (the bandwidth estimate's error times the min RTT).
    ///
    /// Path simulator (`u_fairness_sweep`), 100 Mbit/s, one-BDP buffer, flows started
    /// 1 s apart, s 30-60, ten seed sets with jittered starts, largest deviation from
    /// the mean share, mean over the seeds, cruising on `cruise_bw`: without the queue
    /// share 4 x 100 ms 23.1 %, 4 x 200 ms 42.6 %, 8 x 100 ms 22.3 %, 8 x 200 ms 67.4 %;
    /// with 5 Mbit/s x min RTT 14.0 %, 24.5 %, 18.8 %, 29.6 % (20 ms paths unchanged:
    /// there the burst allowance is larger). Capped at a quarter BDP instead of half,
    /// the cap binds for 8 flows, the share turns proportional again and 8 x 200 ms is
    /// back at 51.6 %. Costs: a flow alone on a slow link queues more (10 Mbit/s x
    /// 100 ms: 49.8 -> 75.6 ms mean queueing delay), and 8 flows x 200 ms hold about
    /// 1 MB more in the bottleneck.
    pub fn queue_share(&self) -> u64 {
        let (Some(rtt), Some(bdp)) = (self.min_rtt, self.bdp()) else {
            return 0;
        };
        let share = bytes_in(self.config.queue_share_bps / 8, rtt);
        share.min((bdp as f64 * QUEUE_SHARE_MAX_BDP) as u64)
    }

    /// What [`queue_share`](Self::queue_share) adds to a window that already carries
    /// the burst allowance.
    pub(super) fn queue_share_extra(&self) -> u64 {
        self.queue_share().saturating_sub(self.burst_allowance())
    }

    /// The window of a cruising round: `cwnd_gain x cruise_bw x min_rtt` plus the
    /// allowances; `None` while [`cruise_bw`](Self::cruise_bw) is unknown.
    pub(super) fn cruise_window(&self) -> Option<u64> {
        let bw = self.cruise_bw()?;
        let bdp = bytes_in(bw, self.min_rtt?);
        Some(
            (bdp as f64 * self.config.cwnd_gain) as u64
                + self.burst_allowance()
                + self.ack_aggregation()
                + self.queue_share_extra(),
        )
    }

    /// Recompute the window from the model, the loss bound and the rate cap.
    pub(super) fn update_window(&mut self) {
        let model = match self.mode {
            Mode::Startup => {
                // No ack-aggregation allowance here: in startup it only measures how
                // far the bandwidth estimate trails the doubling window.
                let mut cap = self.gained(self.config.startup_gain).unwrap_or(u64::MAX);
                if self.resume.in_jump() {
                    // The bandwidth estimate still comes from the few packets sent
                    // before the jump.
                    cap = cap.max(self.resume.step());
                }
                self.window.min(cap)
            }
            // Drain aims at one BDP in flight; ack aggregation would only delay that.
            Mode::Drain => self.gained(1.0).unwrap_or(self.window),
            // Cruising rounds (index 2..8) on the recent rounds' rate, probing and
            // draining rounds on the max filter, as the draft does.
            Mode::ProbeBw => match self.cruise_window() {
                Some(w) if self.cycle_index >= 2 => w,
                _ => self
                    .target(self.cycle_gain())
                    .map_or(self.window, |w| w + self.queue_share_extra()),
            },
            Mode::ProbeRtt => self.probe_rtt_window(),
        };
        let mut window = model;
        if let Some(hi) = self.inflight_hi {
            window = window.min(hi);
        }
        // A policed path, or a policer candidate under test: the policer's rate, with no
        // allowances on top ([`crate::policer`]).
        if let Some(cap) = self.policer.window() {
            window = window.min(cap);
        }
        if let (Mode::ProbeBw, Some(cap)) = (self.mode, self.ensemble_cap) {
            window = window.min(cap);
        }
        if let (Some(cap), Some(rtt)) = (self.config.rate_cap_bps, self.min_rtt) {
            let cap_window = u128::from(cap / 8) * rtt.as_nanos() / 1_000_000_000;
            window = window.min(u64::try_from(cap_window).unwrap_or(u64::MAX));
        }
        self.window = window.max(self.min_window());
    }
}
