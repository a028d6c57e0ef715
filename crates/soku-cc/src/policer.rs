//! A policer signal that does not rest on the loss floor: BBRv1's long-term bandwidth
//! sampling (`lt_bw` in the Linux `tcp_bbr.c`; "BBR: Congestion-Based Congestion
//! Control", Cardwell et al., ACM Queue 2016, and
//! draft-cardwell-iccrg-bbr-congestion-control-00 §4.2.2, "long-term bandwidth
//! estimate").
//!
//! A token-bucket policer passes its rate and drops the rest, with no queue to show
//! for it. Whatever is sent above that rate, the delivery rate stays flat at it; random
//! loss takes a share of what is sent, so there the delivery rate moves with the
//! rate sent. BBRv1 took two consecutive intervals of at least four rounds, each
//! losing at least 20 % of what it sent, whose delivery rates agree within an eighth
//! (or 4 kbit/s), for a policer: it then paced at their mean rate, without probing,
//! for 48 rounds. soku asks for 25 % (see `LOSS_THRESHOLD`), or 2 % once the flow's
//! loss is found to rise with what its rounds send (`RISING_LOSS_THRESHOLD`).
//!
//! Two flat, lossy intervals are also what a path with heavy random loss shows while
//! the flow holds its rate steady (soku holds a path losing 20 % at random near the
//! link's rate, [`crate::model`]), and there the delivery rate is not a cap. So a
//! candidate is put to the test that tells the two apart: a policer drops nothing
//! below its rate, random loss drops its share at every rate. The flow sends at the
//! candidate rate for a few rounds ([`PolicerDetector::window`]); if those rounds,
//! past the two that still carry what was sent before, lose less than 5 %, the path
//! is policed, else the candidate is rejected and sampling rests,
//! longer after each rejection.
//!
//! A full bottleneck shows a flat rate too, and a flow that overran it (startup's
//! last rounds) or shares it with a loss-based flow loses at that rate's edge. What
//! no policer shows is a queue: it drops what exceeds its rate at once. So a round
//! that met one (its smallest RTT above the path's floor, or loss found at the top
//! of the RTT range, [`crate::queue_loss`]) ends the interval being sampled and fails
//! a test under way.
//!
//! Rounds are added up until an interval holds enough packets to judge: at 5 Mbit/s
//! and 50 ms a round is about twenty packets.
//!
//! When a policed period ends, the rate is kept as a reference: an interval that
//! loses 5 % and delivers that rate again is tested at once, and if
//! the test passes the next policed period lasts twice as long (up to eight times
//! BBRv1's 48 rounds), so a policer that stays is probed ever less often.

use std::time::Duration;

use crate::delivery::RoundSample;

/// An interval spans at least this many rounds (BBRv1's `bbr_lt_intvl_min_rtts`).
const INTERVAL_MIN_ROUNDS: u32 = 4;
/// An interval that has not lost `LOSS_THRESHOLD` within this many rounds is
/// abandoned, and sampling starts over (BBRv1: four times the minimum).
const INTERVAL_MAX_ROUNDS: u32 = 4 * INTERVAL_MIN_ROUNDS;
/// An interval holds at least this many packets before its loss share is judged.
const INTERVAL_MIN_PACKETS: u64 = 100;
/// An interval ends once it has lost this share of what it sent. BBRv1's
/// `bbr_lt_loss_thresh` is 50/256, about 20 %; but soku holds paths that lose 20 % at
/// random, and there intervals cross 20 % half the time. Each crossing pair is tested
/// and rejected, but a test early on, while the loss bound still climbs to the link's
/// rate, sets the climb back: at 20 % the random-loss sweep's 20 % point fell from
/// 76.5 % to 72.4 % of the link for one seed (path simulator, `tests/loss_sim.rs`),
/// with 25 % the sweep's figures are those without a detector, and the policers of
/// that file are found as before.
const LOSS_THRESHOLD: f64 = 0.25;
/// The share an interval must lose once the flow's loss was found to rise with the
/// rate it sends ([`crate::rate_loss`]): BBRv2's loss threshold
/// (draft-cardwell-iccrg-bbr-congestion-control-02 §4.5.10.2, `BBRLossThresh`). Why:
/// behind a policer at half a 100 Mbit/s link the loss bound cuts every round that
/// loses 2 % beyond the rounds that send less, so no interval came near 25 % and the
/// flow sawed between 0.7 and 1.1 times the policed rate's window (path simulator).
const RISING_LOSS_THRESHOLD: f64 = 0.02;
/// Two intervals' delivery rates agree within this share of the first (BBRv1's
/// `bbr_lt_bw_ratio`, 1/8) ...
const FLAT_RATIO_DIVISOR: u64 = 8;
/// ... or within this many bytes/s (BBRv1's `bbr_lt_bw_diff`, 4 kbit/s).
const FLAT_DIFF: u64 = 4_000 / 8;
/// Rounds of the test that still carry what was sent before the window dropped to the
/// candidate's, and are not judged: a loss is declared a round after the packet left.
const TEST_SKIP_ROUNDS: u32 = 2;
/// The test judges once its rounds hold this many packets.
const TEST_MIN_PACKETS: u64 = 50;
/// The test passes if its rounds lose less than this share (a quarter of BBRv1's
/// 20 %): random loss of 5 % or more on top of a policer is taken for the path's, and
/// the floor rules stay in charge.
const TEST_LOSS_MAX: f64 = 0.05;
/// Rounds the path counts as policed once a test passed (BBRv1's
/// `bbr_lt_bw_max_rtts`); doubled each time the policer is met again at the same
/// rate right after, up to `POLICED_MAX_ROUNDS`.
const POLICED_ROUNDS: u32 = 48;
const POLICED_MAX_ROUNDS: u32 = 8 * POLICED_ROUNDS;
/// Rounds without sampling after the first rejected candidate; doubled after each
/// further one, up to `REST_MAX_ROUNDS`.
const REST_ROUNDS: u32 = 64;
const REST_MAX_ROUNDS: u32 = 1024;

