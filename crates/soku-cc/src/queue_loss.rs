//! Loss told apart by the queue it came with: does the share of packets lost while the
//! RTT was at the top of its recent range exceed the share lost below it?
//!
//! Random loss (a lossy radio hop, a dirty fibre) does not care how full the
//! bottleneck queue is: it takes the same share of the packets sent into a full queue
//! as of those sent into an empty one. A drop-tail buffer drops only while it is full,
//! that is while the RTT is at its top. So the packets an ack frame acknowledges are
//! put in one of two classes by an RTT sample (the controller gives the frame's
//! smallest): *top* when the sample is in the upper quarter of the range between the
//! min RTT and the largest sample of the recent rounds ([`at_top`]), *below*
//! otherwise; and every loss by the sample of the ack frame that revealed it (the
//! packets sent right after the lost one, which met the queue it would have met). This is the *Spike* loss classifier (Tobe, Tamura, Molano, Ghosh and
//! Tokuda, "Achieving moderate fairness for UDP flows by path-status classification",
//! IEEE LCN 2000; evaluated by Cen, Cosman and Voelker, "End-to-end differentiation of
//! congestion and wireless losses", IEEE/ACM Transactions on Networking 11(5), 2003),
//! which calls a loss congestion when the trip time is above `min + alpha x (max -
//! min)`. TCP Veno (Fu and Liew, IEEE JSAC 21(2), 2003) makes the same split with
//! Vegas's backlog estimate at the time of a loss.
//!
//! Cen et al. found that such classifiers misjudge single losses often, so this one
//! does not judge a loss by itself. It compares the *shares* lost in the two classes
//! over the last [`ROUNDS`] rounds (a two-sample test on binomial proportions): only
//! when the top class loses a larger share by more than [`SIGMAS`] standard deviations
//! of sampling noise, and by more than the share below itself (twice the share
//! below), is the loss at the top beyond the share below taken as the queue's
//! ([`QueueLoss::top_excess`]). With random loss alone both classes lose the same
//! share, whatever the rate, and nothing is found (a finding is also given up as soon
//! as the top no longer loses twice the share below); in a shallow buffer the share
//! below is the path's random loss, near zero on a clean path, and the share at the
//! top is what the buffer drops. What a round does with it is
//! `SokuCc::round_congested`'s to say.

use std::collections::VecDeque;
use std::time::Duration;

/// Rounds over which the two shares are counted. A queue that stands near the top of
/// its range leaves few packets below it, and a loss share of a fraction of a percent
/// (a buffer overflowing a few packets at a time) needs thousands of packets to tell
/// from zero: 64 rounds are 3.2 s at 50 ms.
pub const ROUNDS: usize = 64;
/// A sample is at the top of the RTT range above `min + TOP x (max - min)`.
/// Spike enters its congested state at half the range; a full drop-tail queue keeps
/// the RTT at the top of it, and a higher line keeps out a queue that a probing round
/// builds and drains without a drop.
pub const TOP: f64 = 0.75;
/// The top class must lose a larger share than the class below by this many standard
/// deviations of sampling noise: with a test every round, 2 would find a difference
/// in random loss every few seconds.
pub const SIGMAS: f64 = 3.0;
/// Each class must count this many packets before the shares are compared.
pub const MIN_PACKETS: u64 = 50;
/// Packets lost in both classes together before a finding is given up: without loss
/// there is nothing to contradict it.
pub const MIN_LOST: u64 = 4;

/// Bytes acknowledged and lost in each class: the top one and the one below it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Bytes acknowledged whose RTT sample was at the top of the range.
    pub acked_top: u64,
    /// Bytes acknowledged whose RTT sample was below it.
    pub acked_below: u64,
    /// Bytes lost that acks at the top of the range revealed.
    pub lost_top: u64,
    /// Bytes lost that acks below it revealed.
    pub lost_below: u64,
}

impl Counts {
    pub(crate) fn add(&mut self, o: &Counts) {
        self.acked_top += o.acked_top;
        self.acked_below += o.acked_below;
        self.lost_top += o.lost_top;
        self.lost_below += o.lost_below;
    }

