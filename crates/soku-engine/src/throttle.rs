//! scp's `-l`: the sender hands chunk bytes to the link no faster than the limit.
//!
//! The congestion controller also caps its window at `limit x min RTT`, but a window
//! never falls below a few packets: on loopback or a LAN (tens of microseconds, 64 kB
//! packets) that is gigabits per second, and on a download the sender is the server,
//! whose controller was built before it learnt the limit. So the sender paces itself.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// A virtual clock of when the link is free again at the limited rate.
#[derive(Debug)]
pub struct Throttle {
    bytes_per_sec: f64,
    free_at: Mutex<Instant>,
}

impl Throttle {
    /// A throttle at `bits_per_sec`; `None` for no limit (or a limit of 0).
    pub fn new(bits_per_sec: Option<u64>) -> Option<Throttle> {
        let bits = bits_per_sec.filter(|&b| b > 0)?;
        Some(Throttle { bytes_per_sec: bits as f64 / 8.0, free_at: Mutex::new(Instant::now()) })
    }

    /// Waits for this sender's turn to put `bytes` on the link. Each call books the
    /// next `bytes / rate` of the clock, so the long-run rate is the limit however the
    /// chunk tasks interleave; an idle sender earns no credit for later.
    pub async fn take(&self, bytes: u64) {
        let start = self.book(bytes, Instant::now());
        tokio::time::sleep_until(start).await;
    }

    /// Books `bytes` of the link's time as of `now`; returns when they may start.
    fn book(&self, bytes: u64, now: Instant) -> Instant {
        let mut free_at = self.free_at.lock().unwrap_or_else(|p| p.into_inner());
        let start = (*free_at).max(now);
        *free_at = start + Duration::from_secs_f64(bytes as f64 / self.bytes_per_sec);
        start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_limit_means_no_throttle() {
        assert!(Throttle::new(None).is_none());
        assert!(Throttle::new(Some(0)).is_none());
    }

    #[test]
    fn bookings_follow_the_rate() {
        // 8 Mbit/s = 1 MB/s: the third 500 kB starts 1 s after the first.
        let t = Throttle::new(Some(8_000_000)).expect("a throttle");
        let begin = *t.free_at.lock().unwrap();
        let at = |secs: f64| begin + Duration::from_secs_f64(secs);
        assert_eq!(t.book(500_000, begin), at(0.0));
        assert_eq!(t.book(500_000, begin), at(0.5));
        assert_eq!(t.book(500_000, at(0.2)), at(1.0));
        // Idle time earns no credit: 5 s later, the next booking starts then, and the
        // one after waits its turn again.
        assert_eq!(t.book(1_000_000, at(6.5)), at(6.5));
        assert_eq!(t.book(1, at(6.5)), at(7.5));
    }
}
