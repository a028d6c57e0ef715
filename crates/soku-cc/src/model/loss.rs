//! Which rounds count as congestion, and the loss bound on bytes in flight they set
//! (a simplified BBRv2 `inflight_hi`, see the module docs of [`crate::model`]).

use std::time::Duration;

use crate::coexist::Coexist;
use crate::delivery::RoundSample;
use crate::policer::Change;
use crate::queue_loss;

use super::{Mode, SokuCc, MIN_LOSS_PACKETS};

/// The loss bound is raised at most once per round and once per this much time: per
/// round alone, a 0.2 ms LAN path raised it every few milliseconds and overflowed a
/// 32-packet switch buffer again each time (path simulator: 7.2 % of packets dropped,
/// 1.6 % with this spacing; 300 ms was too slow to recover from loss bursts).
const HI_RAISE_SPACING: Duration = Duration::from_millis(100);
/// RFC 9438's multiplicative decrease (`beta_cubic`): the loss bound after a round
/// that lost at the top of the queue ([`crate::queue_loss`]).
const OVERFLOW_BETA: f64 = 0.7;
/// LEDBAT's decrease on loss (RFC 6817 §2.4.2, half the window), for a background flow.
const BACKGROUND_OVERFLOW_BETA: f64 = 0.5;
/// While a background flow's bound grows back after a cut for a shallow queue, it grows
/// by at most this share of itself per round (see `update_inflight_hi`).
const BACKGROUND_RAISE_DIVISOR: u64 = 4;
/// Loss share beyond the path's own above which a round sent in cruise that met a
/// standing queue of half a min RTT counts as congestion (BBRv2's `BBRLossThresh`;
/// see `round_congested`).
const SHARED_QUEUE_LOSS_THRESHOLD: f64 = 0.02;
/// The first cycle index whose round is judged by that rule: the round's packets left
/// in the round before (index 3, the second cruising round), when the queue our own
/// probe (index 0) built has drained (index 1) and the first cruising round's acks
/// (index 2) no longer carry it.
const FIRST_CRUISE_CHECK: usize = 4;
/// Rounds over which [`SokuCc::path_loss`] is the least loss share: two probe-bw
/// cycles, so it spans two draining rounds and two probing ones.
const PATH_LOSS_ROUNDS: usize = 16;
/// A round must carry this many packets for its loss share to count in
/// [`SokuCc::path_loss`]: with fewer, a round without a single loss is likely at any
/// random loss under a few percent.
const PATH_LOSS_MIN_PACKETS: u64 = 50;
/// Startup's rounds pool into samples of at least this many packets for
/// [`SokuCc::path_loss`]. Its first rounds hold 50-100 packets, whose shares stray by a
/// third of the path's loss and more, and the floor, the least of them, stayed there for
/// the rounds after startup: 1.5 % on a 10 % path on the emulator (100 ms, 400 MiB), and
/// in the path simulator a median of 7 % at 10 % and 2.4 % at 5 % when startup ended.
/// The first cruising rounds then read random loss as congestion and cut the loss bound:
/// twice to 0.64 of the BDP on that emulated copy. Pooled, the floor at startup's end
/// came near the path's loss and no such cut was left in the simulator
/// (`lab/2026-12-01-startup-floor`).
const STARTUP_PATH_LOSS_PACKETS: u64 = 4 * PATH_LOSS_MIN_PACKETS;
/// A round's loss share within this many standard deviations of the path's loss
/// share (binomial over the round's packets) is noise.
const LOSS_NOISE_SIGMAS: f64 = 2.0;
/// The same for a startup round against startup's earlier rounds
/// ([`SokuCc::startup_excess`]). Losses are declared in clumps, as acknowledgements
/// arrive (one per ten packets, `soku-transport`), and a round's boundary cuts through
/// them, so a round's share can stray further than the binomial says: at two standard
/// deviations one of two emulated copies at 100 Mbit/s x 300 ms with 20 % random loss
/// still left startup at 424 kB. Startup judges a few small rounds, each once.
const STARTUP_LOSS_NOISE_SIGMAS: f64 = 3.0;

impl SokuCc {
    /// Whether an RTT sample is at the top of the recent RTT range
    /// ([`crate::queue_loss`]); `None` while the range is too narrow to tell.
    fn queue_top(&self, rtt: Duration) -> Option<bool> {
        let min = self.min_rtt?;
        let max = self.rtt_top.get().or(self.round_max_rtt)?;
        queue_loss::at_top(rtt, min, max)
    }