    /// Bytes of the top class, acknowledged or lost.
    pub fn top(&self) -> u64 {
        self.acked_top + self.lost_top
    }

    /// Bytes of the class below, acknowledged or lost.
    pub fn below(&self) -> u64 {
        self.acked_below + self.lost_below
    }
}

/// Whether `rtt` is at the top of the range from `min` to `max`; `None` when the
/// range is too narrow to tell (under an eighth of the min RTT, or under 1 ms): no
/// queue to speak of, so nothing to tell by.
pub fn at_top(rtt: Duration, min: Duration, max: Duration) -> Option<bool> {
    let range = max.saturating_sub(min);
    if range < (min / 8).max(Duration::from_millis(1)) {
        return None;
    }
    Some(rtt >= min + range.mul_f64(TOP))
}

/// How a shallow queue's loss looks to the controller, for reports and traces.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QueueView {
    /// The share lost at the top of the RTT range over the last [`ROUNDS`] rounds;
    /// `None` with nothing counted.
    pub lost_top: Option<f64>,
    /// The same below the top.
    pub lost_below: Option<f64>,
    /// Whether the top class is found to lose more ([`QueueLoss::top_excess`]).
    pub found: bool,
    /// The top of the RTT range the samples are classed in.
    pub rtt_top: Option<Duration>,
    /// The loss bound on bytes in flight, if congestion set one.
    pub bound: Option<u64>,
    /// Whether that bound grows back as CUBIC's window does (`crate::coexist`).
    pub coexisting: bool,
}

/// The two classes' counts over the last [`ROUNDS`] rounds and the current one, and
/// what they last showed.
#[derive(Debug, Clone, Default)]
pub struct QueueLoss {
    rounds: VecDeque<Counts>,
    current: Counts,
    /// The share lost below the top, while the top class is found to lose more.
    found: Option<f64>,
}

impl QueueLoss {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// `bytes` were acknowledged with an RTT sample in the class `top`.
    pub fn on_acked(&mut self, bytes: u64, top: bool) {
        if top {
            self.current.acked_top += bytes;
        } else {
            self.current.acked_below += bytes;
        }
    }

    /// `bytes` were declared lost by acks in the class `top`.
    pub fn on_lost(&mut self, bytes: u64, top: bool) {
        if top {
            self.current.lost_top += bytes;
        } else {
            self.current.lost_below += bytes;
        }
    }

    /// A round ended: returns its counts, keeps them among the last [`ROUNDS`], and
    /// compares the two shares again (`mtu` turns bytes into packets for the noise).
    pub fn on_round(&mut self, mtu: u64) -> Counts {
        let done = std::mem::take(&mut self.current);
        if self.rounds.len() == ROUNDS {
            self.rounds.pop_front();
        }
        self.rounds.push_back(done);
        self.judge(mtu.max(1));
        done
    }

    /// The counts over the kept rounds.
    pub fn total(&self) -> Counts {
        let mut t = Counts::default();
        for c in &self.rounds {
            t.add(c);
        }
        t
    }

    /// The loss shares of the two classes over the kept rounds: (top, below).
    pub fn shares(&self) -> (Option<f64>, Option<f64>) {
        let t = self.total();
        let share = |lost: u64, all: u64| (all > 0).then(|| lost as f64 / all as f64);
        (share(t.lost_top, t.top()), share(t.lost_below, t.below()))
    }

    /// The loss share below the top of the range, while the top class is found to lose
    /// a larger share than it; `None` while the loss is not the queue's as far as can
    /// be told.
    pub fn top_excess(&self) -> Option<f64> {
        self.found
    }

    /// Finds that the top class loses more when it does so by [`SIGMAS`] standard
    /// deviations of the difference of two binomial shares (pooled) and by the share
    /// below itself; gives the finding up once the top loses no more than twice the
    /// share below, over at least [`MIN_LOST`] lost packets. In between, a finding
    /// stands with the share below updated: a queue that overflows a packet at a time
    /// may not show a significant difference every round.
    fn judge(&mut self, mtu: u64) {
        self.found = judge(&self.total(), mtu, self.found);
    }
}

