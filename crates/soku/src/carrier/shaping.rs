//! Telling a UDP shaper from a slow path: round trips over ssh (a TCP connection on the
//! same path) timed beside QUIC's, so that a copy whose TLS-over-TCP connections are
//! ready can move to them.
//!
//! Some networks throttle UDP with a shaper rather than a policer (`carrier/policing.rs`):
//! packets beyond the rate wait in a queue of their own instead of being dropped.
//! Nothing is lost, so the policer's signature never shows; soku's controller sees a
//! slow path and runs at the shaper's rate, where TCP would get the whole link. What
//! does show is the queue, and that it is UDP's alone: QUIC's RTT stands well above
//! its minimum while a round trip over ssh, taken at the same moment, stays at its
//! own. A queue at a bottleneck that both share (a slow link, other copies, cross
//! traffic) delays the ssh round trips as much, and moves nothing.
//!
//! The cost is a ping of a few bytes over ssh every [`PING_EVERY`] while the watch
//! runs; no probe traffic. Measured on the project's emulator (100 Mbit/s x 50 ms, UDP
//! shaped to 5 Mbit/s with a 100 ms queue): QUIC's RTT 108-143 ms against a minimum of
//! 52 ms from the second second on, while ssh's stayed within a few ms of its own.
//!
//! A server from before the pings never answers them: no ssh samples, no verdict.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use soku_engine::events::PathReport;
use soku_proto::frame;
use soku_proto::hello::ClientNote;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

/// How often the client pings over ssh while the watch runs...
pub const PING_EVERY: Duration = Duration::from_millis(250);
/// ... and after it, for the rest of the copy (`crate::carrier::udp_block`).
const PING_AFTER_EVERY: Duration = Duration::from_secs(1);
/// QUIC's queueing delay (its RTT above its minimum) that may mark a shaper, at least:
/// well above scheduling noise and a loaded host's ack delays...
const MIN_QUEUE: Duration = Duration::from_millis(20);
/// ... and at least this share of the path's minimum RTT (a standing queue of half the
/// path, where soku's controller keeps at most a fraction of one on a shared path).
const MIN_QUEUE_SHARE: f64 = 0.5;
/// ssh's queueing delay must stay below QUIC's divided by this: a queue both share
/// delays both alike. A host too busy to serve its sockets at once delays QUIC's
/// packets (read by soku's own busy processes) more than ssh's: eight copies on one
/// 100 Mbit/s x 20 ms path (`tests/e2e/many_e2e.rs`) on a loaded machine once showed a
/// 45 ms "queue" for QUIC (its bottleneck holds 20 ms at most) against 11 ms for ssh,
/// which a divisor of 4 took for a shaper. A shaper on an idle host: 0-0.1 ms for ssh.
const SSH_QUEUE_DIVISOR: u32 = 8;
/// ssh round trips needed before a verdict: its minimum must be known.
const MIN_PONGS: usize = 4;
/// How recent ssh's round trips must be to stand beside QUIC's RTT now.
const RECENT: Duration = Duration::from_secs(1);
/// Pings awaiting their answer, at most (older ones are forgotten: lost or very late).
const MAX_OUTSTANDING: usize = 64;
/// Answered pings remembered (when each was sent, its round trip), at most: more than
/// a [`crate::carrier::udp_block::QUIC_SILENCE`] of them at either rate.
const MAX_ANSWERS: usize = 64;

/// Round trips over TCP on the copy's path, sent and answered: pings over the ssh
/// channel, or, for a copy through a kept server, TCP handshakes with the host ssh logs
/// in to (`crate::carrier::tcp_probe`).
#[derive(Debug, Default)]
pub struct RoundTrips {
    inner: Mutex<Pings>,
}