    /// Classes the `bytes` an ack frame acknowledged by the frame's smallest RTT
    /// sample `rtt` for [`crate::queue_loss`]. One sample per frame, as for the min RTT:
    /// the packets a frame acknowledges share its ack delay, and the first of them
    /// carries all of it. Nor does a frame of a single packet count, or one in
    /// probe-RTT: a receiver that has one packet to acknowledge waits for its ack
    /// timer (25 ms in quinn), so such frames come when the sender paused (probe-RTT,
    /// the end of a burst) and carry the timer. The round's smallest RTT that the loss
    /// bound's rules judge a queue by takes only frames of as many packets as the peer
    /// acknowledges at once (`ack_every_packets`; see `acked_on_the_peers_timer`):
    /// leaving out every smaller frame here too found the loss at the top of a shallow
    /// queue less often (beside Linux's CUBIC at 50 ms soku fell to 15 % of the link,
    /// and a background flow stayed at 1.4 % after CUBIC left a one-BDP buffer). Per
    /// packet, and with those frames, the
    /// top of the RTT range lay 25 ms above the full queue (112 ms on a 70 ms path
    /// with 17.5 ms of buffer); the full queue's samples fell below the top, the loss
    /// was found to be no longer the queue's, and the bound went back to its doubling
    /// steps (path simulator, beside CUBIC at 70 ms: soku kept 76 % of what the two
    /// carried, 42 % with this).
    ///
    /// In startup, only frames of the full count set the round's largest sample, which
    /// the top of the range is taken from ([`crate::rtt_top`]): startup's first rounds
    /// are a few dozen packets, the frame at each one's tail waits for the peer's ack
    /// timer, and with it the top stood a timer above the full queue (143-145 ms on a
    /// 100 ms path whose buffer holds 25 ms, emulator, joining CUBIC in a quarter-BDP
    /// buffer). Startup's losses at the queue's top were then classed below it, the
    /// bound its end set grew back by the doubling steps instead of CUBIC's function,
    /// and twice more in the next seconds the steps overflowed the queue and cut CUBIC
    /// (`lab/2026-11-30-startup-into-cubic`). A background flow keeps every frame:
    /// its startup ends at the first loss or rise of the RTT, in rounds too small for
    /// frames of the full count, and without their samples it took a 100 ms path back
    /// more slowly after CUBIC left (path simulator: 65 % of the link in the 3-8 s
    /// after for four seeds of eight, 95-97 % with them).
    pub(super) fn classify_frame(&mut self, rtt: Duration, bytes: u64) {
        if self.mode == Mode::ProbeRtt || bytes <= self.mtu {
            return;
        }
        let full = bytes >= self.peer_ack_bytes();
        if full || self.mode != Mode::Startup || self.config.background {
            self.round_max_rtt = Some(self.round_max_rtt.map_or(rtt, |m| m.max(rtt)));
        }
        if full {
            self.round_frame_min = Some(self.round_frame_min.map_or(rtt, |m| m.min(rtt)));
        }
        self.frame_rtt = Some(rtt);
        if let Some(top) = self.queue_top(rtt) {
            self.queue_loss.on_acked(bytes, top);
        }
        if let Some(min) = self.min_rtt {
            self.nice.on_frame(rtt, bytes, min);
        }
    }

    /// Classes `bytes` lost by the RTT of the latest ack frame, which revealed the loss.
    pub(super) fn classify_loss(&mut self, bytes: u64) {
        if let Some(top) = self.frame_rtt.and_then(|rtt| self.queue_top(rtt)) {
            self.queue_loss.on_lost(bytes, top);
        }
    }

    /// Whether round `s` was congested: a loss share above `loss_threshold`, or one of
    /// the rules for moderate loss below.
    pub(super) fn round_congested(&self, s: &RoundSample) -> bool {
        // A round acknowledged in or just after probe-RTT lost what was sent before the
        // window shrank, and the bound would be cut to the probe's small window: after
        // probe-RTTs that sharing the min RTT lines up (`crate::shared`), three of four
        // flows on a 200 ms path were cut to a third of their share that way at once and
        // the fourth took 60 % of the link (path simulator). The next round judges.
        if self.mode == Mode::ProbeRtt || s.round <= self.probe_rtt_last_round {
            return false;
        }
        // Nor does a round that reports the losses of a jump the path did not carry:
        // the retreat already answered them, and drain's window, cut by the loss
        // factor, held a 100 Mbit/s x 200 ms path at a tenth of its BDP for seconds
        // after a ten-times stale memory (path simulator).
        if s.round <= self.jump_last_round {
            return false;
        }
        // Nor while a policer candidate is tested: the test judges those rounds, and a
        // bound cut to what the first of them held would hide the rate under test.
        if self.policer.testing() {
            return false;
        }
        if self.queue_overflowed(s) || self.rate_congested(s) {
            return true;
        }
        if s.lost < MIN_LOSS_PACKETS * self.mtu {
            return false;
        }
        // Nor a startup round whose loss the path's own loss share cannot yet be told
        // from: before the floor is known (four rounds of 50 packets), in a round of
        // under 200 packets that met no queue. Random loss of 20 % took a round of 90
        // packets over the 10 % threshold, beyond its noise, and ended startup at a
        // hundred packets: on 100 Mbit/s x 1 s a flow held 1.9 % of the link over its
        // first 40 s, and at 300 ms 55-67 % with 10-20 % random loss, against 52 % and
        // 71-82 % now (path simulator). A queue, a background flow, a round large
        // enough to judge alone, or a known floor keep the rules below; startup still
        // ends when the delivery rate stops growing or the RTT rises.
        if self.mode == Mode::Startup
            && self.loss_floor().is_none()
            && !self.config.background
            && (s.delivered + s.lost) / self.mtu < 4 * PATH_LOSS_MIN_PACKETS
            && self.queue_free(s)
        {
            return false;
        }
        let loss = s.loss_fraction();
        // Loss alone: a share above `loss_threshold` that is also well above what the
        // path loses at random.
        let excess = match self.startup_excess(s) {
            Some(excess) => excess,
            None => self.excess_loss(s, self.half_queued(s)),
        };
        if loss > self.config.loss_threshold && excess > self.config.loss_threshold / 2.0 {
            return true;
        }
        // Moderate loss together with a standing queue is congestion, not noise.
        // A background flow also takes moderate loss for congestion once its round shows
        // an eighth of the baseline in queue: that is a full queue overflowing when the
        // flow started inside another flow's queue and measures the rest of it only
        // (CUBIC's full 1-BDP queue at 50 ms read 100 against a baseline of 76-89 ms,
        // under the half that the rule asked before). With random loss and no queue it
        // still holds its rate. On the emulator, CUBIC then a first-copy background
        // flow, 100 Mbit/s x 50 ms, four runs alternated: CUBIC kept 77.6-90.9 Mbit/s
        // (median 86.9) with the half, 89.5-91.2 (median 90.0) with the eighth.
        if self.config.background {
            let queued = match (s.min_rtt, self.queue_baseline()) {
                (Some(round_min), Some(base)) => round_min > base + base / 8,
                _ => false,
            };
            return queued && self.excess_loss(s, true) > self.config.loss_threshold / 3.0;
        }
        let queued = self.half_queued(s);
        // At full speed, only in a cruising round. Our own probe queue plus random
        // loss would trip this rule in the probing round and the two after it (with
        // `loss_threshold / 3` in every round, 5 % random loss fell from 93 % to 83 %),
        // but in cruise our window (1.25 BDP plus allowances) cannot hold half a min
        // RTT of queue on its own: a round sent in cruise whose *smallest* RTT still
        // shows that much queue met someone else's queue, and its loss is that queue
        // overflowing, not noise. Then BBRv2's loss threshold applies
        // (draft-cardwell-iccrg-bbr-congestion-control-02 §4.5.10.2, `BBRLossThresh`,
        // 2 %), on top of what the path loses at random, instead of the 10 % that
        // random loss needs.
        //
        // Why (path simulator, `tests/path_sim.rs`, 100 Mbit/s, one-BDP drop-tail
        // buffer, staggered starts, seconds 30-60, three seeds): flows sharing a full
        // queue lose ~2-4 % of their packets, under the 10 % threshold on average, so
        // a flow's bound was cut only when the sampling noise of its own round crossed
        // 10 %, which is likelier the fewer packets a round holds: small flows were
        // cut most often (4 x 20 ms: 165 cuts for the 15 % flow, 115-131 for the 28 %
        // ones), a force away from fairness. Raising the bound additively (a constant
        // step instead of an eighth of the bound) or cutting harder (beta 0.7) did not
        // help; reacting at 2 % did. Largest deviation from the mean share, mean over
        // three seeds, before -> after: 4 flows x 20 ms 24.8 % -> 16.2 %, 8 x 20 ms
        // 37.9 % -> 19.7 %, 8 x 100 ms 49.7 % -> 18.4 %, 4 x 100 ms 20.8 % -> 20.3 %;
        // queue drops 4.4 % -> 3.5 % (8 x 20 ms). Single flows with 1-5 % random loss
        // are unchanged (their cruise rounds show no such queue).
        self.mode == Mode::ProbeBw
            && self.cycle_index >= FIRST_CRUISE_CHECK
            && queued
            && self.excess_loss(s, true) > SHARED_QUEUE_LOSS_THRESHOLD
    }

