//! The smallest RTT over the last ten minutes: the baseline a background flow measures
//! queues against.
//!
//! The model's min RTT (BBR's) lives ten seconds and a probe-RTT may raise it
//! (`min_rtt_raise_probes`), which is right for sizing the window: a path that got
//! longer must get a larger BDP soon. A background flow asks another question: is a
//! queue standing that someone else built? Measured against a ten-second minimum, a
//! loss-based flow's standing queue becomes part of the "path" within a few probes, and
//! the background flow competes again (on the emulator, a flow that had yielded beside
//! CUBIC on a 50 ms path raised its min RTT from 50 to 91 ms and took 10-20 Mbit/s of
//! 100 back for over ten seconds). LEDBAT keeps its base delay as the minimum of ten
//! one-minute minima for this reason ([RFC 6817] §2.4.2 and §4.2, `BASE_HISTORY`),
//! accepting that a path that really got longer is seen late; so does this history.
//!
//! A seed may stand in for the history's start: the min RTT an earlier copy measured
//! on this path (`crate::hint::RememberedPath`). A flow that starts inside another
//! flow's queue cannot measure the path's RTT until that queue drains, and a seed lets
//! it see the queue from its first round. The seed ages out like any minute's minimum,
//! and is dropped at once when the path contradicts it ([`BaseDelay::drop_seed`]).
//!
//! [RFC 6817]: https://www.rfc-editor.org/rfc/rfc6817

use std::time::{Duration, Instant};

/// How many one-minute minima the history keeps (RFC 6817 `BASE_HISTORY`).
const BASE_HISTORY: usize = 10;
/// The span of one minimum.
const BUCKET: Duration = Duration::from_secs(60);

/// The minima of the last [`BASE_HISTORY`] minutes.
#[derive(Debug, Clone, Default)]
pub struct BaseDelay {
    /// The seed, while it counts: the minimum of the minute before the first sample.
    seed: Option<Duration>,
    /// Oldest first; the last is the current minute's.
    minima: Vec<Duration>,
    /// When the current minute began.
    bucket_start: Option<Instant>,
}

impl BaseDelay {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// A history that starts with `seed` as the minimum of the minute before its first
    /// sample.
    pub fn seeded(seed: Duration) -> Self {
        Self { seed: Some(seed), minima: Vec::new(), bucket_start: None }
    }

    /// The seed, while it still counts.
    pub fn seed(&self) -> Option<Duration> {
        self.seed
    }

    /// Forgets the seed: the history is the flow's own samples from here on.
    pub fn drop_seed(&mut self) {
        self.seed = None;
    }

    /// Records an RTT sample taken at `now`.
    pub fn on_sample(&mut self, now: Instant, rtt: Duration) {
        match self.bucket_start {
            Some(start) if now.saturating_duration_since(start) < BUCKET => {
                if let Some(last) = self.minima.last_mut() {
                    *last = (*last).min(rtt);
                }
            }
            _ => {
                if self.minima.len() + usize::from(self.seed.is_some()) == BASE_HISTORY {
                    if self.seed.is_some() {
                        self.seed = None;
                    } else {
                        self.minima.remove(0);
                    }
                }
                self.minima.push(rtt);
                self.bucket_start = Some(now);
            }
        }
    }

    /// The smallest RTT of the history, if any sample or seed is in it.
    pub fn get(&self) -> Option<Duration> {
        self.minima.iter().chain(&self.seed).min().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn keeps_the_smallest_sample_for_ten_minutes_then_forgets_it() {
        let t0 = Instant::now();
        let mut h = BaseDelay::new();
        assert_eq!(h.get(), None);
        h.on_sample(t0, ms(50));
        h.on_sample(t0 + ms(10), ms(80));
        assert_eq!(h.get(), Some(ms(50)));
        // A later, longer path: one sample a minute at 80 ms.
        for minute in 1..BASE_HISTORY as u32 {
            h.on_sample(t0 + BUCKET * minute, ms(80));
            assert_eq!(h.get(), Some(ms(50)), "minute {minute}");
        }
        h.on_sample(t0 + BUCKET * BASE_HISTORY as u32, ms(80));
        assert_eq!(h.get(), Some(ms(80)));
    }

    #[test]
    fn a_seed_counts_until_it_ages_out() {
        let t0 = Instant::now();
        let mut h = BaseDelay::seeded(ms(50));
        h.on_sample(t0, ms(78));
        assert_eq!(h.get(), Some(ms(50)));
        for minute in 1..BASE_HISTORY as u32 - 1 {
            h.on_sample(t0 + BUCKET * minute, ms(78));
            assert_eq!(h.get(), Some(ms(50)), "minute {minute}");
        }
        h.on_sample(t0 + BUCKET * (BASE_HISTORY as u32 - 1), ms(78));
        assert_eq!(h.get(), Some(ms(78)));
        let mut h = BaseDelay::seeded(ms(20));
        h.on_sample(t0, ms(50));
        assert_eq!(h.get(), Some(ms(20)));
        h.drop_seed();
        assert_eq!((h.get(), h.seed()), (Some(ms(50)), None));
    }
}
