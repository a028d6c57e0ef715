//! The link model: a pure state machine, no I/O and no clock.
//!
//! [`LinkModel::offer`] takes a packet length and the current time in nanoseconds (from
//! any epoch) and answers when the packet leaves the far end of the link, or why it is
//! dropped. The forwarding loop feeds it real time; the unit tests below feed it a fake one.
//!
//! Rate limiting is a virtual-time serializer: the link is busy until `busy_until`;
//! a packet accepted at `now` starts at `max(now, busy_until)` and ends `len*8/rate`
//! later. The bytes still waiting are `(busy_until - now) * rate / 8`, which is what the
//! drop-tail limit is checked against. Because departures are computed, not slept for,
//! lateness of the host's timers never accumulates into the rate.

use std::time::Duration;

use crate::rng::Rng;
use crate::spec::{Gilbert, LinkSpec};

const NS_PER_SEC: u128 = 1_000_000_000;

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The drop-tail queue in front of the rate limiter was full.
    Queue,
    /// Random or Gilbert-Elliott loss.
    Loss,
}

/// The model's answer for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Deliver at time `at` (ns); `reordered` packets may overtake FIFO order.
    Deliver {
        /// Delivery time, same clock as `now`.
        at: u64,
        /// True if the packet was picked for reordering (held back).
        reordered: bool,
    },
    /// Do not deliver.
    Drop(DropReason),
}

#[derive(Debug, Clone)]
struct GeState {
    params: Gilbert,
    bad: bool,
}

/// One direction's impairments and state.
#[derive(Debug, Clone)]
pub struct LinkModel {
    delay_ns: u64,
    jitter_ns: u64,
    loss: f64,
    ge: Option<GeState>,
    reorder: f64,
    reorder_ns: u64,
    rate_bps: Option<u64>,
    queue_bytes: u64,
    /// End of serialization of the last accepted packet (ns).
    busy_until: u64,
    /// Sub-nanosecond remainder of serialization times, in units of 1/rate ns.
    busy_frac: u128,
    last_delivery: u64,
    max_backlog: u64,
    rng: Rng,
}

fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl LinkModel {
    /// Builds the model; `queue_bytes` is the resolved limit (see
    /// [`LinkSpec::effective_queue_bytes`]), `seed` the PRNG seed.
    pub fn new(spec: &LinkSpec, queue_bytes: usize, seed: u64) -> LinkModel {
        LinkModel {
            delay_ns: ns(spec.delay),
            jitter_ns: ns(spec.jitter),
            loss: spec.loss,
            ge: spec.gilbert.map(|params| GeState { params, bad: false }),
            reorder: spec.reorder,
            reorder_ns: ns(spec.reorder_delay),
            rate_bps: spec.rate_bps.filter(|&r| r > 0),
            queue_bytes: queue_bytes as u64,
            busy_until: 0,
            busy_frac: 0,
            last_delivery: 0,
            max_backlog: 0,
            rng: Rng::new(seed),
        }
    }

    /// Bytes waiting for (or in) serialization at `now`.
    pub fn backlog_bytes(&self, now: u64) -> u64 {
        match self.rate_bps {
            Some(rate) if self.busy_until > now => {
                ((self.busy_until - now) as u128 * rate as u128 / (8 * NS_PER_SEC)) as u64
            }
            _ => 0,
        }
    }

    /// Largest backlog (including the packet being added) seen so far, in bytes.
    pub fn max_backlog_bytes(&self) -> u64 {
        self.max_backlog
    }

    /// Whether the Gilbert-Elliott chain is in its bad state (for tests and stats).
    pub fn in_bad_state(&self) -> bool {
        self.ge.as_ref().is_some_and(|g| g.bad)
    }

    /// Decides the fate of a packet of `len` bytes that arrives at `now`.
    pub fn offer(&mut self, now: u64, len: usize) -> Verdict {
        let len = len as u64;
        let departed = match self.rate_bps {
            Some(rate) => {
                let backlog = self.backlog_bytes(now);
                if backlog + len > self.queue_bytes {
                    return Verdict::Drop(DropReason::Queue);
                }
                self.max_backlog = self.max_backlog.max(backlog + len);
                if self.busy_until < now {
                    self.busy_until = now;
                    self.busy_frac = 0;
                }
                // Serialization time len*8/rate seconds, kept exact with a remainder.
                let num = len as u128 * 8 * NS_PER_SEC + self.busy_frac;
                let rate = rate as u128;
                self.busy_until = self.busy_until.saturating_add((num / rate) as u64);
                self.busy_frac = num % rate;
                self.busy_until
            }
            None => now,
        };
        if self.lose() {
            return Verdict::Drop(DropReason::Loss);
        }
        let mut at = departed.saturating_add(self.delay_ns);
        if self.jitter_ns > 0 {
            let j = self.rng.upto(2 * self.jitter_ns);
            at = (at + j).saturating_sub(self.jitter_ns).max(departed);
        }
        if self.rng.chance(self.reorder) {
            return Verdict::Deliver { at: at.saturating_add(self.reorder_ns), reordered: true };
        }
        // Jitter never reorders: a packet leaves no earlier than the one before it.
        at = at.max(self.last_delivery);
        self.last_delivery = at;
        Verdict::Deliver { at, reordered: false }
    }

    fn lose(&mut self) -> bool {
        let mut lost = self.rng.chance(self.loss);
        if let Some(ge) = &mut self.ge {
            // Decide in the current state, then step the chain.
            if ge.bad {
                lost |= self.rng.chance(ge.params.bad_loss);
                if self.rng.chance(ge.params.r) {
                    ge.bad = false;
                }
            } else if self.rng.chance(ge.params.p) {
                ge.bad = true;
            }
        }
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn deliver_at(v: Verdict) -> u64 {
        match v {
            Verdict::Deliver { at, .. } => at,
            Verdict::Drop(r) => panic!("dropped: {r:?}"),
        }
    }

    #[test]
    fn pure_delay() {
        let spec = LinkSpec { delay: Duration::from_millis(25), ..LinkSpec::default() };
        let mut m = LinkModel::new(&spec, usize::MAX, 1);
        assert_eq!(deliver_at(m.offer(1000, 1500)), 1000 + 25 * MS);
        assert_eq!(deliver_at(m.offer(2000, 60)), 2000 + 25 * MS);
    }

    #[test]
    fn rate_serializes_back_to_back() {
        // 100 Mbit/s: 1500 bytes take 120 us.
        let spec = LinkSpec {
            rate_bps: Some(100_000_000),
            delay: Duration::from_millis(10),
            ..LinkSpec::default()
        };
        let mut m = LinkModel::new(&spec, 1_000_000, 1);
        let t0 = 5 * MS;
        for i in 1..=10 {
            assert_eq!(deliver_at(m.offer(t0, 1500)), t0 + i * 120_000 + 10 * MS);
        }
        // 10 packets queued at t0: backlog is 15000 bytes.
        assert_eq!(m.backlog_bytes(t0), 15_000);
        // Half-way through, half left.
        assert_eq!(m.backlog_bytes(t0 + 600_000), 7_500);
        // An idle link starts afresh.
        let t1 = t0 + 10 * MS;
        assert_eq!(m.backlog_bytes(t1), 0);
        assert_eq!(deliver_at(m.offer(t1, 1500)), t1 + 120_000 + 10 * MS);
    }

    #[test]
    fn rate_has_no_rounding_drift() {
        // 3 bytes at 7 bit/s-ish odd rate: sum of many must equal the exact total.
        let spec = LinkSpec { rate_bps: Some(999_999_937), ..LinkSpec::default() };
        let mut m = LinkModel::new(&spec, usize::MAX, 1);
        let mut last = 0;
        for _ in 0..100_000 {
            last = deliver_at(m.offer(0, 1499));
        }
        let exact = 100_000u128 * 1499 * 8 * NS_PER_SEC / 999_999_937;
        assert!((last as i128 - exact as i128).abs() <= 1, "{last} vs {exact}");
    }

    #[test]
    fn queue_limit_drops_tail() {
        let spec = LinkSpec {
            rate_bps: Some(8_000_000), // 1 byte per us
            ..LinkSpec::default()
        };
        let mut m = LinkModel::new(&spec, 4500, 1);
        for _ in 0..3 {
            assert!(matches!(m.offer(0, 1500), Verdict::Deliver { .. }));
        }
        assert_eq!(m.offer(0, 1500), Verdict::Drop(DropReason::Queue));
        assert_eq!(m.max_backlog_bytes(), 4500);
        // 1500 us later one packet's worth has left: room again.
        assert!(matches!(m.offer(1_500_000, 1500), Verdict::Deliver { .. }));
        assert_eq!(m.offer(1_500_000, 1500), Verdict::Drop(DropReason::Queue));
        // A dropped packet takes no link time.
        assert_eq!(m.backlog_bytes(1_500_000), 4500);
    }

    #[test]
    fn random_loss_rate() {
        let spec = LinkSpec { loss: 0.05, ..LinkSpec::default() };
        let mut m = LinkModel::new(&spec, usize::MAX, 7);
        let n = 200_000;
        let lost = (0..n).filter(|_| m.offer(0, 100) == Verdict::Drop(DropReason::Loss)).count();
        let rate = lost as f64 / n as f64;
        let sigma = (0.05f64 * 0.95 / n as f64).sqrt();
        assert!((rate - 0.05).abs() < 4.0 * sigma, "loss {rate}");
    }

    #[test]
    fn gilbert_bursts() {
        let g = Gilbert { p: 0.02, r: 0.25, bad_loss: 1.0 };
        let spec = LinkSpec { gilbert: Some(g), ..LinkSpec::default() };
        let mut m = LinkModel::new(&spec, usize::MAX, 3);
        let n = 400_000;
        let (mut lost, mut bursts, mut in_burst) = (0u64, 0u64, false);
        for _ in 0..n {
            let l = m.offer(0, 100) == Verdict::Drop(DropReason::Loss);
            if l {
                lost += 1;
                if !in_burst {
                    bursts += 1;
                }
            }
            in_burst = l;
        }
        let mean_burst = lost as f64 / bursts as f64;
        assert!((mean_burst - 4.0).abs() < 0.2, "mean burst {mean_burst}");
        let rate = lost as f64 / n as f64;
        assert!((rate - g.mean_loss()).abs() < 0.005, "rate {rate}");
    }

    #[test]
    fn jitter_keeps_order_and_bounds() {
        let spec = LinkSpec {
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(2),
            ..LinkSpec::default()
        };
        let mut m = LinkModel::new(&spec, usize::MAX, 9);
        let mut prev = 0;
        let mut min = u64::MAX;
        for i in 0..10_000u64 {
            let now = i * 5 * MS; // sparse: jitter should show its full range
            let at = deliver_at(m.offer(now, 100));
            assert!(at >= prev);
            prev = at;
            let d = at - now;
            assert!((8 * MS..=12 * MS).contains(&d), "delay {d}");
            min = min.min(d);
        }
        assert!(min < 8 * MS + MS / 10);
    }

    #[test]
    fn reorder_holds_back() {
        let spec = LinkSpec {
            delay: Duration::from_millis(1),
            reorder: 0.1,
            reorder_delay: Duration::from_millis(3),
            ..LinkSpec::default()
        };
        let mut m = LinkModel::new(&spec, usize::MAX, 5);
        let mut held = 0;
        for i in 0..10_000u64 {
            match m.offer(i * 1000, 100) {
                Verdict::Deliver { at, reordered: true } => {
                    held += 1;
                    assert_eq!(at, i * 1000 + 4 * MS);
                }
                Verdict::Deliver { at, .. } => assert_eq!(at, i * 1000 + MS),
                Verdict::Drop(_) => panic!("no loss configured"),
            }
        }
        assert!((800..1200).contains(&held), "held {held}");
    }

    #[test]
    fn loss_after_queue_uses_link_time() {
        let spec = LinkSpec { rate_bps: Some(8_000_000), loss: 1.0, ..LinkSpec::default() };
        let mut m = LinkModel::new(&spec, 10_000, 1);
        assert_eq!(m.offer(0, 1000), Verdict::Drop(DropReason::Loss));
        assert_eq!(m.backlog_bytes(0), 1000);
    }
}
