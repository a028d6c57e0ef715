//! The state machine: startup, drain, probe-bw and probe-rtt, after
//! draft-cardwell-iccrg-bbr-congestion-control §4.3, steered through the window only.
//!
//! - **Startup** (§4.3.1): the window grows by every acknowledged byte (it doubles each
//!   round), bounded by `startup_gain x BDP`. Startup ends when the bandwidth estimate
//!   has not grown by 25 % for three rounds that were not app-limited (§4.3.1.2),
//!   when a round loses more than `loss_threshold` of its packets (as BBRv2 does), at
//!   the first loss at the top of a shallow queue once such loss is found to be the
//!   queue's (see [`Random loss or congestion`](#random-loss-or-congestion)), or as
//!   soon as the RTT shows a queue building (see [`crate::startup_delay`]).
//! - **Drain** (§4.3.2): the window drops to one BDP until what is in flight fits.
//! - **Probe-bw** (§4.3.3): an eight-round cycle of window gains: one probing round at
//!   `cwnd_gain + probe_gain`, one draining round at 1.0, six cruising rounds at
//!   `cwnd_gain` on the delivery rate of the recent rounds rather than on the max
//!   filter ([`SokuCc::cruise_bw`]). quinn paces at `1.25 x window / srtt`, so a window of
//!   1.0 BDP empties the queue the probe built without idling the link, where BBR's
//!   0.75 pacing gain, applied to the window, would leave it idle for part of a round.
//!   Every probe-bw window also holds a fixed share of queue
//!   ([`SokuCc::queue_share`]), the same for every flow on the path, which is what
//!   makes flows sharing a bottleneck converge (see there).
//! - **Probe-rtt** (§4.3.4): when the min-RTT sample is older than `min_rtt_window`
//!   (or forty round trips on a path longer than 250 ms, so that a probe's cost stays
//!   a bounded share of the time; never while startup is still growing), the window
//!   drops to half a BDP (BBRv2's value, gentler than four packets) for
//!   `probe_rtt_duration` and at least one round, and the smallest RTT seen meanwhile
//!   becomes the new min RTT. A flow whose min RTT fell an eighth below startup's (it
//!   started inside another flow's queue) takes its first probe-RTT
//!   `first_min_rtt_window` after startup, however often new minimums came since.
//!   A sample within an eighth of the min RTT keeps it as fresh as a new minimum would,
//!   except in background mode or while the flow shares a shallow queue with a
//!   loss-based flow (`probe_rtt::confirms_min_rtt`).
//!
//! Probe-bw adds the ack-aggregation estimate to its window
//! (BBR's `extra_acked`, see [`SokuCc::ack_aggregation`]; the estimate restarts when
//! startup ends, as startup's acks only show the estimate trailing the doubling window);
//! every model-derived window
//! also carries two sender bursts of headroom ([`SokuCc::burst_allowance`]).
//!
//! Loss: random loss does not enter the model, except that lost bytes are not
//! delivered and the windows built on the bandwidth estimate (startup's cap, drain,
//! probe-bw's probing and draining rounds) carry the packets the path loses on the
//! way, `1 / (1 - path_loss)` times the estimate's (`SokuCc::loss_lift`; a cruising
//! round's rate counts them already, [`SokuCc::cruise_bw`]).
//! What the path loses at random is learned as [`SokuCc::path_loss`], the
//! least loss share of the last sixteen rounds, and the rules below count only loss
//! beyond it (less two standard deviations of sampling noise, see
//! [`Random loss or congestion`](#random-loss-or-congestion)). A round whose loss share
//! exceeds `loss_threshold` and half of it beyond the path's share is congestion; so
//! is a cruising round losing 2 % beyond the path's share (BBRv2's threshold) while its
//! smallest RTT shows a standing queue of half a min RTT, more than our own cruising
//! window can build, so flows sharing a full queue all react to its overflow (in
//! background mode, a third of `loss_threshold` beyond the path's share with a queue
//! of an eighth of the baseline in any round is congestion, and so is a standing queue
//! of a quarter of it alone; the baseline is the smallest RTT of ten minutes,
//! [`crate::base_delay`]): an upper bound on the window,
//! `inflight_hi`, drops to `loss_beta` times what was in flight, and is raised again
//! round by round (one packet, then two, four, ..., at most an eighth of the bound per
//! round, and at most every 100 ms) while no congestion is seen (a simplified BBRv2
//! `inflight_hi`, §4.5.10 of the v2/v3 drafts).
//! In a shallow queue (its RTT range under half a min RTT), loss at the top of the
//! queue beyond what the path loses below it ([`crate::queue_loss`]) counts from the
//! first packet, as does a queue that another flow's cut drained while ours held, and
//! the bound then follows CUBIC (RFC 9438): cut to 0.7 of what was in flight, grown
//! back along CUBIC's window function, as it also grows back after a cut by any other
//! rule while that loss is found (a background flow halves it and grows it back
//! only while the queue has drained, as LEDBAT would, also by BBR's probing steps, and
//! between overflows cuts it again whenever most of a round saw the queue above a
//! tenth of its depth, as TCP Nice does: to what leaves that tenth if the queue is its
//! own, by half if the queue does not answer that, [`crate::nice`]; see
//! [`Random loss or congestion`](#random-loss-or-congestion)).
//! Persistent congestion (RFC 9002 §7.6) collapses the window to its minimum and
//! restarts startup with a fresh bandwidth estimate.
//!
//! Flows from one host to one peer share their min RTT ([`crate::shared`], RFC 9040
//! ensemble sharing): a flow takes a smaller fresh value from the path's board, the
//! shared stamp lines the flows' probe-RTTs up, a flow that drained first waits for the
//! others' drain, and while others share the path the ack-aggregation allowance is at
//! most an eighth of the BDP. While a queue stands, a cruising flow keeps its window
//! within 5 % (plus two packets) of the mean of the others' shares, stepping down at
//! most an eighth of what it had in flight a round ([`crate::ensemble`]).
//!
//! Careful resume ([`crate::resume`], RFC 9959): with a remembered path that the first
//! RTT sample confirms, startup begins at a quarter of the remembered bandwidth-delay
//! product instead of ten packets, takes half of it once that step's acks show no queue,
//! holds that window until the jump is acknowledged, and goes on doubling if it held; if
//! the jump's acks show a queue, startup ends meanwhile (heavy loss) or too much of the
//! jump was lost, drain takes what is in flight down to the delivered rate.
//!
//! # Random loss or congestion
//! A fixed loss share as the mark of congestion puts a cliff where random loss crosses
//! it: with 10 %, half the rounds of a path losing 10 % at random cut the bound, and the
//! rate fell from 92 % of the link at 7 % loss to 3 % at 10 % (path simulator,
//! `tests/loss_sim.rs`; 3.5 Mbit/s of 100 on the emulator). Which signal decides what:
//! - **The loss floor over rates** ([`SokuCc::path_loss`]) says how much loss is the
//!   path's: the least loss share of sixteen rounds, which send at different rates
//!   (probing 1.5 BDP, draining 1.0, cruising, and lower after a cut). Random loss takes
//!   the same share at every rate (as PCC Vivace and FASP assume, judging loss by how
//!   it answers a change of rate rather than by its size); congestion loss (a full
//!   queue, a policer) rises with the rate and vanishes below the bottleneck's rate.
//! - **The excess over that floor** says whether a round was congested; within two
//!   standard deviations of sampling noise (binomial over the round's packets) it is
//!   noise.
//! - **Until the floor is known** (four rounds of 50 packets), a startup round of
//!   under 200 packets that met no queue is not judged by its loss at all: at a long
//!   RTT such rounds are all startup has for seconds, and 20 % random loss in one of 90
//!   packets is beyond its noise. Once startup's earlier rounds carried 200 packets, a
//!   startup round that met no queue is judged against the share they lost together
//!   instead of the floor (`SokuCc::startup_excess`): each round doubles the rate, so
//!   this asks whether loss rises with it.
//! - **The queue** (the round's smallest RTT against the min RTT) says how much excess
//!   counts: loss that follows a queue of half a min RTT counts at 2 % beyond the floor
//!   (BBRv2's `BBRLossThresh`), and the noise allowed is that of the floor's share;
//!   loss with the RTT near its floor counts only beyond the 10 % threshold and beyond
//!   the noise of the round's own share, so a window still small (startup ended early
//!   by heavy random loss) does not read a few random losses as a high share.
//! - **When in the queue's cycle the loss comes** says whether loss in a shallow queue
//!   is its overflow ([`crate::queue_loss`], the Spike classifier that Cen, Cosman and
//!   Voelker evaluated): a drop-tail buffer drops only while it is full, with the RTT
//!   at the top of its range, and random loss takes the same share at every RTT. Only
//!   when the packets at the top of the range lose significantly more (three standard
//!   deviations) and at least twice the share of those below is the loss at the top,
//!   beyond the share below, the queue's; then any of it in a round counts, as for
//!   CUBIC, since the flow beside us gives way at every overflow, a few packets at a
//!   time. Only where the RTT range stays under half a min RTT (a buffer under half
//!   the bandwidth-delay product), which the rule above cannot see.
//! - **What the round sent** says whether loss with no queue at all is a rate's
//!   ([`crate::rate_loss`]): rounds a sixteenth above their cycle's median send
//!   against the rest, compared as the queue's classes are. A token-bucket policer or
//!   a bottleneck with no buffer drops only above its rate, so the rounds that send
//!   more lose more; random loss takes the same share of both. Once found, a round
//!   whose smallest RTT stayed near the floor and that lost 2 % beyond the rounds
//!   sending less is congested (BBRv2's threshold, as for the queue above), and the
//!   policer detector looks for intervals losing 2 % instead of 25 %. Behind a policer
//!   at half the link soku lost 3.1-6.7 % of what it sent, now 0.2-1.0 %.
//!
//! Why it stays safe: the floor rises only if loss comes in every one of sixteen rounds
//! at every rate the flow sent, including its draining round and the rounds after a
//! cut. A policer drops nothing in a round under its rate, and a full queue nothing
//! while the flows beside it back off, so there the floor is near zero and the rules
//! are the fixed-share rules they were: nothing is taken for random loss that was not
//! lost at the lowest rate too. Except where the window's fixed allowances (sender
//! bursts, ack aggregation, queue share) alone exceed a policer's rate, so that even
//! the draining round sends above it: there the policer is told by its flat delivery
//! rate under heavy loss ([`crate::policer`], BBRv1's long-term bandwidth sampling,
//! each candidate tested by sending at its rate), the flow sends at the policed rate
//! without allowances, and the floor forgets the rounds sent above it. Two soku flows
//! with 10 % random loss both see the floor and still share the queue's overflow
//! beyond it (Jain's index 0.997-1.0 in the simulator). The shallow-queue rule
//! never fires on random loss alone, whatever its rate: both classes lose the same
//! share, and a finding needs the top to lose twice the share below (the random-loss
//! sweep of `tests/loss_sim.rs` gives the same figures with it as without); the same
//! holds for the classes by rate, which besides judge only rounds with no queue, so
//! flows sharing a full queue are left to the queue rules. Beside a
//! loss-based flow in a quarter-BDP buffer, soku once took 96-97 % of the link (the
//! overflow it met, ~3.5 %, stayed under the 10 % threshold with less than half a min
//! RTT of queue); now 51-57 % of what the two carry (path simulator, CUBIC, 50 and
//! 100 ms; 42-64 % from 30 to 150 ms, but still 77 % at 20 ms). The cost: a flow alone
//! in a shallow buffer that also loses 1 % at random keeps 94-96 % of the link instead
//! of 96-99 %, and loses 1.4-1.5 % of its packets instead of 2.4-4.2 %. A background
//! flow beside CUBIC in such a buffer leaves it 96.9 % (50 ms) and 97.6 % (100 ms) of
//! the link, 57.7 and 71.2 % before Nice's rule ([`crate::nice`]); the Nice rule only
//! acts in background mode, so non-background flows are untouched. Alone in a
//! quarter-BDP buffer, a background flow keeps 98.8-99.1 % of the link at 20-100 ms
//! (95.2-98.0 % with 1 % random loss), and when
//! CUBIC leaves such a buffer it has 100 % of the link in the 3-8 s after at 50 ms and
//! 90.8 % at 100 ms (with Nice's halving on every such round: 26 and 72 %).
//!
//! # Layout
//! This file holds the state, the phase changes and quinn's [`Controller`] calls; the
//! rest of the model is in `model/`:
//! - `window.rs`: the window each phase asks for, and its allowances;
//! - `loss.rs`: which rounds count as congestion, the loss bound, and what a policer
//!   ([`crate::policer`]) changes in them;
//! - `probe_rtt.rs`: entering and leaving probe-RTT;
//! - `board.rs`: what the flow shares with the other flows on its path.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn_proto::congestion::{Controller, ControllerMetrics};
use quinn_proto::RttEstimator;

