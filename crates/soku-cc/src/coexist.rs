//! CUBIC's window function (RFC 9438), for the loss bound's regrowth after soku cut it
//! for loss at the top of a shallow queue (`model/loss.rs`): a flow that shares such a
//! queue with CUBIC grows back as CUBIC would.

use std::time::Duration;

/// RFC 9438's `C` (segments per second cubed).
const CUBIC_C: f64 = 0.4;

/// The loss bound's regrowth after a cut for loss at the top of a shallow queue:
/// CUBIC's window function `W(t) = C (t - K)^3 + W_max` (RFC 9438 §4.2) from what was
/// in flight at the cut, never under the Reno-friendly estimate (§4.3), with fast
/// convergence (§4.7). The bound grows by at most half a round (§4.2's `1.5 cwnd`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Coexist {
    /// Round time since the cut.
    since: Duration,
    /// In flight at the cut, in packets (`W_max`; less after fast convergence).
    w_max: f64,
    /// Time the cubic function takes back to `w_max`, in seconds (`K`).
    k: f64,
    /// The Reno-friendly estimate, in packets (`W_est`).
    w_est: f64,
    /// The decrease the cut made (`beta_cubic`).
    beta: f64,
}

impl Coexist {
    pub(crate) fn new(used: u64, bound: u64, beta: f64, last_max: Option<f64>, mtu: u64) -> Self {
        let mtu = mtu.max(1) as f64;
        let mut w_max = used as f64 / mtu;
        // Fast convergence (RFC 9438 §4.7): a flow cut below its last peak releases
        // more, so that a newer flow finds room sooner.
        if last_max.is_some_and(|last| w_max < last) {
            w_max *= (1.0 + beta) / 2.0;
        }
        let k = (w_max * (1.0 - beta) / CUBIC_C).cbrt();
        Self { since: Duration::ZERO, w_max, k, w_est: bound as f64 / mtu, beta }
    }

    /// The peak the window grows back to (`W_max`), in packets: the next cut's fast
    /// convergence compares with it.
    pub(crate) fn peak(&self) -> f64 {
        self.w_max
    }

    /// A round of `elapsed` ended: the bound CUBIC would allow one min RTT later
    /// (§4.2's `W_cubic(t + RTT)`), in bytes.
    pub(crate) fn on_round(&mut self, elapsed: Duration, min_rtt: Duration, mtu: u64) -> u64 {
        self.since += elapsed;
        let alpha = 3.0 * (1.0 - self.beta) / (1.0 + self.beta);
        self.w_est += alpha;
        let t = (self.since + min_rtt).as_secs_f64() - self.k;
        let w_cubic = CUBIC_C * t * t * t + self.w_max;
        (w_cubic.max(self.w_est).max(0.0) * mtu.max(1) as f64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: u64 = 1000;
    /// `beta_cubic` (RFC 9438 §4.6).
    const BETA: f64 = 0.7;

    #[test]
    fn the_bound_grows_back_to_the_old_peak_in_k_seconds_then_past_it() {
        let mut c = Coexist::new(500 * MTU, 350 * MTU, BETA, None, MTU);
        let round = Duration::from_millis(50);
        // K = cbrt(500 x 0.3 / 0.4) = 7.2 s.
        let rounds_to_k = (c.k / round.as_secs_f64()) as usize;
        let mut bound = 0;
        for _ in 0..rounds_to_k - 1 {
            bound = c.on_round(round, round, MTU);
        }
        assert!((490 * MTU..=510 * MTU).contains(&bound), "{bound}");
        for _ in 0..100 {
            bound = c.on_round(round, round, MTU);
        }
        assert!(bound > 540 * MTU, "{bound}");
    }

    #[test]
    fn a_peak_lower_than_the_last_releases_more() {
        let c = Coexist::new(400 * MTU, 280 * MTU, BETA, Some(500.0), MTU);
        assert!((c.w_max - 340.0).abs() < 1e-9);
        let c = Coexist::new(400 * MTU, 280 * MTU, BETA, Some(300.0), MTU);
        assert!((c.w_max - 400.0).abs() < 1e-9);
    }
}