/// The two-sample test of [`QueueLoss`] on the classes `t` (the upper class as *top*),
/// given what it found before: the share the lower class loses while the upper one is
/// found to lose more, else `None`. Also `crate::rate_loss`'s, with the classes by the
/// rate a round sent.
pub(crate) fn judge(t: &Counts, mtu: u64, found: Option<f64>) -> Option<f64> {
    let mtu = mtu.max(1);
    let (n_top, n_below) = (t.top() / mtu, t.below() / mtu);
    if n_top < MIN_PACKETS || n_below < MIN_PACKETS {
        return found;
    }
    let p_top = t.lost_top as f64 / t.top() as f64;
    let p_below = t.lost_below as f64 / t.below() as f64;
    let pooled = (t.lost_top + t.lost_below) as f64 / (t.top() + t.below()) as f64;
    let noise = (pooled * (1.0 - pooled) * (1.0 / n_top as f64 + 1.0 / n_below as f64)).sqrt();
    let beyond = p_top - p_below;
    if beyond > SIGMAS * noise && beyond > p_below {
        Some(p_below)
    } else if beyond <= p_below && t.lost_top + t.lost_below >= MIN_LOST * mtu {
        None
    } else {
        found.map(|_| p_below)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: u64 = 1000;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// `rounds` rounds of `top` and `below` packets, losing `lost_top` and `lost_below`
    /// of them.
    fn fill(q: &mut QueueLoss, rounds: usize, top: u64, below: u64, lost: (u64, u64)) {
        for _ in 0..rounds {
            q.on_acked((top - lost.0) * MTU, true);
            q.on_acked((below - lost.1) * MTU, false);
            q.on_lost(lost.0 * MTU, true);
            q.on_lost(lost.1 * MTU, false);
            q.on_round(MTU);
        }
    }

    #[test]
    fn the_top_is_judged_against_the_range() {
        assert_eq!(at_top(ms(59), ms(50), ms(62)), Some(true));
        assert_eq!(at_top(ms(55), ms(50), ms(62)), Some(false));
        // No queue to speak of.
        assert_eq!(at_top(ms(51), ms(50), ms(55)), None);
    }

    #[test]
    fn random_loss_takes_the_same_share_of_both_classes_and_is_not_the_queues() {
        for share in [1, 5, 10, 20] {
            let mut q = QueueLoss::new();
            fill(&mut q, ROUNDS, 100, 700, (share, 7 * share));
            assert_eq!(q.top_excess(), None, "{share} %");
        }
    }

    #[test]
    fn loss_at_the_top_alone_is_the_queues() {
        let mut q = QueueLoss::new();
        fill(&mut q, ROUNDS, 100, 700, (2, 0));
        assert_eq!(q.top_excess(), Some(0.0));
    }

    #[test]
    fn the_queues_loss_shows_over_random_loss() {
        let mut q = QueueLoss::new();
        fill(&mut q, ROUNDS, 100, 700, (30, 70));
        let below = q.top_excess().expect("queue loss");
        assert!((below - 0.1).abs() < 1e-9);
    }

    #[test]
    fn a_finding_stands_without_loss_and_goes_when_loss_spreads_evenly() {
        let mut q = QueueLoss::new();
        fill(&mut q, ROUNDS, 100, 700, (2, 0));
        fill(&mut q, ROUNDS, 100, 700, (0, 0));
        assert_eq!(q.top_excess(), Some(0.0));
        fill(&mut q, ROUNDS, 100, 700, (5, 35));
        assert_eq!(q.top_excess(), None);
    }

    #[test]
    fn too_few_packets_tell_nothing() {
        let mut q = QueueLoss::new();
        fill(&mut q, 1, 20, 100, (10, 0));
        assert_eq!(q.top_excess(), None);
    }
}
