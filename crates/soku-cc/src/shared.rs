//! The min RTT that concurrent flows on one path share, after RFC 9040 §8 ("ensemble
//! sharing" of TCP control block state among connections to the same host).
//!
//! **Why.** A flow that starts while others already keep a queue at the bottleneck
//! measures their queue as its min RTT: its bandwidth-delay product, window and share
//! are too large until a probe-RTT drains the queue with the others. And a flow that
//! probes alone while the others keep the queue full takes their queue as its new min
//! RTT (BBR's rule adopts every probe's minimum). On the emulator at 100 Mbit/s x
//! 20 ms, four uploads started together read 20.4, 20.4, 20.5 and 25.6 ms; the last one
//! held 3-5 times the others' window until its probe 7 s later, and two that probed
//! alone at 10 s read 31 and 34 ms and took most of the link from then on
//! (`lab/2026-11-24-many-at-once`).
//!
//! **What.** Flows from one host to one peer address write their min RTT and when it
//! was measured to a [`PathBoard`]; each takes the board's value when it is smaller
//! than its own and not older than the min-RTT window, with its timestamp. Sharing the
//! timestamp also lines their probe-RTT phases up: they all expire together, drain the
//! queue together and all measure the path, not each other.
//!
//! A record is taken only while flows keep writing it ([`ALIVE`]): every flow writes
//! the winning record back each time it looks. A board is only storage. Between
//! processes it is a small file (the application provides it); two flows that write at
//! once may lose one's value until its next write, a tenth of a second later, which
//! costs nothing but that delay.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::ensemble::ShareRecord;

/// A min RTT, when it was measured, and when a running flow last vouched for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinRttRecord {
    /// The smallest RTT seen.
    pub rtt: Duration,
    /// When it was seen (or last seen again).
    pub at: Instant,
    /// When a flow on the path last wrote the record: only a record that running flows
    /// keep writing is taken (see [`ALIVE`]).
    pub alive: Instant,
    /// Which flow wrote it last ([`flow_id`]): a flow learns from it that others run.
    pub writer: u64,
}

/// An id for a flow's writes, distinct between the flows of one host: the process id
/// and a count within the process.
pub fn flow_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    (u64::from(std::process::id()) << 32) | (NEXT.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff)
}

/// A record no flow wrote for this long is the path as it was, not as it is: the copies
/// that measured it have ended (a flow writes every tenth of a second). A copy that
/// starts right after others on the same address would otherwise take their min RTT for
/// up to ten seconds, though the route (or, in a test, the emulated path behind the
/// same address) may have changed meanwhile.
pub const ALIVE: Duration = Duration::from_secs(1);

/// Where flows on one path keep their shared min RTT, and the shares of the flows
/// sending on it ([`crate::ensemble`]).
pub trait PathBoard: Send + Sync + fmt::Debug {
    /// What the board holds, if anything readable.
    fn read(&self) -> Option<MinRttRecord>;
    /// Replaces what the board holds.
    fn write(&self, record: MinRttRecord);
    /// The share records of the flows on the path, as each last wrote its own (stale
    /// ones too: the reader judges).
    fn shares(&self) -> Vec<ShareRecord>;
    /// Replaces the writer's own share record.
    fn write_share(&self, record: ShareRecord);
}

/// A board within one process (for several connections of one endpoint, and the
/// path simulator).
#[derive(Debug, Default)]
pub struct MemoryBoard {
    min_rtt: Mutex<Option<MinRttRecord>>,
    shares: Mutex<Vec<ShareRecord>>,
}

impl MemoryBoard {
    /// An empty board.
    pub fn new() -> Self {
        Self::default()
    }
}

impl PathBoard for MemoryBoard {
    fn read(&self) -> Option<MinRttRecord> {
        *self.min_rtt.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self, record: MinRttRecord) {
        *self.min_rtt.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(record);
    }

    fn shares(&self) -> Vec<ShareRecord> {
        self.shares.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    fn write_share(&self, record: ShareRecord) {
        let mut shares = self.shares.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Records of flows long gone go, so the board stays small.
        shares.retain(|s| {
            s.writer != record.writer && record.alive.saturating_duration_since(s.alive) <= ALIVE
        });
        shares.push(record);
    }
}

/// A late-filled slot for a connection's board: the peer's address, which names the
/// board, is known only once the connection is about to be made.
#[derive(Clone, Default)]
pub struct BoardSlot(Arc<OnceLock<Arc<dyn PathBoard>>>);

impl BoardSlot {
    /// An empty slot (no sharing).
    pub fn new() -> Self {
        Self::default()
    }