    /// Whether round `s`'s smallest RTT was in the lower quarter of the recent RTT
    /// range: the queue drained to a quarter of its depth at some point of the round.
    /// A range too narrow to tell a queue by ([`queue_loss::at_top`]) is no queue, so
    /// low: a flow alone sees only its own few packets of queue, a quarter of which is
    /// inside the ack noise (path simulator, CUBIC gone from a quarter-BDP buffer: the
    /// bound stopped growing at 89 % of the link at 50 ms, 77 % at 100 ms, the range
    /// 0.4 ms). Once an overflow showed the queue's depth ([`crate::nice`]), low is
    /// under Nice's threshold instead, as LEDBAT grows only under its target (RFC 6817
    /// §2.4.2): a queue standing above it is what Nice's rule cuts for, and growth
    /// there undid the cuts (on the emulator, beside CUBIC at 50 ms, a background copy
    /// held 40 % of the link with the queue 3 ms up, under the quarter of a range
    /// too narrow to tell). A round acknowledged on the peer's timer tells nothing of
    /// the queue (`background_queue`) and counts as low, so that the bound grows to
    /// rounds that tell.
    fn queue_low(&self, s: &RoundSample) -> bool {
        if self.acked_on_the_peers_timer() {
            return true;
        }
        let (Some(min), Some(max), Some(round_min)) = (self.min_rtt, self.rtt_top.get(), s.min_rtt)
        else {
            return false;
        };
        if let Some(threshold) = self.nice.threshold(min) {
            return round_min <= threshold;
        }
        if queue_loss::at_top(round_min, min, max).is_none() {
            return true;
        }
        round_min <= min + max.saturating_sub(min) / 4
    }

    /// Whether another flow cut its window at an overflow that round `s` lost nothing
    /// in: the queue stood at the top of the RTT range (`min` to `max`) through the
    /// round before, and fell to the lower half of it in this one, while our own window
    /// did not shrink (not the draining round of the cycle nor the one after it, not
    /// probe-RTT nor the round after).
    ///
    /// Why: a drop-tail buffer drops whichever packets arrive while it is full, and
    /// those are mostly the packets of the flow whose window is growing into it, not of
    /// a paced flow holding its window: beside CUBIC in a quarter-BDP buffer, CUBIC
    /// was cut again and again at overflows where soku lost nothing, and at 30-50 ms
    /// soku kept 55-77 % of what the two carried, 48-64 % with this (path simulator,
    /// four seeds; 20 ms stays at 77-78 %). A queue that empties by half its depth
    /// within a round means a flow sharing it cut its window, which a loss-based flow
    /// does at an overflow; answering it as a loss of our own is what two CUBIC flows
    /// whose drops are shared do. A flow that leaves drains the queue too, and costs us
    /// a cut that the CUBIC growth takes back.
    fn shared_overflow(&self, s: &RoundSample, min: Duration, max: Duration) -> bool {
        let (Some(prev), Some(now)) = (self.last_round_min_rtt, s.min_rtt) else {
            return false;
        };
        let range = max.saturating_sub(min);
        prev >= min + range.mul_f64(queue_loss::TOP)
            && now <= min + range / 2
            && !matches!(self.cycle_index, 1 | 2)
            && s.round > self.probe_rtt_last_round + 1
    }