/// What a round changed (see [`PolicerDetector::on_round`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing the model needs to act on.
    None,
    /// A candidate rate was found: the test begins.
    Testing,
    /// The path is policed (the test passed, or a lossy interval matched the
    /// reference).
    Policed,
    /// The candidate failed its test: the loss is the path's own.
    Rejected,
    /// The policed period ended; the window it held is where probing starts again.
    Expired {
        /// The window of the policed period, in bytes.
        window: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Watching for lossy intervals.
    Sampling,
    /// Sending at the candidate rate to see whether the loss vanishes.
    Testing { skip: u32, delivered: u64, lost: u64 },
    /// Sending at the policed rate for this many more rounds.
    Policed { left: u32 },
    /// No sampling for this many more rounds (after a rejected candidate).
    Resting { left: u32 },
}

/// Rounds added up into one interval.
#[derive(Debug, Clone, Copy, Default)]
struct Interval {
    rounds: u32,
    delivered: u64,
    lost: u64,
    elapsed: Duration,
    /// Bytes delivered and time spent by the rounds that lost something: what the
    /// rate is measured over.
    lossy_delivered: u64,
    lossy_elapsed: Duration,
}

/// The rate a candidate or policed period sends at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rate {
    /// Bytes per second delivered.
    bw: u64,
    /// The mean round time of the interval it was measured over.
    round_time: Duration,
}

impl Rate {
    fn window(&self) -> u64 {
        u64::try_from(u128::from(self.bw) * self.round_time.as_nanos() / 1_000_000_000)
            .unwrap_or(u64::MAX)
    }
}

/// BBRv1's long-term bandwidth sampling, with a test of each candidate (see the
/// module's docs).
#[derive(Debug, Clone)]
pub struct PolicerDetector {
    state: State,
    interval: Option<Interval>,
    /// The delivery rate of the last finished interval that lost `LOSS_THRESHOLD`.
    last: Option<u64>,
    /// The rate of the last policed period, until a test at it fails.
    reference: Option<u64>,
    /// Whether the candidate under test is `reference` met again.
    retest: bool,
    /// The candidate under test, or the policed rate.
    rate: Option<Rate>,
    /// Rounds to rest after the next rejected candidate.
    rest: u32,
    /// Rounds the next policed period lasts.
    hold: u32,
}

impl Default for PolicerDetector {
    fn default() -> Self {
        Self::new()
    }
}

impl PolicerDetector {
    /// A detector that has seen nothing.
    pub fn new() -> Self {
        Self {
            state: State::Sampling,
            interval: None,
            last: None,
            reference: None,
            retest: false,
            rate: None,
            rest: REST_ROUNDS,
            hold: POLICED_ROUNDS,
        }
    }

    /// Whether the path is policed: send at most [`window`](Self::window), and take no
    /// loss for the path's own.
    pub fn policed(&self) -> bool {
        matches!(self.state, State::Policed { .. })
    }