use crate::base_delay::BaseDelay;
use crate::config::SokuCcConfig;
use crate::delivery::{DeliveryTracker, RoundSample};
use crate::filters::{Direction, WindowedFilter};
use crate::nice::Nice;
use crate::policer::PolicerDetector;
use crate::queue_loss::{Counts, QueueLoss, QueueView};
use crate::rate_loss::RateLoss;
use crate::resume::{CarefulResume, Phase, Step, Verdict};
use crate::rtt_top::RttTop;
use crate::shared::flow_id;
use crate::stall::StallProbe;
use crate::startup_delay::StartupDelay;

mod board;
mod loss;
mod probe_rtt;
mod window;

/// The window never drops below this many packets.
const MIN_WINDOW_PACKETS: u64 = 4;
/// A round must lose at least this many packets to count as congested.
const MIN_LOSS_PACKETS: u64 = 4;
/// Rounds in a probe-bw cycle.
const CYCLE_LEN: usize = 8;
/// Startup ends after this many rounds without 25 % bandwidth growth.
const FULL_BW_ROUNDS: u32 = 3;

/// The phase the controller is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Doubling the window each round to find the bottleneck bandwidth.
    Startup,
    /// Emptying the queue startup built.
    Drain,
    /// Steady state, probing for more bandwidth one round in eight.
    ProbeBw,
    /// Briefly shrinking the window to refresh the min-RTT estimate.
    ProbeRtt,
}