    /// Whether round `s` lost at the top of a shallow queue beyond what the path loses
    /// below it ([`crate::queue_loss`]): the losses that acks at the top of the RTT
    /// range revealed, less the share lost below the top times the round's packets at
    /// the top, come to at least one packet and to two standard deviations of that
    /// share's sampling noise.
    ///
    /// Why: a drop-tail buffer of a quarter of the bandwidth-delay product holds a
    /// queue of a quarter of a min RTT at most, so the half-min-RTT rule for a shared
    /// queue (see `round_congested`) never sees it, and the ~3.5 % it dropped of soku's
    /// packets stayed under the 10 % rule: beside one CUBIC flow (path simulator,
    /// 100 Mbit/s, 50 and 100 ms) soku took 96-97 % of the link and CUBIC 0.5-1.7 %.
    /// Any such loss counts, as it does for CUBIC (RFC 9438) and Reno: CUBIC meets
    /// the overflow a few packets at a time and gives way each time, and a flow that
    /// waited for 2 % of a round kept the queue full and CUBIC at 4-5 %. Only for
    /// shallow queues: where the RTT range reaches half a min RTT, the shared-queue
    /// rule judges, as it did. Once the loss at the top is found to be the queue's, a
    /// queue drained by another flow's cut counts too (`shared_overflow`). Startup's
    /// rounds count as well: a flow that joins a queue another flow keeps full overflows
    /// it from its first rounds, and waiting for a round to lose 10 % let the window
    /// double into it once more.
    fn queue_overflowed(&self, s: &RoundSample) -> bool {
        if !matches!(self.mode, Mode::ProbeBw | Mode::Startup) || s.round <= self.cut_round + 1 {
            return false;
        }
        let Some((min, max, below)) = self.shallow_queue_loss() else {
            return false;
        };
        if self.shared_overflow(s, min, max) {
            return true;
        }
        let c = self.last_queue_counts;
        let mtu = self.mtu as f64;
        let excess = (c.lost_top as f64 - below * c.top() as f64) / mtu;
        let top_packets = c.top() as f64 / mtu;
        let noise = LOSS_NOISE_SIGMAS * (below * (1.0 - below) * top_packets).sqrt();
        excess >= noise.max(1.0)
    }

    /// The RTT range (min, top) while it is a shallow queue's (under half a min RTT
    /// deep) and the loss at its top is found to be the queue's, with the share lost
    /// below the top ([`crate::queue_loss`]).
    fn shallow_queue_loss(&self) -> Option<(Duration, Duration, f64)> {
        let (min, max) = (self.min_rtt?, self.rtt_top.get()?);
        if max > min + min / 2 {
            return None;
        }
        Some((min, max, self.queue_loss.top_excess()?))
    }

    /// Whether round `s` lost more than BBRv2's loss threshold beyond the share that
    /// rounds sending less lose, once loss is found to rise with what a round sends
    /// ([`crate::rate_loss`]): a policer's pattern, or a bottleneck's with no buffer to
    /// show a queue.
    ///
    /// Why: behind a token-bucket policer at half a 100 Mbit/s link, with no queue and
    /// no random loss, a round was congested only above the 10 % that random loss
    /// needs, so the bound climbed until its rounds lost that much and the flow lost
    /// 6.7 % of what it sent at 100 ms (3.1 % at 50 ms) while the policer detector,
    /// which needs intervals losing 25 %, never fired (path simulator,
    /// `tests/loss_sim.rs`).
    fn rate_congested(&self, s: &RoundSample) -> bool {
        // The round after a cut still reports what left before it (as in
        // `queue_overflowed`).
        if self.mode != Mode::ProbeBw
            || s.round <= self.cut_round + 1
            || s.lost < MIN_LOSS_PACKETS * self.mtu
        {
            return false;
        }
        let Some(below) = self.rate_loss_without_queue(s) else {
            return false;
        };
        let packets = ((s.delivered + s.lost) / self.mtu).max(1) as f64;
        let noise = LOSS_NOISE_SIGMAS * (below * (1.0 - below) / packets).sqrt();
        s.loss_fraction() - below - noise > SHARED_QUEUE_LOSS_THRESHOLD
    }

    /// Whether loss in round `s` rises with the rate with no queue to show for it: a
    /// finding of [`crate::rate_loss`], and the round's smallest RTT within an eighth
    /// of the min RTT (or 1 ms) of it, as a policer's is. A queue's loss is the queue
    /// rules' to judge: eight flows sharing a full one-BDP buffer at 20 ms, whose
    /// rounds that send more also lose more, shared it less evenly when this held
    /// without the queue (largest deviation from the mean share 17-26 % instead of
    /// 5-16 %, path simulator).
    fn rate_loss_without_queue(&self, s: &RoundSample) -> Option<f64> {
        let below = self.rate_loss.below_share()?;
        self.queue_free(s).then_some(below)
    }