    /// A slot holding `board`.
    pub fn with(board: Arc<dyn PathBoard>) -> Self {
        let slot = Self::new();
        slot.set(board);
        slot
    }

    /// Fills the slot; false if it was already filled (the first board stays).
    pub fn set(&self, board: Arc<dyn PathBoard>) -> bool {
        self.0.set(board).is_ok()
    }

    /// The board, once set.
    pub fn get(&self) -> Option<&Arc<dyn PathBoard>> {
        self.0.get()
    }
}

impl PartialEq for BoardSlot {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for BoardSlot {}

impl fmt::Debug for BoardSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BoardSlot").field(&self.get().is_some()).finish()
    }
}

/// What a flow does with the board, given its own min RTT and the board's record; in
/// every case it then writes the winner back, as alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Merge {
    /// Take the board's record: it is smaller, or the same and newer.
    Adopt(MinRttRecord),
    /// Ours wins: the board is empty, stale, larger, the same and older, or ours.
    Ours,
}

/// The rule: the smallest min RTT not older than `window` wins, and for equal values
/// the newest timestamp (so a flow that sees the min again keeps every flow's
/// probe-RTT away).
pub(crate) fn merge(
    mine: MinRttRecord,
    theirs: Option<MinRttRecord>,
    now: Instant,
    window: Duration,
) -> Merge {
    match theirs.filter(|t| usable(t, now, window)) {
        Some(t) if t.rtt < mine.rtt || (t.rtt == mine.rtt && t.at > mine.at) => {
            // A clock mapped from another process must not put the stamp ahead of us.
            Merge::Adopt(MinRttRecord { at: t.at.min(now), ..t })
        }
        _ => Merge::Ours,
    }
}

/// Whether a record may be taken: measured within `window` and written by a running
/// flow within [`ALIVE`].
fn usable(record: &MinRttRecord, now: Instant, window: Duration) -> bool {
    now.saturating_duration_since(record.at) <= window
        && now.saturating_duration_since(record.alive) <= ALIVE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn record(rtt: Duration, at: Instant, alive: Instant) -> MinRttRecord {
        MinRttRecord { rtt, at, alive, writer: 7 }
    }

    #[test]
    fn the_smallest_fresh_min_rtt_wins_and_equal_values_take_the_newest_stamp() {
        let t0 = Instant::now();
        let now = t0 + Duration::from_secs(12);
        let window = Duration::from_secs(10);
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mine = record(ms(25), s(5), now);
        let lower = record(ms(20), s(4), now);
        assert_eq!(merge(mine, Some(lower), now, window), Merge::Adopt(lower));
        // Too old: ours wins.
        let stale = record(ms(20), s(1), now);
        assert_eq!(merge(mine, Some(stale), now, window), Merge::Ours);
        assert_eq!(merge(mine, None, now, window), Merge::Ours);
        let higher = record(ms(30), now, now);
        assert_eq!(merge(mine, Some(higher), now, window), Merge::Ours);
        let newer = record(ms(25), s(9), now);
        assert_eq!(merge(mine, Some(newer), now, window), Merge::Adopt(newer));
        let older = record(ms(25), s(3), now);
        assert_eq!(merge(mine, Some(older), now, window), Merge::Ours);
        assert_eq!(merge(mine, Some(mine), now, window), Merge::Ours);
    }

    #[test]
    fn a_record_no_running_flow_wrote_for_a_second_is_not_taken() {
        let now = Instant::now() + Duration::from_secs(5);
        let window = Duration::from_secs(10);
        let mine = record(ms(200), now, now);
        // Measured 3 s ago by copies that ended 1.5 s ago (another path behind the
        // same address, for all we know).
        let ended = record(ms(10), now - Duration::from_secs(3), now - ms(1500));
        assert_eq!(merge(mine, Some(ended), now, window), Merge::Ours);
        let running = record(ms(10), now - Duration::from_secs(3), now - ms(300));
        assert_eq!(merge(mine, Some(running), now, window), Merge::Adopt(running));
    }

    #[test]
    fn a_stamp_ahead_of_our_clock_is_taken_as_now() {
        let now = Instant::now();
        let mine = record(ms(25), now, now);
        let ahead = record(ms(20), now + ms(3), now);
        let adopted = record(ms(20), now, now);
        assert_eq!(merge(mine, Some(ahead), now, Duration::from_secs(10)), Merge::Adopt(adopted));
    }
}