impl Mode {
    /// A short lowercase name for reports (`startup`, `drain`, `probe_bw`, `probe_rtt`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Startup => "startup",
            Mode::Drain => "drain",
            Mode::ProbeBw => "probe_bw",
            Mode::ProbeRtt => "probe_rtt",
        }
    }
}

/// soku's controller; build it through [`SokuCcConfig`].
#[derive(Debug, Clone)]
pub struct SokuCc {
    config: Arc<SokuCcConfig>,
    /// Set by the application as it closes the connection (see
    /// [`SokuCc::open_for_close`]); shared with this controller's clones.
    closing: Arc<AtomicBool>,
    mode: Mode,
    mtu: u64,
    window: u64,
    in_flight: u64,
    round_max_in_flight: u64,
    delivery: DeliveryTracker,
    /// Delivery rate in bytes/s, max over `bw_window_rounds` rounds.
    max_bw: WindowedFilter,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    full_bw: u64,
    full_bw_rounds: u32,
    filled_pipe: bool,
    cycle_index: usize,
    inflight_hi: Option<u64>,
    probe_up_step: u64,
    /// Round time since `inflight_hi` was last set or raised.
    since_hi_change: Duration,
    probe_rtt_done: Option<(Instant, u64)>,
    /// Probe-RTT phases finished so far.
    probe_rtts: u32,
    /// Set when startup ends: the deadline `first_min_rtt_window` later, and the min
    /// RTT startup found. The deadline holds for the first probe-RTT once the min RTT
    /// falls an eighth below that (see [`SokuCc::maybe_enter_probe_rtt`]).
    first_probe_due: Option<(Instant, Duration)>,
    /// The last round whose data may have left during a probe-RTT (see
    /// `round_congested`).
    probe_rtt_last_round: u64,
    /// The last round that may still report losses of a jump retreated from (see
    /// `round_congested`).
    jump_last_round: u64,
    /// Probe-RTT phases in a row whose smallest RTT stayed above the min RTT.
    probe_rtts_above: u32,
    probe_rtt_min: Option<Duration>,
    /// Delivery rate (bytes delivered or lost over the round's time, bytes/s) of each
    /// of the last `CYCLE_LEN` probe-bw rounds; `None` for an app-limited round.
    round_rates: VecDeque<Option<u64>>,
    /// Loss shares of the last rounds that carried enough packets, for
    /// [`SokuCc::path_loss`].
    round_losses: VecDeque<f64>,
    /// Bytes delivered and lost in the rounds since the last loss sample, while they
    /// are too few to make one.
    small_rounds: (u64, u64),
    /// Bytes delivered and lost in startup's rounds judged so far, which
    /// [`SokuCc::startup_excess`] judges the next startup round against.
    startup_losses: (u64, u64),
    /// Whether the path is policed, told apart from random loss by its flat delivery
    /// rate ([`crate::policer`]).
    policer: PolicerDetector,
    /// Rounds closed so far, and how many of them were app-limited: the sender had less
    /// to send than the window allowed (flow control, an empty pipeline, the copy's
    /// start and end), as quinn tells each ack.
    rounds: u64,
    app_limited_rounds: u64,
    rng: u64,
    /// Bytes acknowledged beyond `bw x time` within one aggregation epoch, max over
    /// `EXTRA_ACKED_ROUNDS` rounds (one round in startup).
    extra_acked: WindowedFilter,
    /// Start of the current aggregation epoch and bytes acknowledged since.
    ack_epoch_start: Option<Instant>,
    ack_epoch_delivered: u64,
    /// Bytes acknowledged in the current batch of acks.
    batch_acked: u64,
    /// Round RTT minima that end startup when a queue builds.
    startup_delay: StartupDelay,
    /// Smallest RTT sample of the current batch of acks.
    batch_min_rtt: Option<Duration>,
    /// When the latest packet was sent: a floor for the time an ack is processed.
    last_sent_at: Option<Instant>,
    /// The clock when this batch of acks began to be processed (read once per batch).
    batch_clock: Option<Instant>,
    /// Careful resume from what an earlier copy learned (see [`crate::resume`]).
    resume: CarefulResume,
    /// When the shared min RTT was last looked at.
    board_seen: Option<Instant>,
    /// This flow's id on the board (`MinRttRecord::writer`).
    board_id: u64,
    /// When another flow last wrote the board, as far as this one has seen.
    others_alive: Option<Instant>,
    /// Whether other flows wrote the board within [`ALIVE`] when it was last looked at.
    others_now: bool,
    /// The most in flight over the last round, and whether that round was app-limited:
    /// this flow's share of the path ([`crate::ensemble`]).
    last_round_in_flight: u64,
    last_round_app_limited: bool,
    /// Whether the last round's smallest RTT showed a queue (see `share_in_flight`).
    last_round_queued: bool,
    /// The last round's smallest RTT (see `shared_overflow`).
    last_round_min_rtt: Option<Duration>,
    /// The others' mean share plus a margin, while others send on the path and this flow
    /// cruises ([`crate::ensemble`]).
    ensemble_cap: Option<u64>,
    /// Probes a path that stopped acknowledging ([`crate::stall`]), if configured.
    stall: StallProbe,
    /// The smallest RTT of the last ten minutes, kept in background mode only: what a
    /// background flow measures other flows' queues against ([`crate::base_delay`]).
    base_delay: BaseDelay,
    /// Rounds in a row whose smallest RTT was more than twice the base-delay seed.
    seed_contradicted: u32,
    /// Loss shares at the top of the RTT range and below it ([`crate::queue_loss`]).
    queue_loss: QueueLoss,
    /// Loss shares of the rounds that sent more and of those that sent less
    /// ([`crate::rate_loss`]).
    rate_loss: RateLoss,
    /// What the last round counted in [`crate::queue_loss`]'s classes.
    last_queue_counts: Counts,
    /// Largest RTT sample of the round in progress.
    round_max_rtt: Option<Duration>,
    /// The top of the RTT range that [`crate::queue_loss`] classes samples in, from
    /// the rounds' largest samples ([`crate::rtt_top`]).
    rtt_top: RttTop,
    /// The same from cruising rounds only, which add no queue of the flow's own: what
    /// a background flow measures another flow's queue by ([`crate::nice`]); kept in
    /// background mode only.
    cruise_top: RttTop,
    /// Smallest RTT of the round in progress among the ack frames the peer sent on
    /// count, not on its timer (see `classify_frame`).
    round_frame_min: Option<Duration>,
    /// Whether the round being judged had no such frame (see
    /// `acked_on_the_peers_timer`).
    round_on_timer: bool,
    /// Smallest RTT sample of the latest ack frame: what the losses it reveals are
    /// classed by.
    frame_rtt: Option<Duration>,
    /// The round in progress when the loss bound was last cut.
    cut_round: u64,
    /// After a cut for loss at the top of a shallow queue, how the bound grows back
    /// (see `update_inflight_hi`).
    coexist: Option<crate::coexist::Coexist>,
    /// A background flow's view of a shallow queue against its depth ([`crate::nice`]).
    nice: Nice,
}

