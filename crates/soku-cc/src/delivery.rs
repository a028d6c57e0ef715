//! Round counting and per-round delivery samples.
//!
//! A *round* (draft-cardwell-iccrg-bbr-congestion-control §4.5.1, "round-trip counting")
//! starts when a packet is sent and ends when that packet, or any later one, is
//! acknowledged. quinn tells us the packet number of each transmission
//! ([`on_sent`](DeliveryTracker::on_sent)) and the largest number acknowledged in each
//! batch ([`on_end_acks`](DeliveryTracker::on_end_acks)), which is all a round counter
//! needs. At the end of each round we emit a [`RoundSample`]: bytes acknowledged and
//! lost during the round, the time it spanned, and so the delivery rate, as seen at the
//! sender. Measuring over a whole round (about one RTT) rather than per packet makes
//! the sample robust to ack compression and batching without per-packet state.
//!
//! Every rate is bytes over the longer of two spans (BBR's rule, draft §4.5.2.4): the
//! time over which their acks arrived, and the time over which the packets were sent
//! (from the newest send acknowledged at the span's start to the newest at its end).
//! Data cannot reach the receiver faster than it left the sender, so acks that arrive
//! bunched, or carry a stale arrival time (quinn stamps a datagram with the start of
//! its receive loop, which a descheduled endpoint task makes milliseconds old), cannot
//! raise the rate above the rate the data was sent at.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Delivery marks kept per rate interval (one every 1/16 of it).
const MARKS_PER_INTERVAL: u32 = 16;

/// What one round delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundSample {
    /// Round number (starts at 1 for the first completed round).
    pub round: u64,
    /// Bytes newly acknowledged during the round.
    pub delivered: u64,
    /// Bytes declared lost during the round (plus one packet per ECN congestion mark).
    pub lost: u64,
    /// Time between the end of the previous round and the end of this one.
    pub elapsed: Duration,
    /// Time between the sends of the newest packets acknowledged at the end of the
    /// previous round and at the end of this one (zero when unknown).
    pub send_elapsed: Duration,
    /// Whether the sender was app-limited at some point in the round, in which case
    /// the rate understates what the path can carry.
    pub app_limited: bool,
    /// Smallest RTT sample taken during the round.
    pub min_rtt: Option<Duration>,
    /// Highest delivery rate (bytes/s) over any span of one rate interval (the caller's
    /// min RTT) that ended during the round. A probe's extra data is acknowledged in a
    /// burst that a whole-round average would dilute; this catches it, much as BBR's
    /// per-packet rate samples do (draft §4.5.2.4).
    pub interval_rate: Option<u64>,
}