    /// Whether round `s`'s smallest RTT stayed within an eighth of the min RTT (or
    /// 1 ms) of it: no queue to speak of ([`queue_loss::at_top`]'s narrowest range).
    fn queue_free(&self, s: &RoundSample) -> bool {
        match (s.min_rtt, self.min_rtt) {
            (Some(round_min), Some(min)) => {
                round_min < min + (min / 8).max(Duration::from_millis(1))
            }
            _ => false,
        }
    }

    /// Takes round `s` into [`crate::rate_loss`]'s classes. Rounds in or just after
    /// probe-RTT, or reporting a jump the path did not carry, lose what was sent
    /// before their window changed, and startup's rounds double: none of them tells
    /// what the rate a round sent costs.
    pub(super) fn record_rate_loss(&mut self, s: &RoundSample) {
        if self.mode != Mode::ProbeBw
            || s.round <= self.probe_rtt_last_round
            || s.round <= self.jump_last_round
        {
            return;
        }
        self.rate_loss.on_round(s.delivered, s.lost, self.mtu);
    }

    /// What round `s` lost beyond the path's own random loss: its loss share less
    /// [`SokuCc::path_loss`] less two standard deviations of sampling noise over the
    /// round's packets (binomial). Noise of the path's share if the round met a queue
    /// (`queued`, as the rule asking judges it): loss that follows a queue counts as soon as
    /// it is beyond the path's share. Noise of the round's own share if its RTT stayed
    /// near the floor: there, loss counts only when the round surely lost more than
    /// the path does at random, which keeps a flow whose window is still small (after
    /// startup ended early, or after a cut) from reading a few random losses as a high
    /// share. With no random loss known and a queue, this is the round's loss share,
    /// and every rule is the fixed-share rule it was.
    pub(super) fn excess_loss(&self, s: &RoundSample, queued: bool) -> f64 {
        let path = self.path_loss();
        let loss = s.loss_fraction();
        let packets = ((s.delivered + s.lost) / self.mtu).max(1) as f64;
        let level = if queued { path } else { path.max(loss) };
        let noise = LOSS_NOISE_SIGMAS * (level * (1.0 - level) / packets).sqrt();
        loss - path - noise
    }

    /// What startup round `s`, which met no queue, lost beyond the share that
    /// startup's earlier rounds lost together, less three standard deviations of the
    /// noise of both (binomial, at the larger share); `None` for other rounds, a
    /// background flow, or while the earlier rounds carried under
    /// `4 x PATH_LOSS_MIN_PACKETS` packets.
    ///
    /// Why not the path's share ([`SokuCc::path_loss`]): in startup it is the least
    /// share of a few rounds of 50-400 packets, which the noise of such small rounds
    /// puts well under the path's loss, so the next, larger round read random loss as
    /// its excess. With 10 % random loss, 100 Mbit/s x 300 ms and x 1 s, startup
    /// ended at 447-874 kB in 2 of 8 seeds (one of them with a floor of 4.3 % on the
    /// path's 10 %), and with 20 % in 4 of 8; the flows then took 40 s to grow to the
    /// link along the loss bound (path simulator). Startup's rounds double
    /// their rate, so a round against the rounds before it asks whether loss rises
    /// with the rate: random loss takes the same share of all of them, while a full
    /// shallow buffer or a policer drops nothing below its rate and a large share of
    /// the round that crosses it, which still counts.
    pub(super) fn startup_excess(&self, s: &RoundSample) -> Option<f64> {
        if self.mode != Mode::Startup || self.config.background || !self.queue_free(s) {
            return None;
        }
        let (delivered, lost) = self.startup_losses;
        let before = ((delivered + lost) / self.mtu) as f64;
        if before < (4 * PATH_LOSS_MIN_PACKETS) as f64 {
            return None;
        }
        let earlier = lost as f64 / (delivered + lost) as f64;
        let loss = s.loss_fraction();
        let packets = ((s.delivered + s.lost) / self.mtu).max(1) as f64;
        let level = earlier.max(loss);
        let noise = STARTUP_LOSS_NOISE_SIGMAS
            * (level * (1.0 - level) * (1.0 / packets + 1.0 / before)).sqrt();
        Some(loss - earlier - noise)
    }

    /// Whether round `s`'s smallest RTT shows a queue of half a min RTT.
    fn half_queued(&self, s: &RoundSample) -> bool {
        match (s.min_rtt, self.min_rtt) {
            (Some(round_min), Some(min)) => round_min > min + min / 2,
            _ => false,
        }
    }

    /// The path's own loss share: the least loss share of the last
    /// `PATH_LOSS_ROUNDS` rounds that carried at least `PATH_LOSS_MIN_PACKETS`
    /// packets, smaller rounds pooled until they do, and startup's until they carry
    /// `STARTUP_PATH_LOSS_PACKETS` (0 until four such samples are known).
    ///
    /// Why the least: random loss (a lossy radio hop, a dirty fibre) takes the same
    /// share of every round, whatever the rate; congestion loss rises with the rate
    /// and vanishes below the bottleneck's rate. The rounds of a probe-bw cycle send at
    /// different rates (the probing round at 1.5 BDP, the draining round at 1.0, the
    /// cruise between), and a loss bound, once cut, lowers them further: a policer
    /// drops nothing in the rounds that stay under its rate, and a full queue shared
    /// with a loss-based flow drops nothing while that flow backs off, so their least
    /// share is near zero and every rule keeps its threshold. Only loss that comes at
    /// every rate, in every round, raises this floor. (BBRv1's long-term bandwidth
    /// sampling told a policer by its flat delivery rate under loss; this asks the
    /// complementary question, whether the loss is flat under a changing rate.)
    ///
    /// That fails where the window's fixed allowances alone exceed a policer's rate
    /// (5 Mbit/s on a 100 Mbit/s link): no round stays under it, and the floor is the
    /// policer's drop share. There the flat delivery rate tells the policer after all
    /// ([`crate::policer`], `update_policer`), and the floor forgets those rounds.
    pub fn path_loss(&self) -> f64 {
        self.loss_floor().unwrap_or(0.0)
    }

