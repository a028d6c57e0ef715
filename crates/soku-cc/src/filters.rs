//! Windowed max/min filters.
//!
//! Kathleen Nichols' algorithm (used by BBR, see draft-cardwell-iccrg-bbr-congestion-control
//! §4.5.2 and Linux `lib/win_minmax.c`): keep the best, second-best and third-best
//! samples of the last `window` time units, each newer than the one before, so the best
//! value over a sliding window is known in O(1) time and space. Time is any monotone
//! `u64` (round counts for bandwidth, nanoseconds for RTT).

/// Which samples a [`WindowedFilter`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Track the maximum (e.g. delivery rate).
    Max,
    /// Track the minimum (e.g. round-trip time).
    Min,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    value: u64,
    time: u64,
}

/// The best value seen over the last `window` time units.
#[derive(Debug, Clone)]
pub struct WindowedFilter {
    direction: Direction,
    window: u64,
    samples: Option<[Sample; 3]>,
}

impl WindowedFilter {
    /// An empty filter over `window` time units.
    pub fn new(direction: Direction, window: u64) -> Self {
        Self { direction, window, samples: None }
    }

    /// The best value in the window, or `None` before the first sample.
    pub fn get(&self) -> Option<u64> {
        self.samples.map(|s| s[0].value)
    }

    /// Change how far back the filter looks (samples already kept stay).
    pub fn set_window(&mut self, window: u64) {
        self.window = window;
    }

    /// Forget every sample.
    pub fn clear(&mut self) {
        self.samples = None;
    }

    /// Forget every sample and start again from `value` at `time`.
    pub fn reset(&mut self, value: u64, time: u64) {
        let s = Sample { value, time };
        self.samples = Some([s; 3]);
    }

    fn at_least_as_good(&self, a: u64, b: u64) -> bool {
        match self.direction {
            Direction::Max => a >= b,
            Direction::Min => a <= b,
        }
    }

    /// Add a sample taken at `time` (times must not go backwards).
    pub fn update(&mut self, value: u64, time: u64) {
        let new = Sample { value, time };
        let Some(mut s) = self.samples else {
            self.reset(value, time);
            return;
        };
        if self.at_least_as_good(value, s[0].value) || time.saturating_sub(s[2].time) > self.window
        {
            self.reset(value, time);
            return;
        }
        if self.at_least_as_good(value, s[1].value) {
            s[1] = new;
            s[2] = new;
        } else if self.at_least_as_good(value, s[2].value) {
            s[2] = new;
        }
        // Age out the best sample(s) once they leave the window.
        let dt = time.saturating_sub(s[0].time);
        if dt > self.window {
            s[0] = s[1];
            s[1] = s[2];
            s[2] = new;
            if time.saturating_sub(s[0].time) > self.window {
                s[0] = s[1];
                s[1] = s[2];
                s[2] = new;
            }
        } else if s[1] == s[0] && dt > self.window / 4 {
            // A quarter of the window passed with no second choice: take one.
            s[1] = new;
            s[2] = new;
        } else if s[2] == s[1] && dt > self.window / 2 {
            s[2] = new;
        }
        self.samples = Some(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_filter_has_no_value() {
        let f = WindowedFilter::new(Direction::Max, 10);
        assert_eq!(f.get(), None);
    }

    #[test]
    fn max_holds_peak_within_window() {
        let mut f = WindowedFilter::new(Direction::Max, 10);
        f.update(100, 0);
        for t in 1..=10 {
            f.update(50, t);
            assert_eq!(f.get(), Some(100), "t={t}");
        }
    }

    #[test]
    fn max_forgets_peak_after_window() {
        let mut f = WindowedFilter::new(Direction::Max, 10);
        f.update(100, 0);
        for t in 1..=20 {
            f.update(50 - t, t);
        }
        // The peak left the window; the best of the last 10 rounds remains.
        let v = f.get().unwrap_or(0);
        assert!((30..=40).contains(&v), "got {v}");
    }

    #[test]
    fn max_takes_new_peak_at_once() {
        let mut f = WindowedFilter::new(Direction::Max, 10);
        f.update(100, 0);
        f.update(300, 1);
        assert_eq!(f.get(), Some(300));
    }

    #[test]
    fn max_decays_through_second_and_third_choices() {
        let mut f = WindowedFilter::new(Direction::Max, 10);
        f.update(100, 0);
        f.update(90, 3);
        f.update(80, 6);
        f.update(10, 11); // 100 expires
        assert_eq!(f.get(), Some(90));
        f.update(10, 14); // 90 expires
        assert_eq!(f.get(), Some(80));
    }

    #[test]
    fn min_tracks_minimum_and_expires() {
        let mut f = WindowedFilter::new(Direction::Min, 1_000);
        f.update(50, 0);
        f.update(70, 100);
        f.update(40, 200);
        assert_eq!(f.get(), Some(40));
        f.update(60, 1_300); // 40 (t=200) expired
        assert_eq!(f.get(), Some(60));
    }

    #[test]
    fn clear_empties() {
        let mut f = WindowedFilter::new(Direction::Min, 5);
        f.update(1, 1);
        f.clear();
        assert_eq!(f.get(), None);
    }
}