/// A background flow drops a remembered min RTT (the base-delay seed) after this many
/// rounds in a row whose smallest RTT was more than twice it. A queue standing beside
/// the flow cannot explain that: a buffer of one bandwidth-delay product at most
/// doubles the RTT (the remembered path is the same one, `RememberedPath::confirms`),
/// while a host that moved to a slower network (a remembered 20 ms on a 50 ms path)
/// held a lone background copy at the minimum window for the seed's ten minutes.
/// Deeper buffers can double the RTT too; then the flow measures queues against its
/// own samples, as a first copy does.
const SEED_CONTRADICTED_ROUNDS: u32 = 8;

/// Bytes carried in `d` at `bw` bytes/s.
fn bytes_in(bw: u64, d: Duration) -> u64 {
    u64::try_from(u128::from(bw) * d.as_nanos() / 1_000_000_000).unwrap_or(u64::MAX)
}

/// `bytes` over `span` in bytes/s (a zero span counts as 1 ns).
fn rate_of(bytes: u64, span: Duration) -> u64 {
    u64::try_from(u128::from(bytes) * 1_000_000_000 / span.as_nanos().max(1)).unwrap_or(u64::MAX)
}

impl SokuCc {
    /// A controller in startup with the configured initial window.
    pub fn new(config: Arc<SokuCcConfig>, now: Instant, current_mtu: u16) -> Self {
        let rng = splitmix64(config.seed);
        let mtu = u64::from(current_mtu).max(1);
        Self {
            closing: Arc::new(AtomicBool::new(false)),
            mode: Mode::Startup,
            mtu,
            window: config.initial_window.max(MIN_WINDOW_PACKETS * mtu),
            in_flight: 0,
            round_max_in_flight: 0,
            delivery: DeliveryTracker::new(),
            max_bw: WindowedFilter::new(Direction::Max, config.bw_window_rounds),
            min_rtt: None,
            min_rtt_stamp: now,
            full_bw: 0,
            full_bw_rounds: 0,
            filled_pipe: false,
            cycle_index: 2,
            inflight_hi: None,
            probe_up_step: mtu,
            since_hi_change: Duration::ZERO,
            probe_rtt_done: None,
            first_probe_due: None,
            probe_rtts: 0,
            probe_rtt_last_round: 0,
            jump_last_round: 0,
            probe_rtts_above: 0,
            probe_rtt_min: None,
            round_rates: VecDeque::with_capacity(CYCLE_LEN),
            round_losses: VecDeque::new(),
            small_rounds: (0, 0),
            startup_losses: (0, 0),
            policer: PolicerDetector::new(),
            rounds: 0,
            app_limited_rounds: 0,
            rng,
            extra_acked: WindowedFilter::new(Direction::Max, 1),
            ack_epoch_start: None,
            ack_epoch_delivered: 0,
            batch_acked: 0,
            startup_delay: StartupDelay::default(),
            batch_min_rtt: None,
            last_sent_at: None,
            batch_clock: None,
            resume: CarefulResume::new(config.hint.clone(), !config.background),
            board_seen: None,
            board_id: flow_id(),
            others_alive: None,
            others_now: false,
            last_round_in_flight: 0,
            last_round_app_limited: true,
            last_round_queued: false,
            last_round_min_rtt: None,
            ensemble_cap: None,
            stall: StallProbe::default(),
            base_delay: BaseDelay::new(),
            seed_contradicted: 0,
            queue_loss: QueueLoss::new(),
            rate_loss: RateLoss::new(),
            last_queue_counts: Counts::default(),
            round_max_rtt: None,
            rtt_top: RttTop::new(),
            cruise_top: RttTop::new(),
            round_frame_min: None,
            round_on_timer: false,
            frame_rtt: None,
            cut_round: 0,
            coexist: None,
            nice: Nice::new(),
            config,
        }
    }