#[derive(Debug, Default)]
struct Pings {
    next_seq: u32,
    outstanding: VecDeque<(u32, Instant)>,
    /// (when the answer came, the round trip), the last [`RECENT`] of them.
    recent: VecDeque<(Instant, Duration)>,
    min: Option<Duration>,
    answered: usize,
    /// (when it was sent, its round trip), the last [`MAX_ANSWERS`] answers.
    answers: VecDeque<(Instant, Duration)>,
}

/// What the ssh round trips show now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SshRtt {
    /// The smallest round trip of the last [`RECENT`] (the queue, if any, delays all).
    pub recent: Duration,
    /// The smallest ever.
    pub min: Duration,
}

impl RoundTrips {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pings> {
        // A poisoned lock only means a panic elsewhere mid-update of plain numbers.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A new ping's number, noted as sent at `now`.
    pub fn sent(&self, now: Instant) -> u32 {
        let mut p = self.lock();
        let seq = p.next_seq;
        p.next_seq = p.next_seq.wrapping_add(1);
        if p.outstanding.len() == MAX_OUTSTANDING {
            p.outstanding.pop_front();
        }
        p.outstanding.push_back((seq, now));
        seq
    }

    /// Ping `seq` was answered at `now`; an answer to no ping of ours is ignored.
    pub fn answered(&self, seq: u32, now: Instant) {
        let mut p = self.lock();
        let Some(at) = p.outstanding.iter().position(|(s, _)| *s == seq) else { return };
        let Some((_, sent)) = p.outstanding.remove(at) else { return };
        let rtt = now.saturating_duration_since(sent);
        p.min = Some(p.min.map_or(rtt, |m| m.min(rtt)));
        p.answered += 1;
        p.recent.push_back((now, rtt));
        if p.answers.len() == MAX_ANSWERS {
            p.answers.pop_front();
        }
        p.answers.push_back((sent, rtt));
        while p.recent.front().is_some_and(|(t, _)| now.saturating_duration_since(*t) > RECENT) {
            p.recent.pop_front();
        }
    }

    /// Whether the pings were answered on time all through the span from `since` to
    /// `now`: a ping sent within `patience` of `since` came back within `patience`, and
    /// so did every ping sent since until `patience` before `now`. The longest of those
    /// round trips, if so.
    pub fn answered_throughout(
        &self,
        since: Instant,
        now: Instant,
        patience: Duration,
    ) -> Option<Duration> {
        let p = self.lock();
        let due = now.checked_sub(patience)?;
        let late_or_lost = p.outstanding.iter().any(|(_, sent)| *sent >= since && *sent <= due);
        let in_span: Vec<(Instant, Duration)> =
            p.answers.iter().copied().filter(|(sent, _)| *sent >= since).collect();
        let slow = in_span.iter().any(|(_, rtt)| *rtt > patience);
        let first = in_span.iter().map(|(sent, _)| *sent).min()?;
        let last = in_span.iter().map(|(sent, _)| *sent).max()?;
        let covered = first <= since + patience && last + patience * 2 >= now;
        (!late_or_lost && !slow && covered).then(|| in_span.iter().map(|(_, rtt)| *rtt).max())?
    }