    /// [`SokuCc::path_loss`] once four rounds are known, else `None`.
    pub fn loss_floor(&self) -> Option<f64> {
        if self.round_losses.len() < 4 {
            return None;
        }
        Some(self.round_losses.iter().copied().fold(1.0, f64::min))
    }

    /// The packets a sample of [`SokuCc::path_loss`] holds at least: startup's doubling
    /// rounds pool into samples of `STARTUP_PATH_LOSS_PACKETS`, every other round into
    /// samples of `PATH_LOSS_MIN_PACKETS`.
    fn path_loss_sample_packets(&self) -> u64 {
        if self.mode == Mode::Startup {
            STARTUP_PATH_LOSS_PACKETS
        } else {
            PATH_LOSS_MIN_PACKETS
        }
    }

    /// Records round `s`'s loss share for [`SokuCc::path_loss`].
    pub(super) fn record_round_loss(&mut self, s: &RoundSample) {
        // The rounds of a policer's test and of a policed period send at the policer's
        // rate: what they lose is not the path's at every rate.
        if self.policer.testing() || self.policer.policed() {
            self.small_rounds = (0, 0);
            return;
        }
        // Rounds under PATH_LOSS_MIN_PACKETS add up into one sample: a flow whose window
        // heavy random loss cut to a few dozen packets learns the floor all the same,
        // where it once never did and stayed at 2-3 % of the link (a policer's small
        // rounds are the detector's to tell, which clears what the floor learned).
        let (delivered, lost) = (s.delivered + self.small_rounds.0, s.lost + self.small_rounds.1);
        if (delivered + lost) / self.mtu < self.path_loss_sample_packets() {
            self.small_rounds = (delivered, lost);
            return;
        }
        self.small_rounds = (0, 0);
        if self.round_losses.len() == PATH_LOSS_ROUNDS {
            self.round_losses.pop_front();
        }
        self.round_losses.push_back(lost as f64 / (delivered + lost) as f64);
    }

    /// Takes round `s` into the policer detector ([`crate::policer`]) and acts on what
    /// it concludes.
    ///
    /// Why: behind a policer at a twentieth of a 100 Mbit/s link, the window's fixed
    /// allowances (two sender bursts, ack aggregation, the queue share) are two to
    /// three bandwidth-delay products at the policed rate, so every round, the
    /// draining one included, sent above the policer's rate and lost a large share,
    /// and the loss floor ([`SokuCc::path_loss`]) took that share for the path's own:
    /// no rule cut the window, and the flow lost 21-61 % of what it sent (path
    /// simulator, `tests/loss_sim.rs`). A policed path is now held at the policer's
    /// rate, with no allowances, and the floor forgets the rounds that sent above it;
    /// when the policed period ends, the loss bound starts at the policed window and
    /// is raised round by round as after any cut, so the flow probes for a lifted
    /// policer without sending the allowances above it at once.
    pub(super) fn update_policer(&mut self, s: &RoundSample) {
        let ignore = self.mode == Mode::ProbeRtt
            || s.round <= self.probe_rtt_last_round
            || s.round <= self.jump_last_round;
        let rises_with_rate = self.rate_loss_without_queue(s).is_some();
        // A round with no RTT sample shows no queue.
        let queued = (s.min_rtt.is_some() && self.min_rtt.is_some() && !self.queue_free(s))
            || self.queue_loss.top_excess().is_some();
        match self.policer.on_round(s, self.mtu, ignore, rises_with_rate, queued) {
            Change::Policed => {
                self.round_losses.clear();
                self.inflight_hi = None;
            }
            Change::Expired { window } => {
                let hi = self.inflight_hi.map_or(window, |hi| hi.min(window));
                self.inflight_hi = Some(hi.max(self.min_window()));
                self.since_hi_change = Duration::ZERO;
                self.probe_up_step = self.mtu;
            }
            Change::None | Change::Testing | Change::Rejected => {}
        }
    }

    /// Whether a background flow's round met a standing queue: its smallest RTT a
    /// quarter above the baseline ([`SokuCc::queue_baseline`]).
    ///
    /// A round of fewer packets than the peer acknowledges at once
    /// (`ack_every_packets`) gets its ack from the peer's timer, 25 ms after its last
    /// packet arrived, and its smallest RTT with it: that is no queue, and judged as
    /// one it kept a yielded flow at its minimum window for good. With soku's ack every
    /// tenth packet and a 4-packet minimum, the flow's every round read 75 ms on a
    /// 50 ms path, above the 62.5 ms the rule allows, and once CUBIC left it never took
    /// the link back (path simulator, 100 Mbit/s x 50 ms: 0.6 % of the link 10-20 s
    /// after). So such a round is not judged, and the bound grows until a round holds
    /// enough packets for one of them to be acknowledged on arrival.
    pub(super) fn background_queue(&self, s: &RoundSample) -> bool {
        if !self.config.background || self.mode != Mode::ProbeBw {
            return false;
        }
        if self.acked_on_the_peers_timer() {
            return false;
        }
        match (s.min_rtt, self.queue_baseline()) {
            (Some(round_min), Some(base)) => round_min > base + base / 4,
            _ => false,
        }
    }