    /// The current phase.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Rounds closed so far, and how many of them were app-limited.
    pub fn rounds(&self) -> (u64, u64) {
        (self.rounds, self.app_limited_rounds)
    }

    /// Estimated bottleneck bandwidth in bits per second.
    pub fn bandwidth_bps(&self) -> Option<u64> {
        self.max_bw.get().map(|b| b.saturating_mul(8))
    }

    /// Estimated round-trip propagation time.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// The hard rate cap in bits per second, if one is configured.
    pub fn rate_cap_bps(&self) -> Option<u64> {
        self.config.rate_cap_bps
    }

    /// The rate a policer on the path passes, in bits per second, while the flow
    /// holds to it ([`crate::policer`]).
    pub fn policed_bps(&self) -> Option<u64> {
        self.policer.policed().then(|| self.policer.rate()).flatten().map(|b| b.saturating_mul(8))
    }

    /// How loss in a shallow queue looks to this flow ([`crate::queue_loss`]).
    pub fn queue_view(&self) -> QueueView {
        let (lost_top, lost_below) = self.queue_loss.shares();
        QueueView {
            lost_top,
            lost_below,
            found: self.queue_loss.top_excess().is_some(),
            rtt_top: self.rtt_top.get(),
            bound: self.inflight_hi,
            coexisting: self.coexist.is_some(),
        }
    }

    /// The loss-derived upper bound on bytes in flight, if congestion set one.
    pub fn inflight_bound(&self) -> Option<u64> {
        self.inflight_hi
    }

    /// Whether this controller yields to other traffic (background mode).
    pub fn is_background(&self) -> bool {
        self.config.background
    }

    /// Where careful resume stands (see [`crate::resume`]).
    pub fn resume_phase(&self) -> Phase {
        self.resume.phase()
    }

    /// The window careful resume jumped to, in bytes (0 without a jump).
    pub fn resume_jump(&self) -> u64 {
        self.resume.jump()
    }

    /// Whether careful resume's jump was lost with no queue (see
    /// [`CarefulResume::lost_without_queue`]).
    pub fn resume_lost_without_queue(&self) -> bool {
        self.resume.lost_without_queue()
    }

    /// Whether every packet sent before careful resume's retreat is acknowledged or
    /// declared lost (see [`CarefulResume::retreat_settled`]).
    pub fn resume_retreat_settled(&self) -> bool {
        self.resume.retreat_settled()
    }

