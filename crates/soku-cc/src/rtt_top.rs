//! The top of the recent RTT range: the RTT a full queue holds, which
//! [`crate::queue_loss`] classes samples against and the shallow-queue rules of
//! `model/loss.rs` measure a queue's depth by.
//!
//! **Why not the largest sample.** An ack path stalls now and then: a receiver or a
//! hop descheduled for a few milliseconds holds the acks due meanwhile, and their
//! samples read the stall on top of whatever queue there was. On the project's
//! emulator beside CUBIC in a quarter-BDP buffer at 50 ms (a 12.5 ms queue), such
//! stalls came about once every 1.4 s and put frames up to 41 ms above the min RTT; the
//! largest sample of the last 16 rounds then swung between 5 and 22 ms over the min
//! (10th and 90th percentiles over a 45 s copy), the line for the top of the range rose
//! above the full queue, the buffer's drops were found to come below it, and soku kept
//! 81-94 % of what the two flows carried. A stall lifts the largest sample of a round
//! or two; a full queue lifts that of every round it stands through. So the top is
//! taken as a high quantile of the rounds' largest samples: [`TOP_QUANTILE`] of the
//! last [`ROUNDS`], from that trace 11.2 ms over the min at the median (10th-90th
//! percentile: 5.4-12.8 ms).

use std::collections::VecDeque;
use std::time::Duration;

/// Rounds whose largest RTT samples are kept (1.6 s at 50 ms). Twice as many held the
/// top of a queue that CUBIC had left for too long: a background flow took back 87 %
/// of a 100 Mbit/s x 50 ms path in the 3-8 s after, 93 % with these (path simulator).
pub const ROUNDS: usize = 32;
/// The top is the round maximum that a tenth of the kept rounds exceed: a queue that
/// stands through more than a tenth of the rounds sets it, stalls in fewer do not.
pub const TOP_QUANTILE: f64 = 0.9;

/// The largest RTT sample of each of the last [`ROUNDS`] rounds, and the top they give
/// (worked out once a round: every ack frame asks for it).
#[derive(Debug, Clone, Default)]
pub struct RttTop {
    maxima: VecDeque<Duration>,
    top: Option<Duration>,
}

impl RttTop {
    /// Nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A round ended whose largest sample was `max`.
    pub fn on_round(&mut self, max: Duration) {
        if self.maxima.len() == ROUNDS {
            self.maxima.pop_front();
        }
        self.maxima.push_back(max);
        let mut sorted: Vec<Duration> = self.maxima.iter().copied().collect();
        sorted.sort_unstable();
        let above = ((1.0 - TOP_QUANTILE) * sorted.len() as f64) as usize;
        self.top = sorted.len().checked_sub(1 + above).map(|i| sorted[i]);
    }

    /// The top of the range, once a round was seen: the largest sample while fewer than
    /// ten rounds are kept.
    pub fn get(&self) -> Option<Duration> {
        self.top
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn nothing_seen_no_top() {
        assert_eq!(RttTop::new().get(), None);
    }

    #[test]
    fn a_few_rounds_give_their_largest_sample() {
        let mut t = RttTop::new();
        for m in [52, 61, 55] {
            t.on_round(ms(m));
        }
        assert_eq!(t.get(), Some(ms(61)));
    }

    #[test]
    fn stalls_in_a_few_rounds_do_not_lift_the_top_a_standing_queue_does() {
        let mut t = RttTop::new();
        // A queue of 12 ms over a 50 ms path in a quarter of the rounds, stalls of
        // 20-40 ms in four rounds of 64.
        for i in 0..ROUNDS as u64 {
            let max = match i % 16 {
                3 => 70 + i % 3 * 10,
                0 | 5 | 6 | 7 => 62,
                _ => 51,
            };
            t.on_round(ms(max));
        }
        assert_eq!(t.get(), Some(ms(62)));
    }

    #[test]
    fn old_rounds_leave_the_window() {
        let mut t = RttTop::new();
        for _ in 0..ROUNDS {
            t.on_round(ms(80));
        }
        for _ in 0..ROUNDS {
            t.on_round(ms(51));
        }
        assert_eq!(t.get(), Some(ms(51)));
    }
}