    /// Whether the round being judged held fewer packets than the peer acknowledges at
    /// once, or no frame of that many (see `on_round`), so that its RTT samples may
    /// all carry the peer's ack timer (see `background_queue`). A round of 10-16
    /// packets, with the peer acking every tenth, was still acknowledged in frames of
    /// fewer packets that each waited for the timer: its smallest RTT read 75 ms on a
    /// 50 ms path, and a background flow that CUBIC had left held 1.4 % of the link
    /// (path simulator, quarter-BDP buffer).
    fn acked_on_the_peers_timer(&self) -> bool {
        self.round_on_timer
    }

    /// The bytes the peer acknowledges at once (`ack_every_packets`): a frame of fewer
    /// came on its ack timer or out of turn.
    pub(super) fn peer_ack_bytes(&self) -> u64 {
        u64::from(self.config.ack_every_packets.max(2)) * self.mtu
    }

    /// Whether a background flow's round met a shallow queue that a loss-based flow
    /// keeps filling: more than half its bytes saw an RTT above the min RTT plus a tenth
    /// of the queue's depth ([`crate::nice`], TCP Nice): the depth an overflow showed,
    /// or the one the RTT range showed lately. Not in the round after a cut, whose
    /// acks still carry the queue the cut answered, and not in a round acknowledged on
    /// the peer's timer, whose RTT is the timer's (`background_queue`).
    pub(super) fn nice_congested(&self, s: &RoundSample) -> bool {
        if !self.config.background
            || self.mode != Mode::ProbeBw
            || s.round <= self.cut_round + 1
            || self.acked_on_the_peers_timer()
        {
            return false;
        }
        self.nice.congested()
    }