    /// Opens the window for good, for the packet that carries the application's
    /// CONNECTION_CLOSE. quinn-proto 0.11 holds that packet behind the congestion window
    /// while stream data is still queued, and a closed connection processes no more
    /// acks, so a close made under a full window never left (quinn issue #2785, fixed
    /// after 0.11.19 by quinn PR #2787): the peer heard nothing until its idle timeout,
    /// or a kept server's silence rule. Closed, quinn sends nothing but acks and the
    /// close, so the open window lets only those out. Called on a clone
    /// (`quinn::Connection::congestion_state`), whose flag is the live controller's.
    pub fn open_for_close(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    /// Rounds completed so far.
    pub fn round(&self) -> u64 {
        self.delivery.round()
    }

    /// Turns to background mode if the hint asks for it after this controller was
    /// built: a server accepts the client's connection before the client's hello over
    /// ssh, which carries `--background`, has arrived (see `soku_transport::ClientPin`).
    /// The data follows the client's request over the connection, a round trip after
    /// the handshake, so the hint is there before it in all but a lost hello's case.
    /// Every rule reads the mode from the configuration; the jump the hint may hold is
    /// not for a background flow.
    fn adopt_late_background(&mut self) {
        if !self.config.background && self.config.hint.background() {
            self.config = Arc::new(self.config.in_background());
            if !self.resume.in_jump() {
                self.resume = CarefulResume::new(self.config.hint.clone(), false);
            }
        }
    }

    fn on_rtt_sample(&mut self, now: Instant, rtt: Duration) {
        if self.mode == Mode::ProbeRtt {
            self.probe_rtt_min = Some(self.probe_rtt_min.map_or(rtt, |m| m.min(rtt)));
        }
        if self.min_rtt.is_none_or(|m| rtt <= m) {
            self.min_rtt = Some(rtt);
            self.min_rtt_stamp = now;
        } else {
            self.confirm_min_rtt(now, rtt);
        }
        if self.config.background {
            if self.base_delay.get().is_none() {
                // What an earlier copy measured on this path, if this first sample says
                // it is the same path: a flow that starts inside another flow's queue
                // sees that queue from its first round.
                if let Some(path) = self.config.hint.remembered().filter(|p| p.confirms(rtt)) {
                    self.base_delay = BaseDelay::seeded(path.min_rtt);
                }
            }
            self.base_delay.on_sample(now, rtt);
        }
    }

    /// Drops the base-delay seed once the path has contradicted it for
    /// `SEED_CONTRADICTED_ROUNDS` rounds in a row.
    fn judge_base_delay_seed(&mut self, s: &RoundSample) {
        let (Some(seed), Some(round_min)) = (self.base_delay.seed(), s.min_rtt) else {
            self.seed_contradicted = 0;
            return;
        };
        if round_min > 2 * seed {
            self.seed_contradicted += 1;
            if self.seed_contradicted >= SEED_CONTRADICTED_ROUNDS {
                self.base_delay.drop_seed();
                self.seed_contradicted = 0;
            }
        } else {
            self.seed_contradicted = 0;
        }
    }

    /// What a background flow measures queues against: the ten-minute history's
    /// minimum, or the model's min RTT when that is lower (another flow's, from the
    /// path's board).
    fn queue_baseline(&self) -> Option<Duration> {
        match (self.base_delay.get(), self.min_rtt) {
            (Some(base), Some(min)) => Some(base.min(min)),
            (base, min) => base.or(min),
        }
    }

    fn enter_drain(&mut self) {
        // Startup ending while a jump is out: the path did not carry it.
        self.resume.retreat();
        if self.resume.phase() == Phase::SafeRetreat {
            self.jump_last_round = self.delivery.round() + 2;
        }
        self.mode = Mode::Drain;
        // In startup the bandwidth estimate trails the doubling window by a round, so
        // every round's acks look like aggregation beyond it (measured: 1.2 MB at
        // 100 Mbit/s x 300 ms, kept for ten rounds as a standing queue of ~100 ms).
        // Only what is seen from here on is aggregation.
        self.extra_acked.clear();
        self.ack_epoch_start = None;
        self.ack_epoch_delivered = 0;
    }

    fn enter_probe_bw(&mut self) {
        self.mode = Mode::ProbeBw;
        self.rng = splitmix64(self.rng);
        // Any phase but the draining one (as BBR does), so flows spread out.
        let pick = (self.rng % (CYCLE_LEN as u64 - 1)) as usize;
        self.cycle_index = if pick == 0 { 0 } else { pick + 1 };
    }

    fn on_round(&mut self, s: RoundSample) {
        self.rounds += 1;
        self.last_queue_counts = self.queue_loss.on_round(self.mtu);
        self.nice.on_round();
        if let Some(max) = self.round_max_rtt.take() {
            self.rtt_top.on_round(max);
            // The acks of a cycle's first two rounds carry the probe's queue.
            if self.config.background && self.mode == Mode::ProbeBw && self.cycle_index >= 2 {
                self.cruise_top.on_round(max);
            }
        }
        // Only a background flow reads Nice's state (`nice_congested`, `queue_low`).
        if let Some(min) = self.min_rtt.filter(|_| self.config.background) {
            self.nice.on_range(min, self.cruise_top.get(), self.rounds);
        }
        self.app_limited_rounds += u64::from(s.app_limited);
        if self.mode == Mode::ProbeBw {
            if self.round_rates.len() == CYCLE_LEN {
                self.round_rates.pop_front();
            }
            let rate = rate_of(s.delivered + s.lost, s.elapsed);
            self.round_rates.push_back(if s.app_limited { None } else { Some(rate) });
        }
        if let Some(rate) = s.best_rate() {
            let current = self.max_bw.get().unwrap_or(0);
            // App-limited rounds understate the path: only let them raise the max.
            if !s.app_limited || rate > current {
                self.max_bw.update(self.capped(rate), s.round);
            }
        }

        self.judge_base_delay_seed(&s);
        self.record_rate_loss(&s);
        // The loss bound's rules judge a queue by the round's smallest RTT among the
        // frames the peer sent on count: a frame sent on its ack timer carries the
        // timer (see `acked_on_the_peers_timer`). A round with no such frame keeps its
        // smallest sample of all (which can only read more queue than there is) but is
        // marked: with random loss the peer acknowledges every gap at once, in small
        // frames, and at 20 % there may be few frames of the full count.
        let frame_min = self.round_frame_min.take();
        self.round_on_timer = frame_min.is_none() || s.delivered < self.peer_ack_bytes();
        let judged = RoundSample { min_rtt: frame_min.or(s.min_rtt), ..s };
        self.update_policer(&judged);
        self.update_inflight_hi(&judged);

        // A held jump window delivers a flat rate by design: not a full pipe.
        if self.mode == Mode::Startup
            && !s.app_limited
            && !self.filled_pipe
            && !self.resume.in_jump()
        {
            let bw = self.max_bw.get().unwrap_or(0);
            if bw >= self.full_bw + self.full_bw / 4 {
                self.full_bw = bw;
                self.full_bw_rounds = 0;
            } else {
                self.full_bw_rounds += 1;
                if self.full_bw_rounds >= FULL_BW_ROUNDS {
                    self.filled_pipe = true;
                }
            }
        }

        self.startup_delay.on_round_end();
        match self.mode {
            Mode::Startup if self.filled_pipe => self.enter_drain(),
            Mode::ProbeBw => self.cycle_index = (self.cycle_index + 1) % CYCLE_LEN,
            _ => {}
        }
        self.last_round_in_flight = self.round_max_in_flight;
        self.last_round_app_limited = s.app_limited;
        // A round acknowledged on the peer's timer shows the timer, not a queue
        // (`shared_overflow` would take its fall back for a queue that drained).
        self.last_round_min_rtt = judged.min_rtt.filter(|_| !self.round_on_timer);
        self.last_round_queued = match (s.min_rtt, self.min_rtt) {
            (Some(round_min), Some(min)) => round_min > min + min / 8,
            _ => false,
        };
        self.round_max_in_flight = self.in_flight;
    }

    /// A delivery rate (bytes/s) as the bandwidth estimate may take it: never above the
    /// configured rate cap.
    fn capped(&self, rate: u64) -> u64 {
        match self.config.rate_cap_bps {
            Some(cap) => rate.min(cap / 8),
            None => rate,
        }
    }

    /// Startup caps the window at `startup_gain x BDP`. With the bandwidth estimate
    /// taken only at round ends, that cap trailed a window doubling every round by a
    /// round; it needed BBR's 2/ln 2 gain to let the window grow at all, and so put up
    /// to 2.9 BDP in flight once the link was full (in the path simulator: 17 % of the
    /// packets of the first 2 s dropped at a one-BDP queue at 1 Gbit/s x 100 ms). So in
    /// startup the estimate also takes the current round's interval rate after every
    /// batch of acks, as BBR takes a rate sample on every ack, and the gain is 2.
    fn sample_startup_bandwidth(&mut self) {
        let Some(rate) = self.delivery.running_interval_rate() else {
            return;
        };
        let rate = self.capped(rate);
        if rate > self.max_bw.get().unwrap_or(0) {
            // Tagged with the round in progress, as its round-end sample will be.
            self.max_bw.update(rate, self.delivery.round() + 1);
        }
    }

    fn collapse(&mut self) {
        self.resume.retreat();
        self.mode = Mode::Startup;
        self.window = self.min_window();
        self.max_bw.clear();
        self.full_bw = 0;
        self.full_bw_rounds = 0;
        self.filled_pipe = false;
        self.inflight_hi = None;
        self.probe_rtt_done = None;
        // A restarted startup is judged afresh (`maybe_enter_probe_rtt`).
        self.first_probe_due = None;
        self.extra_acked.clear();
        self.ack_epoch_start = None;
        self.ack_epoch_delivered = 0;
        self.startup_delay = StartupDelay::default();
        self.startup_losses = (0, 0);
        self.round_rates.clear();
    }
}

impl Controller for SokuCc {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.adopt_late_background();
        self.in_flight += bytes;
        self.stall.on_sent(now, bytes);
        self.last_sent_at = Some(self.last_sent_at.map_or(now, |t| t.max(now)));
        self.round_max_in_flight = self.round_max_in_flight.max(self.in_flight);
        self.delivery.on_sent(now, last_packet_number);
        self.resume.on_sent(bytes, last_packet_number);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.stall.on_rtt(rtt.get());
        self.delivery.on_ack(now, sent, bytes, app_limited);
        self.resume.on_ack(bytes);
        self.batch_acked += bytes;
        // quinn stamps a datagram with the time its endpoint task began a receive
        // loop, so a task that was descheduled meanwhile hands us a `now` from before
        // the datagram arrived, sometimes from before packets we have since sent: on
        // the 1 Gbit/s emulator (two busy cores) RTT samples of 0.2-5 ms came from a
        // 10 ms path, and a min RTT that low shrinks every window. The ack is
        // processed after our latest send, so that time never makes a sample too
        // small; a fresh stamp grows only by the time its ack waited behind our sends.
        // A stamp from before the packet itself was sent says nothing: with the packet
        // the latest sent, it gave a 0 ms sample (seen on a 100 Mbit/s x 10 ms path
        // with loss both ways: a min RTT of 0 held the window at a few packets, 45 %
        // of the link, for the 10 s until probe-RTT), so it gives no sample at all.
        // Nor is our latest send always a high enough floor: a 100 Mbit/s x 50 ms emulated
        // path gave a 23.9 ms sample, and a min RTT that low halves every window until
        // probe-RTT (the copy fell to 57 % of the link). The clock read while the ack is
        // processed is never earlier than its arrival, so the sample can only be too
        // large, which the min filter ignores.
        if now >= sent {
            let clock = *self.batch_clock.get_or_insert_with(Instant::now);
            let arrived = self.last_sent_at.map_or(now, |t| t.max(now)).max(clock);
            let rtt = arrived.saturating_duration_since(sent);
            self.on_rtt_sample(now, rtt);
            self.batch_min_rtt = Some(self.batch_min_rtt.map_or(rtt, |m| m.min(rtt)));
            if let Some(jump) = self.resume.on_rtt_sample(rtt, self.window) {
                if self.mode == Mode::Startup && !self.filled_pipe {
                    self.window = jump;
                } else {
                    self.resume.retreat();
                }
            }
        }
        let hold = self.startup_delay.hold() || self.resume.holds_growth();
        if self.mode == Mode::Startup && !app_limited && !self.filled_pipe && !hold {
            self.window = self.window.saturating_add(bytes);
        }
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        self.in_flight = in_flight;
        self.stall.on_acked(now, in_flight);
        // One sample per ack frame: the packets it acknowledges share its ack delay,
        // which at small windows (an ack every ten packets or 25 ms) is most of the
        // spread between samples.
        self.batch_clock = None;
        if let Some(rtt) = self.batch_min_rtt.take() {
            self.classify_frame(rtt, self.batch_acked);
            if self.mode == Mode::Startup && !self.filled_pipe {
                match self.resume.on_frame_rtt(now, rtt, self.min_rtt.unwrap_or(rtt), self.window) {
                    Step::Window(window) => self.window = self.window.max(window),
                    // Nothing more goes out while a rise is judged.
                    Step::Pause => self.window = self.window.min(in_flight.max(self.min_window())),
                    Step::Retreat => self.filled_pipe = true,
                    Step::Hold => {}
                }
            }
            // A queue seen while we had too little to send is someone else's (BBR's
            // full-pipe check ignores app-limited rounds for the same reason): a
            // connection that only acknowledged an upload saw the upload's queue in its
            // few RTT samples and left startup before sending a byte, then took 6 s to
            // find a fifth of a 1 Gbit/s x 200 ms path (`soku diagnose`'s download).
            if self.mode == Mode::Startup && !app_limited {
                self.startup_delay.on_sample(rtt);
                // A background flow leaves at the first round that rose, not the second:
                // a flow that yields has no need to confirm a queue before it gives way
                // (LEDBAT++'s slow start ends once the delay passes three quarters of
                // its target, draft-irtf-iccrg-ledbat-plus-plus). Its first loss ends
                // startup too (`on_congestion_event`).
                let queue = if self.config.background {
                    self.startup_delay.hold()
                } else {
                    self.startup_delay.queue_confirmed()
                };
                if queue {
                    self.resume.on_queue_confirmed();
                    self.filled_pipe = true;
                }
            }
        }
        if let Some(sample) =
            self.delivery.on_end_acks(now, largest_packet_num_acked, app_limited, self.min_rtt)
        {
            self.on_round(sample);
        }
        if self.mode == Mode::Startup {
            self.sample_startup_bandwidth();
        }
        self.update_ack_aggregation(now);
        let min_loss = MIN_LOSS_PACKETS * self.mtu;
        let verdict =
            self.resume.on_end_acks(largest_packet_num_acked, self.config.loss_threshold, min_loss);
        if verdict == Verdict::Retreat {
            self.filled_pipe = true;
        }
        if self.mode == Mode::Startup && self.filled_pipe {
            self.enter_drain();
        }
        if self.mode == Mode::Drain {
            if let Some(target) = self.gained(1.0) {
                if self.in_flight <= target {
                    self.enter_probe_bw();
                }
            }
        }
        self.share_min_rtt(now, false);
        self.maybe_enter_probe_rtt(now);
        self.maybe_exit_probe_rtt(now);
        self.update_window();
    }

