//! Flows sending on one path keep their shares of it close: each writes to the path's
//! board ([`crate::shared`]) the bytes it kept in flight over its last round and, while
//! its last round met a queue, keeps its own window within [`MARGIN`] (plus two packets,
//! `model.rs`) of the others' mean. This is the other half of RFC
//! 9040 §8 ("ensemble sharing" of control-block state among connections to one host):
//! there, the connections' aggregate window is divided among them; here each flow's own
//! controller still finds the aggregate, and only the flows above the others' mean are
//! held to it.
//!
//! **Why.** Sharing the min RTT lined the flows' models up, but at 100 Mbit/s x 20 ms
//! with a one-BDP drop-tail queue, four copies each way through the emulator still ended
//! 9-28 % apart, fastest against slowest (26 of 30 figures within 20 %;
//! `lab/2026-11-25-many-at-once`). There the queue is full and every flow loses
//! 0.5-3 % of its packets; its window is its loss bound, cut on its own losses, and
//! which flow a full drop-tail queue drops from is chance. A flow that lost more stayed
//! 10-20 % below the others for seconds; a copy that started into the others' queue left
//! startup at a fifth of its share and needed 2-3 s to catch up.
//!
//! **Safety.** Only flows above the others' mean are held, only to the mean plus
//! [`MARGIN`], giving up at most an eighth of what they had in flight a round
//! (`model/board.rs`), and only while a queue stands: the flow with the smallest share
//! is never held, without a queue nobody is (the link has room for every flow to
//! grow), and every flow still answers its own losses. A flow held never sends more
//! than it would alone. A flow that is not using its window (app-limited, or under a
//! user's rate cap) withdraws its record, so a slow copy never holds a fast one down;
//! so does a flow in startup or probe-RTT, whose window is not its share.

use std::time::{Duration, Instant};

/// A flow may keep this much more in flight than the mean of the others sending on its
/// path (a fraction of that mean).
pub const MARGIN: f64 = 0.05;

/// A share record no flow rewrote for this long is a flow that stopped sending (a flow
/// writes every tenth of a second).
pub const SHARE_ALIVE: Duration = Duration::from_millis(300);

/// One sending flow's share of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareRecord {
    /// The flow ([`crate::shared::flow_id`]).
    pub writer: u64,
    /// The most it had in flight over its last round; 0 withdraws the record.
    pub in_flight: u64,
    /// When it wrote this.
    pub alive: Instant,
}

/// The most flow `me` may keep in flight, given the shares on its board: the others'
/// mean plus [`MARGIN`], or `None` when no other flow is sending.
pub fn ensemble_cap(me: u64, shares: &[ShareRecord], now: Instant) -> Option<u64> {
    let others: Vec<u64> = shares
        .iter()
        .filter(|s| s.writer != me && s.in_flight > 0)
        .filter(|s| now.saturating_duration_since(s.alive) <= SHARE_ALIVE)
        .map(|s| s.in_flight)
        .collect();
    if others.is_empty() {
        return None;
    }
    let mean = others.iter().map(|&b| u128::from(b)).sum::<u128>() / others.len() as u128;
    Some((mean as f64 * (1.0 + MARGIN)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(writer: u64, in_flight: u64, alive: Instant) -> ShareRecord {
        ShareRecord { writer, in_flight, alive }
    }

    #[test]
    fn a_flow_may_keep_the_mean_of_the_others_plus_the_margin() {
        let now = Instant::now();
        let shares = [share(1, 100_000, now), share(2, 200_000, now), share(3, 150_000, now)];
        // Flow 1 is held to 105 % of the others' mean (175 kB).
        assert_eq!(ensemble_cap(1, &shares, now), Some(183_750));
        assert_eq!(ensemble_cap(2, &shares, now), Some(131_250));
        // A flow not yet on the board sees everyone.
        assert_eq!(ensemble_cap(9, &shares, now), Some(157_500));
    }

    #[test]
    fn nobody_else_sending_means_no_cap() {
        let now = Instant::now() + Duration::from_secs(5);
        assert_eq!(ensemble_cap(1, &[], now), None);
        assert_eq!(ensemble_cap(1, &[share(1, 100_000, now)], now), None);
        // Withdrawn (app-limited, startup, probe-RTT) or gone quiet: not counted.
        let withdrawn = share(2, 0, now);
        let quiet = share(3, 100_000, now - Duration::from_millis(400));
        assert_eq!(ensemble_cap(1, &[withdrawn, quiet], now), None);
        let fresh = share(4, 80_000, now - Duration::from_millis(250));
        assert_eq!(ensemble_cap(1, &[withdrawn, quiet, fresh], now), Some(84_000));
    }
}