    /// Whether a candidate is under test: send at most [`window`](Self::window), and
    /// judge no round congested (the test judges them).
    pub fn testing(&self) -> bool {
        matches!(self.state, State::Testing { .. })
    }

    /// The policed or tested rate in bytes/s, if any.
    pub fn rate(&self) -> Option<u64> {
        match self.state {
            State::Testing { .. } | State::Policed { .. } => self.rate.map(|r| r.bw),
            _ => None,
        }
    }

    /// The most the window may hold while testing or policed: the rate times the
    /// interval's mean round time, so the flow sends at the rate, with no allowances
    /// on top (at a twentieth of a 100 Mbit/s link, the allowances alone are two to
    /// three times the policed rate's bandwidth-delay product).
    pub fn window(&self) -> Option<u64> {
        match self.state {
            State::Testing { .. } | State::Policed { .. } => self.rate.map(|r| r.window()),
            _ => None,
        }
    }

    /// Takes round `s` (`mtu` bytes a packet). `ignore` marks a round whose losses
    /// say nothing of the path's rate (probe-RTT, the losses of a retreated jump): it
    /// is left out of sampling. `rises_with_rate`: the flow's loss was found to rise
    /// with what its rounds send ([`crate::rate_loss`]). `queued`: the round met a
    /// queue (its smallest RTT stood above the path's floor, or the flow's loss is
    /// found to come at the top of the RTT range, [`crate::queue_loss`]).
    pub fn on_round(
        &mut self,
        s: &RoundSample,
        mtu: u64,
        ignore: bool,
        rises_with_rate: bool,
        queued: bool,
    ) -> Change {
        match self.state {
            // A policer drops what exceeds its rate at once and queues nothing: loss
            // that comes with a queue is a bottleneck's, shared with other flows or
            // overrun by this one's startup.
            State::Sampling if queued => {
                self.forget();
                Change::None
            }
            State::Sampling => self.sample(s, mtu, ignore, rises_with_rate),
            State::Testing { skip, delivered, lost } => {
                if skip > 0 {
                    self.state = State::Testing { skip: skip - 1, delivered, lost };
                    return Change::None;
                }
                // Beside CUBIC in a quarter-BDP buffer the rounds after startup's
                // overshoot lose a few percent at a flat rate (the link's, less
                // CUBIC's share), and at that rate they lose under 5 %: without this
                // the shared link was called a policer (path simulator, 100 Mbit/s x
                // 50 ms; on the emulator the copy then left QUIC for TCP).
                if queued {
                    return self.reject();
                }
                let (delivered, lost) = (delivered + s.delivered, lost + s.lost);
                if (delivered + lost) / mtu.max(1) < TEST_MIN_PACKETS {
                    self.state = State::Testing { skip, delivered, lost };
                    return Change::None;
                }
                if share(lost, delivered) < TEST_LOSS_MAX {
                    // The policer held since the last period: probe for its end less
                    // often.
                    self.hold = if self.retest {
                        (self.hold * 2).min(POLICED_MAX_ROUNDS)
                    } else {
                        POLICED_ROUNDS
                    };
                    self.state = State::Policed { left: self.hold };
                    Change::Policed
                } else {
                    self.reject()
                }
            }
            State::Policed { left } if left > 1 => {
                self.state = State::Policed { left: left - 1 };
                Change::None
            }
            State::Policed { .. } => {
                let rate = self.rate.take();
                self.state = State::Sampling;
                self.reference = rate.map(|r| r.bw);
                rate.map_or(Change::None, |r| Change::Expired { window: r.window() })
            }
            State::Resting { left } => {
                self.state =
                    if left > 1 { State::Resting { left: left - 1 } } else { State::Sampling };
                Change::None
            }
        }
    }

    /// The candidate failed its test: the loss is not a policer's. Sampling rests,
    /// longer after each rejection.
    fn reject(&mut self) -> Change {
        self.state = State::Resting { left: self.rest };
        self.rest = (self.rest * 2).min(REST_MAX_ROUNDS);
        self.rate = None;
        self.reference = None;
        Change::Rejected
    }

