//! What this flow shares with the other soku flows on its path through their board
//! ([`crate::shared`]): the min RTT, its share of what is in flight
//! ([`crate::ensemble`]), and whether the others are still draining in a probe-RTT.

use std::time::{Duration, Instant};

use crate::ensemble::{ensemble_cap, ShareRecord};
use crate::shared::{merge, Merge, MinRttRecord, ALIVE};

use super::probe_rtt::scaled_min_rtt_window;
use super::{Mode, SokuCc};

/// The shared min RTT ([`crate::shared`]) is looked at no more often than this (a
/// board between processes is a file).
const BOARD_SPACING: Duration = Duration::from_millis(100);
/// Packets a flow may keep in flight beyond the others' mean share and margin
/// ([`crate::ensemble`]): a window is filled to within a packet, so a share published
/// as what was in flight is up to a packet short of the window, and without this slack
/// windows near 20 packets could only shrink.
const ENSEMBLE_SLACK_PACKETS: u64 = 2;
/// A flow held to the others' share gives up at most this fraction of what it had in
/// flight over its last round, per round ([`crate::ensemble`]). Held to the others'
/// mean at once, a flow whose only other was a newcomer that had left startup at a few
/// dozen packets (it started into the queue the first flow's startup filled) fell to
/// that too, its next loss cut its own bound there, and both grew back along CUBIC's
/// function: two copies at 100 Mbit/s x 300 ms with a quarter-BDP buffer used 40-44 %
/// of the link on the emulator, 73-76 % in the path simulator. Stepping down, the flow
/// drains the queue within a few rounds, and without a queue nobody is held: 95-97 %
/// in the simulator (`lab/2026-11-30-ensemble-step`).
const ENSEMBLE_STEP: u64 = 8;

impl SokuCc {
    /// Shares the min RTT with the other flows on this path ([`crate::shared`]): takes
    /// the board's when it is smaller (or the same and newer) and fresh, else writes
    /// ours. At most every `BOARD_SPACING`, unless `now_anyway` (a probe-RTT just
    /// ended).
    pub(super) fn share_min_rtt(&mut self, now: Instant, now_anyway: bool) {
        let Some(board) = self.config.board.get() else {
            return;
        };
        let Some(rtt) = self.min_rtt else {
            return;
        };
        let due = self.board_seen.is_none_or(|t| now.saturating_duration_since(t) >= BOARD_SPACING);
        if !due && !now_anyway {
            return;
        }
        self.board_seen = Some(now);
        let mine = MinRttRecord { rtt, at: self.min_rtt_stamp, alive: now, writer: self.board_id };
        let theirs = board.read();
        if let Some(t) = theirs.filter(|t| t.writer != self.board_id) {
            self.others_alive = Some(self.others_alive.map_or(t.alive, |seen| seen.max(t.alive)));
        }
        self.others_now = self.others_running(now);
        // Judged by the window the record's own min RTT gives, the one its flows expire
        // by (`SokuCc::min_rtt_expiry`).
        let window = theirs.map_or(self.config.min_rtt_window, |t| {
            scaled_min_rtt_window(self.config.min_rtt_window, t.rtt)
        });
        let winner = match merge(mine, theirs, now, window) {
            Merge::Adopt(theirs) => {
                self.min_rtt = Some(theirs.rtt);
                self.min_rtt_stamp = theirs.at;
                theirs
            }
            Merge::Ours => mine,
        };
        // Vouch for it: this flow is running (`shared::ALIVE`).
        board.write(MinRttRecord { alive: now, writer: self.board_id, ..winner });
        self.share_in_flight(now);
    }

    /// Writes this flow's share to the path's board and takes the cap the others'
    /// shares set ([`crate::ensemble`]). Only a flow cruising with its window in use
    /// shows a share; any other withdraws its record and is not held.
    pub(super) fn share_in_flight(&mut self, now: Instant) {
        let Some(board) = self.config.board.get() else {
            return;
        };
        let capped_by_user = self.config.rate_cap_bps.is_some();
        let sending = self.mode == Mode::ProbeBw
            && !self.last_round_app_limited
            && !self.config.background
            && !capped_by_user;
        let in_flight = if sending { self.last_round_in_flight } else { 0 };
        board.write_share(ShareRecord { writer: self.board_id, in_flight, alive: now });
        // Only a queue makes the flows' shares a contest: without one, every flow may
        // grow, and held to the others' mean they all grew by the margin per look at
        // the board at best (in the path simulator four flows that left startup
        // together at 20 ms stayed at 24-38 % of the link between them).
        self.ensemble_cap = if sending && self.last_round_queued {
            ensemble_cap(self.board_id, &board.shares(), now).map(|cap| {
                let kept = self.last_round_in_flight - self.last_round_in_flight / ENSEMBLE_STEP;
                (cap + ENSEMBLE_SLACK_PACKETS * self.mtu).max(kept).max(self.min_window())
            })
        } else {
            None
        };
    }

    /// Whether another flow wrote the path's board within [`ALIVE`] of `now`.
    pub(super) fn others_running(&self, now: Instant) -> bool {
        self.others_alive.is_some_and(|t| now.saturating_duration_since(t) <= ALIVE)
    }

    /// Whether the other flows on this path are still draining in the probe-RTT this one
    /// is about to end: other flows wrote the board within the last second, the shared
    /// min RTT expired (which started every flow's probe) less than
    /// `probe_rtt_duration + 2 min RTT` ago, nobody has published a fresh one, and this
    /// probe saw more than it (plus a sixteenth, or 1 ms). A flow that drained first
    /// measures the queue the others still hold (346 ms on a 200 ms path in the path
    /// simulator) and took that as the path's; it now holds its small window until a
    /// flow that saw the queue drained publishes, or the grace ends. A flow alone does
    /// not wait: that cost a single copy on 100 Mbit/s x 50 ms with 1 % loss 2 points of
    /// the link (its 10 s minimum is a lower tail its 0.3 s probe seldom reaches again).
    pub(super) fn others_still_draining(&self, now: Instant) -> bool {
        let Some(theirs) = self.config.board.get().and_then(|board| board.read()) else {
            return false;
        };
        // Alone on the path there is nobody to wait for (our own record expired).
        if !self.others_running(now) || now.saturating_duration_since(theirs.alive) > ALIVE {
            return false;
        }
        let Some(probed) = self.probe_rtt_min else {
            return false;
        };
        let expired = theirs.at + scaled_min_rtt_window(self.config.min_rtt_window, theirs.rtt);
        let grace = self.config.probe_rtt_duration + 2 * theirs.rtt;
        let slack = (theirs.rtt / 16).max(Duration::from_millis(1));
        probed > theirs.rtt + slack && now > expired && now < expired + grace
    }
}