    /// Cuts the loss bound after a congested round (see `round_congested`), or raises
    /// it again while it is what limits the window and nothing is lost.
    ///
    /// A cut for loss at the top of a shallow queue (`queue_overflowed`) is CUBIC's
    /// (RFC 9438): to 0.7 of what was in flight, and the bound grows back along CUBIC's
    /// window function ([`Coexist`]) instead of by one, two, four, ... packets a round.
    /// Why: the loss-based flow beside us is cut to 0.7 of its window by the same
    /// overflow and takes seconds to grow back; the doubling steps took our bound back
    /// to the overflow within a second, so the queue overflowed again first and CUBIC
    /// never grew (path simulator, quarter-BDP buffer, 100 Mbit/s, 50 and 100 ms: CUBIC
    /// kept 1.4-4.4 % of the link with the steps, 4-5 % with BBRv2's 2-3 s wait before
    /// probing again, 8-11 % with one packet per round; with the same decrease and
    /// growth as CUBIC, the two converge as two CUBIC flows do: soku took 55-67 % of
    /// what the two carry at 50 and 100 ms with this alone, before `classify_frame` and
    /// `shared_overflow`). The growth is a function of time, so
    /// once the other flow leaves, the bound passes its old peak and grows convexly,
    /// as CUBIC's window does, until the bound is no longer needed.
    ///
    /// A background flow yields more, as LEDBAT does (RFC 6817 §2.4.2): its cut halves
    /// what was in flight, and its bound grows only in rounds whose queue drained to a
    /// quarter of its depth: LEDBAT's target delay in the queue's own range, since a
    /// shallow queue never reaches the quarter of the baseline that the background rule
    /// asks. Beside CUBIC in a quarter-BDP buffer, CUBIC then keeps 58 % (50 ms) and
    /// 71 % (100 ms) of the link instead of 45 and 61 %.
    ///
    /// Between overflows, such a flow also cuts (again as a cut for the overflow) in a
    /// round where more than half of its bytes saw the queue above a tenth of its depth
    /// (`nice_congested`, TCP Nice's rule with Nice's values): to what its delivery
    /// rate needs for a queue at that tenth, and by half while the queue does not answer
    /// such a cut ([`crate::nice`]). Why: between overflows
    /// the queue stood at 2-4 ms of the 12.5 ms a quarter-BDP buffer holds at 50 ms,
    /// under the quarter-of-the-queue line of the growth and far under the background
    /// rule's quarter of the baseline, and the flow held its bound at 40 % of the BDP
    /// for ten seconds while CUBIC's window grew into that queue.
    ///
    /// While the queue is low, a background bound grows by the larger of CUBIC's
    /// function and BBR's probing steps (one packet, then two, four, ... per round, as
    /// BBRv2 raises `inflight_hi`, draft-cardwell-iccrg-bbr-congestion-control-02
    /// §4.5.10), at most a quarter of itself per round. Why: a Nice cut restarts
    /// CUBIC's function from what was in flight, which beside CUBIC is a few packets,
    /// and from 4 packets the function took 12 s to a 100 Mbit/s x 50 ms path's BDP
    /// (path simulator, after CUBIC left). A queue that drains is spare capacity now;
    /// the steps find it in tens of rounds, and Nice's line stops them within a round
    /// or two of a queue. With an eighth per round the flow carried 94 % of the link
    /// 4.7 s after CUBIC left a 100 ms path (75-90 % in the 3-8 s after, four seeds);
    /// a quarter takes it from 4 packets to the BDP in about 25 rounds.
    ///
    /// With all three (path simulator, seeds 29 and 3, quarter-BDP buffer): CUBIC keeps
    /// 96.5-97.6 % beside the flow from 20 to 100 ms and 88.6 % at 150 ms (80.6-97.8 %
    /// with Nice's halving alone); when CUBIC leaves, the flow has 100 % of the link in
    /// the 3-8 s after at 20-70 ms and 90.8-99.0 % at 100 ms (four seeds; 26 % at 50 ms
    /// and 72 % at 100 ms before), per second after CUBIC left 7, 83, 100 % at 50 ms and
    /// 1, 5, 35, 84, 79, 91, 100 % at 100 ms; alone it keeps 98.8-99.1 % (95.0-98.8),
    /// 95.2-98.0 % with 1 % random loss (90.4-97.8).
    pub(super) fn update_inflight_hi(&mut self, s: &RoundSample) {
        let nice = self.nice_congested(s);
        let congested = self.round_congested(s) || self.background_queue(s) || nice;
        let overflow = congested && (nice || self.queue_overflowed(s));
        // A cut by another rule (the 10 % one, say) while a shallow queue's overflow
        // is found keeps CUBIC's growth too: the doubling steps took the bound back
        // to the overflow within a second, where the loss-based flow beside us, cut by
        // the same overflow, takes seconds (emulator, joining CUBIC in a quarter-BDP
        // buffer at 100 ms: twice in ten seconds, 80-150 packets lost each time and
        // CUBIC cut to a third; `lab/2026-11-30-startup-into-cubic`). A background
        // flow's cuts follow its own rules below.
        let shallow = congested && !self.config.background && self.shallow_queue_loss().is_some();
        if overflow && !nice && self.config.background {
            if let (Some(min), Some(top)) = (self.min_rtt, self.rtt_top.get()) {
                self.nice.on_overflow(min, top);
            }
        }
        self.record_round_loss(s);
        if self.mode == Mode::Startup {
            self.startup_losses.0 += s.delivered;
            self.startup_losses.1 += s.lost;
        }
        if congested {
            let used = self.window.min(self.round_max_in_flight.max(self.in_flight));
            let beta = match (overflow, self.config.background) {
                (true, true) => BACKGROUND_OVERFLOW_BETA,
                (true, false) => OVERFLOW_BETA,
                (false, _) => self.config.loss_beta,
            };
            // What was in flight takes this long to pass at the round's delivery rate
            // (Little's law): the RTT it holds if the queue is ours alone.
            let rtt =
                s.rate().map(|rate| Duration::from_secs_f64(used as f64 / rate.max(1) as f64));
            let beta = match (nice, self.min_rtt, rtt, s.min_rtt) {
                (true, Some(min), Some(rtt), Some(round_min)) => {
                    self.nice.decrease(min, s.round, rtt, round_min).unwrap_or(beta)
                }
                _ => beta,
            };
            match (nice, rtt) {
                (true, Some(rtt)) => self.nice.on_cut(self.delivery.round(), rtt),
                _ => self.nice.on_judged(u64::MAX),
            }
            let bound = ((used as f64 * beta) as u64).max(self.min_window());
            self.inflight_hi = Some(bound);
            self.since_hi_change = Duration::ZERO;
            self.probe_up_step = self.mtu;
            self.cut_round = self.delivery.round();
            let last_max = self.coexist.map(|c| c.peak());
            self.coexist =
                (overflow || shallow).then(|| Coexist::new(used, bound, beta, last_max, self.mtu));
            if self.coexist.is_none() {
                self.nice.forget();
            }
            match self.mode {
                Mode::Startup => self.filled_pipe = true,
                Mode::ProbeBw => self.cycle_index = 2,
                _ => {}
            }
        } else if let Some(hi) = self.inflight_hi {
            self.nice.on_judged(s.round);
            // Raise the bound again while it is what limits us and nothing is lost.
            self.since_hi_change += s.elapsed;
            // Loss no longer tied to the queue: the usual steps.
            if self.queue_loss.top_excess().is_none() {
                self.coexist = None;
                self.nice.forget();
            }
            if let Some(c) = self.coexist.as_mut() {
                let min_rtt = self.min_rtt.unwrap_or(s.elapsed);
                let target = c.on_round(s.elapsed, min_rtt, self.mtu);
                let (allowed, step, target) = if self.config.background {
                    let low = self.queue_low(s);
                    if !low {
                        self.probe_up_step = self.mtu;
                    }
                    (
                        low,
                        (hi / BACKGROUND_RAISE_DIVISOR).max(self.mtu),
                        target.max(hi + self.probe_up_step),
                    )
                } else {
                    (true, hi / 2, target)
                };
                if allowed && self.round_max_in_flight + 2 * self.mtu >= hi && target > hi {
                    self.inflight_hi = Some(target.min(hi + step));
                    if self.config.background {
                        self.probe_up_step = (self.probe_up_step * 2).min(step);
                    }
                }
                // As for the steps below: a bound far above the model's window is none.
                let free = self.target(self.config.cwnd_gain + self.config.probe_gain);
                if matches!(free, Some(w) if hi > 2 * w) {
                    self.inflight_hi = None;
                    self.coexist = None;
                    self.nice.forget();
                }
                return;
            }
            if self.round_max_in_flight + 2 * self.mtu >= hi
                && self.since_hi_change >= HI_RAISE_SPACING
            {
                self.since_hi_change = Duration::ZERO;
                let hi = hi + self.probe_up_step;
                self.probe_up_step = (self.probe_up_step * 2).min((hi / 8).max(self.mtu));
                let free = self.target(self.config.cwnd_gain + self.config.probe_gain);
                self.inflight_hi = match free {
                    Some(w) if hi > 2 * w => None,
                    _ => Some(hi),
                };
            }
        }
    }
}