    fn sample(&mut self, s: &RoundSample, mtu: u64, ignore: bool, rises_with_rate: bool) -> Change {
        if s.app_limited {
            // The rate says less than the path carries (BBRv1 resets here too).
            self.forget();
            return Change::None;
        }
        if ignore {
            return Change::None;
        }
        let Some(mut i) = self.interval else {
            // An interval starts at the first loss.
            if s.lost > 0 {
                self.interval = Some(Interval::default());
            }
            return Change::None;
        };
        i.rounds += 1;
        i.delivered += s.delivered;
        i.lost += s.lost;
        i.elapsed += s.elapsed;
        if s.lost > 0 {
            i.lossy_delivered += s.delivered;
            i.lossy_elapsed += s.elapsed;
        }
        self.interval = Some(i);
        let packets = (i.delivered + i.lost) / mtu.max(1);
        let loss = share(i.lost, i.delivered);
        // A policer met before is looked for again at a lower share of loss: after a
        // policed period the loss bound probes above the rate a little at a time, and
        // each cut keeps the loss of an interval under `LOSS_THRESHOLD` (in the path
        // simulator, 10-11 % of what was sent, for good). The test tells it from
        // random loss at that rate.
        // So is one whose loss was found to rise with the rate ([`crate::rate_loss`]):
        // random loss never shows that, and the loss bound then keeps an interval's
        // loss to a few percent.
        let pair = if rises_with_rate { RISING_LOSS_THRESHOLD } else { LOSS_THRESHOLD };
        let threshold = if self.reference.is_some() { pair.min(TEST_LOSS_MAX) } else { pair };
        if i.rounds < INTERVAL_MIN_ROUNDS || packets < INTERVAL_MIN_PACKETS || loss < threshold {
            if i.rounds > INTERVAL_MAX_ROUNDS {
                self.forget();
            }
            return Change::None;
        }
        // Over the rounds that lost: a policer passes its rate in a round sent above
        // it, while a round sent under it delivers less. With loss kept to a few
        // percent, the rounds under the rate are many, and the rate of whole
        // intervals was 0.78 of the policer's (path simulator, 50 Mbit/s policer,
        // 100 ms). Under heavy loss every round lost, and this is BBRv1's rate.
        let bw = u64::try_from(
            u128::from(i.lossy_delivered) * 1_000_000_000 / i.lossy_elapsed.as_nanos().max(1),
        )
        .unwrap_or(u64::MAX);
        // The next interval starts right away.
        self.interval = Some(Interval::default());
        let round_time = i.elapsed / i.rounds.max(1);
        let (matched, retest) = match (self.reference, self.last) {
            (Some(r), _) if flat(bw, r) => (r, true),
            (_, Some(last)) if loss >= pair && flat(bw, last) => (last, false),
            _ => {
                self.last = (loss >= pair).then_some(bw);
                return Change::None;
            }
        };
        self.rate = Some(Rate { bw: (bw + matched) / 2, round_time });
        self.retest = retest;
        self.interval = None;
        self.last = None;
        self.state = State::Testing { skip: TEST_SKIP_ROUNDS, delivered: 0, lost: 0 };
        Change::Testing
    }

    /// Drops the interval under way and the last interval's rate.
    fn forget(&mut self) {
        self.interval = None;
        self.last = None;
    }
}

/// Whether delivery rates `a` and `b` agree (BBRv1's test).
fn flat(a: u64, b: u64) -> bool {
    let diff = a.abs_diff(b);
    diff <= b / FLAT_RATIO_DIVISOR || diff <= FLAT_DIFF
}