impl RoundSample {
    /// The best delivery rate the round showed: the interval rate, else the round's.
    pub fn best_rate(&self) -> Option<u64> {
        match (self.interval_rate, self.rate()) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// Delivery rate over the round in bytes per second, if the round spanned time:
    /// bytes over the longer of the ack and the send span (see the module's docs).
    pub fn rate(&self) -> Option<u64> {
        rate_over(self.delivered, self.elapsed.max(self.send_elapsed))
    }

    /// Share of the round's packets that were lost, in `[0, 1]`.
    pub fn loss_fraction(&self) -> f64 {
        let total = self.delivered + self.lost;
        if total == 0 {
            0.0
        } else {
            self.lost as f64 / total as f64
        }
    }
}

/// `bytes` per second over `span`; `None` for an empty span.
fn rate_over(bytes: u64, span: Duration) -> Option<u64> {
    let nanos = span.as_nanos();
    if nanos == 0 {
        return None;
    }
    u64::try_from(u128::from(bytes) * 1_000_000_000 / nanos).ok()
}

/// Time from the `first` send to the `last` (zero when either is unknown).
fn send_span(first: Option<Instant>, last: Option<Instant>) -> Duration {
    match (first, last) {
        (Some(first), Some(last)) => last.saturating_duration_since(first),
        _ => Duration::ZERO,
    }
}

/// Delivery up to an instant: what the interval rate is measured between.
#[derive(Debug, Clone, Copy)]
struct Mark {
    /// When the acks counted in `delivered` had arrived.
    at: Instant,
    /// Bytes acknowledged in total by then.
    delivered: u64,
    /// Send time of the newest packet acknowledged by then.
    sent: Option<Instant>,
}

impl Mark {
    /// The span from `self` to `later`: the longer of the ack and the send span.
    fn span_to(&self, later: &Mark) -> Duration {
        let acks = later.at.saturating_duration_since(self.at);
        acks.max(send_span(self.sent, later.sent))
    }
}

/// Counts rounds and accumulates delivery within the current one.
#[derive(Debug, Clone)]
pub struct DeliveryTracker {
    round: u64,
    /// The round ends when a packet numbered at least this is acknowledged.
    round_end_pn: Option<u64>,
    last_sent_pn: Option<u64>,
    round_start: Option<Instant>,
    /// Send time of the newest packet acknowledged when the current round started.
    round_start_sent: Option<Instant>,
    /// Send time of the newest packet acknowledged so far.
    newest_acked_sent: Option<Instant>,
    delivered: u64,
    lost: u64,
    app_limited: bool,
    min_rtt: Option<Duration>,
    total_delivered: u64,
    /// Marks spanning at least one rate interval, oldest first.
    marks: VecDeque<Mark>,
    interval_rate: Option<u64>,
}

impl Default for DeliveryTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl DeliveryTracker {
    /// A tracker with no round started.
    pub fn new() -> Self {
        Self {
            round: 0,
            round_end_pn: None,
            last_sent_pn: None,
            round_start: None,
            round_start_sent: None,
            newest_acked_sent: None,
            delivered: 0,
            lost: 0,
            app_limited: false,
            min_rtt: None,
            total_delivered: 0,
            marks: VecDeque::new(),
            interval_rate: None,
        }
    }

    /// Rounds completed so far.
    pub fn round(&self) -> u64 {
        self.round
    }

    /// Bytes acknowledged since the tracker was created.
    pub fn total_delivered(&self) -> u64 {
        self.total_delivered
    }

    /// Highest delivery rate (bytes/s) over one rate interval seen so far in the
    /// current round: what the round's [`RoundSample::interval_rate`] will be at least.
    pub fn running_interval_rate(&self) -> Option<u64> {
        self.interval_rate
    }

    /// A transmission whose last packet number is `pn` left at `now`.
    pub fn on_sent(&mut self, now: Instant, pn: u64) {
        self.last_sent_pn = Some(pn);
        if self.round_end_pn.is_none() {
            self.round_end_pn = Some(pn);
        }
        if self.round_start.is_none() {
            self.round_start = Some(now);
        }
    }

    /// `bytes` sent at `sent` were acknowledged at `now`.
    pub fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool) {
        self.delivered += bytes;
        self.total_delivered += bytes;
        self.app_limited |= app_limited;
        self.newest_acked_sent = Some(self.newest_acked_sent.map_or(sent, |t| t.max(sent)));
        let rtt = now.saturating_duration_since(sent);
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
    }

    /// `bytes` were declared lost (an ECN mark counts as `bytes` too).
    pub fn on_loss(&mut self, bytes: u64) {
        self.lost += bytes;
    }

    /// The losses counted in the current round so far are not the path's answer to what
    /// the round sends (they were already answered, by a collapse of the window).
    pub fn forget_losses(&mut self) {
        self.lost = 0;
    }

    /// The sender is app-limited now; the current round's rate is not a path limit.
    pub fn mark_app_limited(&mut self) {
        self.app_limited = true;
    }

    /// The delivery state now.
    fn mark(&self, now: Instant) -> Mark {
        Mark { at: now, delivered: self.total_delivered, sent: self.newest_acked_sent }
    }