    /// The round trips as of `now`, once there are enough of them and recent ones.
    pub fn rtt(&self, now: Instant) -> Option<SshRtt> {
        let p = self.lock();
        if p.answered < MIN_PONGS {
            return None;
        }
        let recent = p
            .recent
            .iter()
            .filter(|(t, _)| now.saturating_duration_since(*t) <= RECENT)
            .map(|(_, rtt)| *rtt)
            .min()?;
        Some(SshRtt { recent, min: p.min? })
    }
}

/// Pings over ssh every [`PING_EVERY`] for `watch_for`, then every [`PING_AFTER_EVERY`],
/// through `stdin` while the session still holds it (a [`Weak`]: the session's drop of
/// its handle closes the channel, which tells the server to exit; this task must not
/// keep it open).
pub async fn ping<W: AsyncWrite + Unpin>(
    stdin: Weak<tokio::sync::Mutex<W>>,
    pings: Arc<RoundTrips>,
    watch_for: Duration,
) {
    let started = Instant::now();
    let mut tick = tokio::time::interval(PING_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut slowed = false;
    loop {
        tick.tick().await;
        if !slowed && started.elapsed() >= watch_for {
            slowed = true;
            tick = tokio::time::interval(PING_AFTER_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
        }
        let Some(stdin) = stdin.upgrade() else { return };
        let seq = pings.sent(Instant::now());
        let Ok(ping) = frame::to_vec(&ClientNote::Ping { seq }) else { return };
        let mut stdin = stdin.lock().await;
        if stdin.write_all(&ping).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}

/// The reason, if QUIC's path (`quic`, as this side sees it) stands in a queue that the
/// ssh round trips (`ssh`, taken at the same time) do not see.
pub fn looks_shaped(quic: &PathReport, ssh: SshRtt) -> Option<String> {
    let queue = quic.rtt.saturating_sub(quic.min_rtt);
    // The path's own round trip is the smaller of the two minima: pings that started
    // while a shared queue already stood (other copies keep it full) never saw ssh's,
    // where QUIC's minimum may come from the copies' shared record (`soku_cc::shared`).
    let ssh_queue = ssh.recent.saturating_sub(ssh.min.min(quic.min_rtt));
    let deep =
        queue >= MIN_QUEUE && queue.as_secs_f64() >= quic.min_rtt.as_secs_f64() * MIN_QUEUE_SHARE;
    (deep && ssh_queue <= queue / SSH_QUEUE_DIVISOR).then(|| {
        format!(
            "UDP looks throttled on this path: QUIC's packets wait {:.0} ms in a queue that \
             TCP (the ssh connection) does not see (QUIC rtt {:.1} ms, min {:.1} ms; ssh rtt \
             {:.1} ms, min {:.1} ms)",
            queue.as_secs_f64() * 1e3,
            quic.rtt.as_secs_f64() * 1e3,
            quic.min_rtt.as_secs_f64() * 1e3,
            ssh.recent.as_secs_f64() * 1e3,
            ssh.min.as_secs_f64() * 1e3,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(rtt_ms: f64, min_ms: f64) -> PathReport {
        PathReport {
            rtt: Duration::from_secs_f64(rtt_ms / 1e3),
            min_rtt: Duration::from_secs_f64(min_ms / 1e3),
            mtu: 1472,
            sent_packets: 5000,
            lost_packets: 20,
            congestion_events: 0,
            cwnd: 0,
            flow_blocked: 0,
            model: None,
        }
    }

    fn ssh(recent_ms: u64, min_ms: u64) -> SshRtt {
        SshRtt { recent: Duration::from_millis(recent_ms), min: Duration::from_millis(min_ms) }
    }

    /// Figures seen on the emulator (see the module docs) and their neighbours.
    #[test]
    fn a_queue_of_udp_alone_is_told_from_a_shared_one() {
        // UDP shaped to 5 Mbit/s at 100 Mbit/s x 50 ms: QUIC queues, ssh does not.
        assert!(looks_shaped(&report(120.0, 52.2), ssh(51, 50)).is_some());
        // A slow link both share: ssh waits in the same queue.
        assert_eq!(looks_shaped(&report(120.0, 52.2), ssh(118, 50)), None);
        // Partly shared: ssh waits over an eighth of QUIC's queue.
        assert_eq!(looks_shaped(&report(120.0, 52.0), ssh(60, 50)), None);
        // Eight copies on a loaded host (seen in `tests/e2e/many_e2e.rs`): QUIC's packets
        // wait for busy processes, ssh's less so, but far from not at all.
        assert_eq!(looks_shaped(&report(65.1, 20.3), ssh(31, 24)), None);
        // Eight copies keep a 20 ms path's queue full from before the pings began: ssh's
        // own minimum carries the queue, QUIC's (shared among the copies) does not
        // (seen in `tests/e2e/many_e2e.rs` before the smaller minimum was the baseline).
        assert_eq!(looks_shaped(&report(42.5, 20.3), ssh(36, 35)), None);
        // A small queue of QUIC's own (a fair queue at the bottleneck, soku-cc's
        // probing): below 20 ms, or below half the path's RTT, says nothing.
        assert_eq!(looks_shaped(&report(18.0, 1.0), ssh(1, 1)), None);
        assert_eq!(looks_shaped(&report(280.0, 200.0), ssh(200, 200)), None);
        // A long path with a deep UDP queue.
        assert!(looks_shaped(&report(330.0, 200.0), ssh(203, 200)).is_some());
        let why = looks_shaped(&report(120.0, 52.2), ssh(51, 50)).unwrap();
        assert!(why.contains("wait 68 ms in a queue that TCP"), "{why}");
    }

    /// Round trips need their answers, enough of them, and recent ones; an answer to no
    /// ping is ignored; the minimum and the recent smallest are kept apart.
    #[test]
    fn ssh_round_trips_are_matched_and_aged() {
        let pings = RoundTrips::default();
        let t0 = Instant::now();
        pings.answered(999, t0);
        for k in 0..4u64 {
            let sent = t0 + Duration::from_millis(250 * k);
            let seq = pings.sent(sent);
            assert_eq!(pings.rtt(sent), None, "a verdict before {MIN_PONGS} answers");
            pings.answered(seq, sent + Duration::from_millis(50 + 10 * k));
        }
        let now = t0 + Duration::from_millis(900);
        assert_eq!(pings.rtt(now), Some(ssh(50, 50)));
        // A second later only the last answer (80 ms) is recent.
        let later = t0 + Duration::from_millis(1800);
        assert_eq!(pings.rtt(later), Some(ssh(80, 50)));
        // Nothing recent: no figure to set beside QUIC's.
        assert_eq!(pings.rtt(t0 + Duration::from_secs(5)), None);
    }

    /// Pings every second from `t0`, the k-th answered after `rtts[k]` ms (None: never).
    fn pinged(t0: Instant, rtts: &[Option<u64>]) -> RoundTrips {
        let pings = RoundTrips::default();
        for (k, rtt) in rtts.iter().enumerate() {
            let sent = t0 + Duration::from_secs(k as u64);
            let seq = pings.sent(sent);
            if let Some(ms) = rtt {
                pings.answered(seq, sent + Duration::from_millis(*ms));
            }
        }
        pings
    }

    /// ssh must have answered on time over the whole span: from its start, and to
    /// within a few seconds of now; a late or lost ping in it says ssh was cut too.
    #[test]
    fn ssh_answered_throughout_a_span_or_not() {
        let t0 = Instant::now();
        let patience = Duration::from_millis(1500);
        let since = t0 + Duration::from_millis(500);
        let now = t0 + Duration::from_secs(10);
        let steady = pinged(t0, &[Some(50); 10]);
        assert_eq!(
            steady.answered_throughout(since, now, patience),
            Some(Duration::from_millis(50)),
            "ssh went on all through"
        );
        let mut outage = [Some(50); 10];
        outage[4] = None;
        outage[5] = Some(4000);
        assert_eq!(pinged(t0, &outage).answered_throughout(since, now, patience), None);
        let mut late = [Some(50); 10];
        late[6] = Some(2500);
        assert_eq!(pinged(t0, &late).answered_throughout(since, now, patience), None);
        // The last ping, still within its patience, counts neither way.
        let mut in_flight = [Some(50); 10];
        in_flight[9] = None;
        assert!(pinged(t0, &in_flight).answered_throughout(since, now, patience).is_some());
        // Pings that stopped long ago, or began long after the span did, do not cover it.
        assert_eq!(pinged(t0, &[Some(50); 4]).answered_throughout(since, now, patience), None);
        let later = pinged(t0 + Duration::from_secs(5), &[Some(50); 5]);
        assert_eq!(later.answered_throughout(since, now, patience), None);
    }
}