/// `lost` as a share of `delivered + lost`.
fn share(lost: u64, delivered: u64) -> f64 {
    let total = delivered + lost;
    if total == 0 {
        0.0
    } else {
        lost as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: u64 = 1500;

    /// A round of 50 ms sending `sent` packets of which `delivered` arrive.
    fn round(n: u64, sent: u64, delivered: u64) -> RoundSample {
        RoundSample {
            round: n,
            delivered: delivered * MTU,
            lost: (sent - delivered) * MTU,
            elapsed: Duration::from_millis(50),
            send_elapsed: Duration::from_millis(50),
            app_limited: false,
            min_rtt: Some(Duration::from_millis(50)),
            interval_rate: None,
        }
    }

    /// Feeds rounds from `sent(n)` and `delivered(n)` until a change other than
    /// `None`, or `limit` rounds; returns it and the round it came in.
    fn run(
        d: &mut PolicerDetector,
        from: u64,
        limit: u64,
        mut f: impl FnMut(u64) -> (u64, u64),
    ) -> (Change, u64) {
        for n in from..from + limit {
            let (sent, delivered) = f(n);
            let c = d.on_round(&round(n, sent, delivered), MTU, false, false, false);
            if c != Change::None {
                return (c, n);
            }
        }
        (Change::None, from + limit)
    }

    #[test]
    fn a_flat_rate_under_heavy_loss_is_tested_then_policed() {
        let mut d = PolicerDetector::new();
        // 60 packets sent a round, 21 get through: a policer.
        let (c, n) = run(&mut d, 1, 40, |_| (60, 21));
        assert_eq!(c, Change::Testing);
        assert!(d.testing());
        assert_eq!(d.window(), Some(21 * MTU));
        // At the candidate's rate nothing is lost.
        let (c, n) = run(&mut d, n + 1, 20, |_| (21, 21));
        assert_eq!(c, Change::Policed);
        assert!(d.policed());
        let (c, n) = run(&mut d, n + 1, 100, |_| (21, 21));
        assert_eq!(c, Change::Expired { window: 21 * MTU });
        assert!(!d.policed() && d.window().is_none());
        // After the policed period one interval losing 5 % at the same rate is
        // tested again.
        let (c, n) = run(&mut d, n + 1, 20, |_| (23, 21));
        assert_eq!(c, Change::Testing);
        let (c, n) = run(&mut d, n + 1, 20, |_| (21, 21));
        assert_eq!(c, Change::Policed);
        // And held twice as long.
        let (c, m) = run(&mut d, n + 1, 200, |_| (21, 21));
        assert_eq!((c, m - n), (Change::Expired { window: 21 * MTU }, 2 * 48));
    }

    /// Feeds `rounds` rounds of (`sent`, `delivered`) that met a queue; returns the
    /// changes other than `None`.
    fn queued(
        d: &mut PolicerDetector,
        from: u64,
        rounds: u64,
        sent: u64,
        delivered: u64,
    ) -> Vec<Change> {
        (from..from + rounds)
            .map(|n| d.on_round(&round(n, sent, delivered), MTU, false, false, true))
            .filter(|c| *c != Change::None)
            .collect()
    }

    #[test]
    fn loss_that_comes_with_a_queue_is_no_policers() {
        // A policer's pattern, but every round met a queue: never a candidate.
        let mut d = PolicerDetector::new();
        assert_eq!(queued(&mut d, 1, 200, 60, 21), vec![]);
        assert!(!d.testing() && !d.policed());
        // A candidate found queue-free fails its test once a round at its rate queues,
        // however little it loses.
        let (c, n) = run(&mut d, 201, 40, |_| (60, 21));
        assert_eq!(c, Change::Testing);
        let skipped = queued(&mut d, n + 1, u64::from(TEST_SKIP_ROUNDS), 21, 21);
        assert_eq!(skipped, vec![]);
        let tested = queued(&mut d, n + 1 + u64::from(TEST_SKIP_ROUNDS), 1, 21, 21);
        assert_eq!(tested, vec![Change::Rejected]);
        assert!(!d.testing() && !d.policed() && d.window().is_none());
    }

    #[test]
    fn loss_that_stays_at_the_candidate_rate_is_the_paths() {
        let mut d = PolicerDetector::new();
        // 30 % of every round lost, at any rate.
        let (c, n) = run(&mut d, 1, 40, |_| (1000, 700));
        assert_eq!(c, Change::Testing);
        let (c, n) = run(&mut d, n + 1, 20, |_| (700, 490));
        assert_eq!(c, Change::Rejected);
        assert!(!d.testing() && !d.policed());
        // Sampling rests for `REST_ROUNDS`.
        let (c, _) = run(&mut d, n + 1, u64::from(REST_ROUNDS), |_| (1000, 700));
        assert_eq!(c, Change::None);
    }

    #[test]
    fn a_delivery_rate_that_moves_with_the_rate_sent_is_not_a_policer() {
        let mut d = PolicerDetector::new();
        // 30 % lost, the rate sent a half higher in every other interval (intervals
        // start after the first lossy round and span four rounds).
        let (c, _) =
            run(&mut d, 1, 200, |n| if ((n + 2) / 4) % 2 == 0 { (80, 56) } else { (120, 84) });
        assert_eq!(c, Change::None);
    }

    #[test]
    fn loss_under_the_threshold_never_ends_an_interval() {
        let mut d = PolicerDetector::new();
        // 20 % lost, as on the lossiest paths soku holds at the link's rate.
        let (c, _) = run(&mut d, 1, 200, |_| (100, 80));
        assert_eq!(c, Change::None);
    }
}