    /// Track the delivery rate over the last `interval` (normally the min RTT).
    fn sample_interval(&mut self, now: Instant, interval: Duration) {
        if interval.is_zero() {
            return;
        }
        let step = interval / MARKS_PER_INTERVAL;
        let current = self.mark(now);
        match self.marks.back_mut() {
            // A mark means "delivered up to and including t": several ack batches
            // at one instant all belong to it.
            Some(back) if back.at == now => *back = current,
            Some(back) if now.saturating_duration_since(back.at) < step => {}
            _ => self.marks.push_back(current),
        }
        // Keep exactly one mark at least `interval` old.
        while self.marks.get(1).is_some_and(|m| now.saturating_duration_since(m.at) >= interval) {
            self.marks.pop_front();
        }
        if let Some(first) = self.marks.front() {
            if now.saturating_duration_since(first.at) >= interval {
                let rate = rate_over(current.delivered - first.delivered, first.span_to(&current));
                self.interval_rate = self.interval_rate.max(rate);
            }
        }
    }

    /// A batch of acks ended; returns the sample if it closed a round. `interval` is
    /// the span over which interval rates are measured (the min RTT, once known).
    pub fn on_end_acks(
        &mut self,
        now: Instant,
        largest_acked: Option<u64>,
        app_limited: bool,
        interval: Option<Duration>,
    ) -> Option<RoundSample> {
        self.app_limited |= app_limited;
        if let Some(interval) = interval {
            self.sample_interval(now, interval);
        }
        let (Some(acked), Some(end)) = (largest_acked, self.round_end_pn) else {
            return None;
        };
        if acked < end {
            return None;
        }
        let start = self.round_start.unwrap_or(now);
        self.round += 1;
        let sample = RoundSample {
            round: self.round,
            delivered: self.delivered,
            lost: self.lost,
            elapsed: now.saturating_duration_since(start),
            send_elapsed: send_span(self.round_start_sent, self.newest_acked_sent),
            app_limited: self.app_limited,
            min_rtt: self.min_rtt,
            interval_rate: self.interval_rate,
        };
        // The next round ends when a packet sent after this moment is acknowledged
        // (draft-cardwell-iccrg-bbr-congestion-control §4.5.1).
        self.round_end_pn = self.last_sent_pn.map(|pn| pn.max(acked) + 1);
        self.round_start = Some(now);
        self.round_start_sent = self.newest_acked_sent;
        self.delivered = 0;
        self.lost = 0;
        self.app_limited = false;
        self.min_rtt = None;
        self.interval_rate = None;
        Some(sample)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn one_round_per_rtt_and_rate() {
        let t0 = Instant::now();
        let mut d = DeliveryTracker::new();
        // Round 1 ends when the first packet sent is acked.
        d.on_sent(t0, 0);
        d.on_ack(t0 + ms(100), t0, 1000, false);
        let s = d.on_end_acks(t0 + ms(100), Some(0), false, None).expect("round 1");
        assert_eq!((s.round, s.delivered, s.elapsed), (1, 1000, ms(100)));
        // Round 2 ends with the ack of packet 1, the first sent after round 1 ended.
        let t1 = t0 + ms(100);
        for pn in 1..=10 {
            d.on_sent(t1, pn);
        }
        d.on_ack(t1 + ms(100), t1, 1000, false);
        let s = d.on_end_acks(t1 + ms(100), Some(1), false, None).expect("round 2");
        assert_eq!(s.round, 2);
        // Round 3 needs packet 11: acks of 2..=10 do not end it.
        for pn in 2..=10 {
            d.on_ack(t1 + ms(100), t1, 1000, false);
            assert!(d.on_end_acks(t1 + ms(100), Some(pn), false, None).is_none());
        }
        let t2 = t1 + ms(100);
        d.on_sent(t2, 11);
        d.on_ack(t2 + ms(100), t2, 1000, false);
        let s = d.on_end_acks(t2 + ms(100), Some(11), false, None).expect("round 3");
        assert_eq!(s.round, 3);
        assert_eq!(s.delivered, 10_000);
        assert_eq!(s.elapsed, ms(100));
        assert_eq!(s.rate(), Some(100_000));
        assert_eq!(s.min_rtt, Some(ms(100)));
    }

    #[test]
    fn loss_and_app_limited_are_per_round() {
        let t0 = Instant::now();
        let mut d = DeliveryTracker::new();
        d.on_sent(t0, 0);
        d.on_sent(t0, 1);
        d.on_loss(1000);
        d.on_ack(t0 + ms(50), t0, 3000, true);
        let s = d.on_end_acks(t0 + ms(50), Some(1), false, None).expect("round ends");
        assert!(s.app_limited);
        assert!((s.loss_fraction() - 0.25).abs() < 1e-9);
        // Next round starts clean.
        d.on_sent(t0 + ms(50), 2);
        d.on_ack(t0 + ms(100), t0 + ms(50), 1000, false);
        let s = d.on_end_acks(t0 + ms(100), Some(2), false, None).expect("round ends");
        assert!(!s.app_limited);
        assert_eq!(s.lost, 0);
        assert_eq!(s.round, 2);
        assert_eq!(d.round(), 2);
        assert_eq!(d.total_delivered(), 4000);
    }

    #[test]
    fn interval_rate_catches_a_burst_inside_a_long_round() {
        let t0 = Instant::now();
        let mut d = DeliveryTracker::new();
        d.on_sent(t0, 0);
        // 1000 bytes every 10 ms for 300 ms, with a 5000-byte burst at 200 ms.
        for i in 1..=30u64 {
            let now = t0 + ms(10 * i);
            d.on_ack(now, t0, if i == 20 { 6000 } else { 1000 }, false);
            assert!(d.on_end_acks(now, None, false, Some(ms(100))).is_none());
        }
        d.on_ack(t0 + ms(310), t0, 1000, false);
        let s = d.on_end_acks(t0 + ms(310), Some(0), false, Some(ms(100))).expect("round ends");
        // Whole round: 36 kB / 310 ms; best 100 ms span: 15 kB.
        assert_eq!(s.rate(), Some(116_129));
        assert_eq!(s.interval_rate, Some(150_000));
        assert_eq!(s.best_rate(), Some(150_000));
    }

    #[test]
    fn bunched_acks_do_not_raise_the_rate_above_the_send_rate() {
        let t0 = Instant::now();
        let mut d = DeliveryTracker::new();
        // 1000 bytes sent every 10 ms (100 kB/s) over a 100 ms path; the acks of the
        // first ten arrive on time, the next ten all at once (a receive loop that ran
        // late, or bunched acks): 11 kB acknowledged in 10 ms.
        for pn in 0..20u64 {
            d.on_sent(t0 + ms(10 * pn), pn);
        }
        let ack = |d: &mut DeliveryTracker, at: Duration, pn: u64| {
            d.on_ack(t0 + at, t0 + ms(10 * pn), 1000, false);
            d.on_end_acks(t0 + at, Some(pn), false, Some(ms(50)))
        };
        for pn in 0..10 {
            ack(&mut d, ms(100 + 10 * pn), pn);
        }
        for pn in 10..20 {
            ack(&mut d, ms(200), pn);
        }
        // Over the last 50 ms of acks (marks at 150 ms and 200 ms) 14 kB arrived, but
        // those packets left over 140 ms (sent 50 ms to 190 ms): 100 kB/s, not 280.
        assert_eq!(d.running_interval_rate(), Some(100_000));
        // Round 2 (from the ack of packet 0 to that of packet 20) spans its sends too.
        d.on_sent(t0 + ms(200), 20);
        let s = ack(&mut d, ms(200), 20).expect("packet 20's ack ends round 2");
        assert_eq!(
            (s.round, s.delivered, s.elapsed, s.send_elapsed),
            (2, 20_000, ms(100), ms(200))
        );
        assert_eq!(s.rate(), Some(100_000));
    }

    #[test]
    fn zero_elapsed_has_no_rate() {
        let s = RoundSample {
            round: 1,
            delivered: 10,
            lost: 0,
            elapsed: Duration::ZERO,
            send_elapsed: Duration::ZERO,
            app_limited: false,
            min_rtt: None,
            interval_rate: None,
        };
        assert_eq!(s.rate(), None);
        assert_eq!(s.best_rate(), None);
        assert_eq!(s.loss_fraction(), 0.0);
    }
}