    fn on_congestion_event(
        &mut self,
        _now: Instant,
        _sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        // An ECN mark reports no bytes: count it as one lost packet.
        let lost = if lost_bytes == 0 { self.mtu } else { lost_bytes };
        self.stall.on_lost(lost_bytes);
        self.delivery.on_loss(lost);
        self.classify_loss(lost);
        self.resume.on_loss(lost);
        // A background flow leaves startup at its first loss, as LEDBAT answers any
        // loss (RFC 6817 §2.4.1). Its doubling rounds went on until a round lost more
        // than the threshold, and beside CUBIC in a quarter-BDP buffer, whose queue
        // CUBIC keeps near full, that was up to 213 packets in the first second; the
        // drops fell on CUBIC's bursts too (up to 169 retransmissions), its window fell
        // to a third, and the background flow held the spare link while CUBIC grew
        // back for ten seconds (emulator, 100 Mbit/s x 50 and 100 ms; CUBIC kept 77-93
        // Mbit/s of 100 in twelve runs). Leaving at the first loss, the flow lost 7-37
        // packets and CUBIC kept 87-93 Mbit/s in six (`lab/2026-11-30-background-depth`).
        // Alone on a lossy path such a flow finds the rest of its rate by probing
        // (path simulator, 100 Mbit/s x 100 ms x 1 %: 98.0 % of the link over seconds
        // 5-20, as before).
        if self.mode == Mode::Startup && self.config.background && !self.filled_pipe {
            self.filled_pipe = true;
            self.enter_drain();
        }
        // A jump that already lost more than the threshold is retreated from at once
        // (RFC 9959: congestion in the unvalidated or validating phase leads to safe
        // retreat), not at the verdict, which waits for an ack of the jump's last
        // packet. Waiting held the window at the jump for 2.5-3 round trips while its
        // retransmissions went into the full queue: a memory of ten times an emulated
        // 100 Mbit/s path's rate dropped 4.6 BDPs beyond a cold start that way, 3.2
        // with this (`lab/2026-11-25-stale-memory`).
        if self.mode == Mode::Startup
            && self.resume.lost_too_much(self.config.loss_threshold, MIN_LOSS_PACKETS * self.mtu)
        {
            self.resume.retreat_on_loss();
            self.filled_pipe = true;
            self.enter_drain();
        }
        if is_persistent_congestion {
            self.collapse();
            // The losses that established persistent congestion (RFC 9002 §7.6: after a
            // blackout, the whole window at once) are answered by the collapse to the
            // minimum window (§7.6.2). Counted again in the round under way, they
            // judged the restart's first round congested: startup ended at once with
            // an inflight bound at a dozen packets, and after a 10 s blackout on a
            // 100 Mbit/s x 50 ms path a copy took seconds to find the link's rate
            // again. The restart's own losses still count.
            self.delivery.forget_losses();
        }
        self.update_window();
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = u64::from(new_mtu).max(1);
        self.update_window();
    }

    fn window(&self) -> u64 {
        if self.closing.load(Ordering::Relaxed) {
            // Above u32::MAX quinn's pacer stands aside as well.
            return u64::MAX;
        }
        if self.config.stall_probes {
            // quinn asks without a time; its own clock is `Instant::now()` too.
            self.stall.window(self.window, self.mtu, Instant::now())
        } else {
            self.window
        }
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut m = ControllerMetrics::default();
        m.congestion_window = self.window;
        m.pacing_rate = self.bandwidth_bps();
        m
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.config.initial_window
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// One step of SplitMix64, a tiny well-mixed generator (Steele et al., 2014).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
