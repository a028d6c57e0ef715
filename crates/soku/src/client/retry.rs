//! Reconnecting after the connection is lost: which failures are worth another attempt,
//! how long to wait between attempts, and when to give up.
//!
//! A copy that loses its connection (the QUIC path silent past its idle timeout, ssh
//! gone, `soku serve` killed) logs in again and runs the same copy; resume makes the new
//! attempt send only what the target does not hold yet. Attempts back off from one
//! second to [`MAX_WAIT`], and stop once the connection has been down for the user's
//! limit (`--retry-for`), leaving the partial files for a later run. [`WholeCopy`]
//! keeps the figures the user is told those of the whole command, not of its last
//! attempt.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use soku_engine::events::{EventSink, TransferEvent};
use soku_engine::{EngineError, LinkError};

use crate::exit::{Exit, CONNECTION};

/// Longest wait between two attempts: a path that comes back is found within this.
pub const MAX_WAIT: Duration = Duration::from_secs(10);

/// The state of reconnecting for one copy.
#[derive(Debug)]
pub struct Retry {
    limit: Duration,
    /// When the connection was last lost, while it is down.
    lost_at: Option<Instant>,
    /// Attempts since it was lost.
    attempts: u32,
}

/// What to do after an attempt failed.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Wait this long, then make attempt number `attempt`.
    Retry {
        /// The wait.
        wait: Duration,
        /// The attempt about to be made, from 1.
        attempt: u32,
    },
    /// Give up: the error is not an interruption, or the limit is reached.
    GiveUp,
}

impl Retry {
    /// Reconnects for at most `limit` after the connection is lost (zero: never).
    pub fn new(limit: Duration) -> Retry {
        Retry { limit, lost_at: None, attempts: 0 }
    }

    /// The last attempt moved data: a later loss starts a new outage. A login alone
    /// does not end one: a remote that fails the same way in every session (it crashes,
    /// its disk stalls) is given up once the limit has passed, not retried for ever.
    pub fn progressed(&mut self) {
        self.lost_at = None;
        self.attempts = 0;
    }

    /// Decides after a failed attempt. `reconnecting` says the failed attempt was itself
    /// a reconnect (a login that fails then is the outage going on, not a bad host).
    pub fn after_failure(&mut self, err: &anyhow::Error, now: Instant) -> Next {
        let reconnecting = self.lost_at.is_some();
        if self.limit.is_zero() || !(is_interruption(err) || reconnecting && is_login(err)) {
            return Next::GiveUp;
        }
        let lost_at = *self.lost_at.get_or_insert(now);
        let wait = backoff(self.attempts);
        if now + wait > lost_at + self.limit {
            return Next::GiveUp;
        }
        self.attempts += 1;
        Next::Retry { wait, attempt: self.attempts }
    }

    /// How long the connection has been down, if it is.
    pub fn down_for(&self, now: Instant) -> Option<Duration> {
        self.lost_at.map(|at| now.saturating_duration_since(at))
    }
}

/// 1, 2, 4, 8 s, then [`MAX_WAIT`].
fn backoff(attempts: u32) -> Duration {
    Duration::from_secs(1u64 << attempts.min(6)).min(MAX_WAIT)
}

/// Whether `err` means the connection was cut while the copy ran (not a refusal, a bad
/// path, a full disk or a protocol error: those would fail again).
pub fn is_interruption(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        if let Some(engine) = cause.downcast_ref::<EngineError>() {
            return matches!(
                engine,
                EngineError::Link(
                    LinkError::Lost(_)
                        | LinkError::Io(_)
                        | LinkError::Closed
                        | LinkError::Stalled(_)
                ) | EngineError::PeerClosed { .. }
            );
        }
        if let Some(link) = cause.downcast_ref::<LinkError>() {
            return matches!(
                link,
                LinkError::Lost(_) | LinkError::Io(_) | LinkError::Closed | LinkError::Stalled(_)
            );
        }
        false
    })
}

/// Whether `err` is a failure to log in or start the remote soku (exit 255).
fn is_login(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| cause.downcast_ref::<Exit>().is_some_and(|e| e.code == CONNECTION))
}

/// The figures of the whole command, on their way to the user's event sink. Each
/// session's engine counts only its own: after a reconnect, what the first session sent
/// is already at the target when the second begins, and the second's `Finished` calls
/// it resumed. Here what the earlier sessions sent is taken off again, so that the
/// summary, `--json` and `--report` say what the target held when the command started
/// and what crossed the network during it; and the time runs from the first session's
/// start, outages included (the user waited through them).
pub struct WholeCopy {
    inner: Arc<dyn EventSink>,
    sessions: Mutex<Sessions>,
}

impl WholeCopy {
    /// Wraps `inner`, before the first session.
    pub fn new(inner: Arc<dyn EventSink>) -> Arc<WholeCopy> {
        Arc::new(WholeCopy { inner, sessions: Mutex::default() })
    }

    /// A session (a new connection) is about to run the copy.
    pub fn begin_session(&self) {
        self.lock().begin();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl EventSink for WholeCopy {
    fn event(&self, mut event: TransferEvent) {
        self.lock().note(&mut event, Instant::now());
        self.inner.event(event);
    }
}

/// What [`WholeCopy`] keeps.
#[derive(Debug, Default)]
struct Sessions {
    /// Sessions begun.
    begun: u32,
    /// Bytes the sessions before the current one sent.
    earlier: u64,
    /// Bytes the current session has sent so far.
    current: u64,
    /// When the first session's data transfer began.
    first_plan: Option<Instant>,
}

impl Sessions {
    fn begin(&mut self) {
        self.begun += 1;
        self.earlier = self.earlier.saturating_add(std::mem::take(&mut self.current));
    }

    /// Notes `event`, making a `Finished` the whole command's.
    fn note(&mut self, event: &mut TransferEvent, now: Instant) {
        match event {
            // The sender's chunk tasks tell their counts concurrently: the largest wins.
            TransferEvent::Sent { bytes } => self.current = self.current.max(*bytes),
            TransferEvent::Planned { .. } => {
                self.first_plan.get_or_insert(now);
            }
            TransferEvent::Finished { resumed, elapsed, .. } if self.begun > 1 => {
                // A chunk an earlier session sent but the target did not keep (cut
                // before it was written) is sent again and counted twice: the figure
                // errs towards "sent", never calling what this command sent "already
                // there".
                *resumed = resumed.saturating_sub(self.earlier);
                if let Some(first) = self.first_plan {
                    *elapsed = (*elapsed).max(now.saturating_duration_since(first));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost() -> anyhow::Error {
        EngineError::PeerClosed { peer: "receiver", what: "confirming the copy" }.into()
    }

    #[test]
    fn waits_grow_to_the_cap() {
        let waits: Vec<u64> = (0..7).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10, 10]);
    }

    #[test]
    fn an_interruption_is_retried_until_the_limit() {
        let mut retry = Retry::new(Duration::from_secs(20));
        let t0 = Instant::now();
        assert_eq!(
            retry.after_failure(&lost(), t0),
            Next::Retry { wait: Duration::from_secs(1), attempt: 1 }
        );
        // The reconnect's login fails while the path is still down: retried too.
        let down = Exit::connection("ssh: connect to host h port 22: Connection timed out");
        let at = t0 + Duration::from_secs(1);
        assert_eq!(
            retry.after_failure(&down.into(), at),
            Next::Retry { wait: Duration::from_secs(2), attempt: 2 }
        );
        // The third attempt would come 4 s later: 21 s into the outage, past 20 s.
        let late = t0 + Duration::from_secs(17);
        assert_eq!(retry.after_failure(&lost(), late), Next::GiveUp, "past 20 s");
        assert_eq!(retry.down_for(late), Some(Duration::from_secs(17)));
    }

    /// Catches: a remote that fails in every session (it ran out of memory walking the
    /// tree) retried for ever, each login starting a new outage at attempt 1.
    #[test]
    fn sessions_that_move_no_data_are_one_outage() {
        let mut retry = Retry::new(Duration::from_secs(5));
        let t0 = Instant::now();
        let mut gave_up_at = None;
        for second in 0..60 {
            // Each attempt logs in and fails again before any data moves.
            if retry.after_failure(&lost(), t0 + Duration::from_secs(second)) == Next::GiveUp {
                gave_up_at = Some(second);
                break;
            }
        }
        assert!(gave_up_at.is_some_and(|s| s <= 5), "gave up at {gave_up_at:?}");
    }

    #[test]
    fn a_session_that_moved_data_starts_a_new_outage() {
        let mut retry = Retry::new(Duration::from_secs(5));
        let t0 = Instant::now();
        assert!(matches!(retry.after_failure(&lost(), t0), Next::Retry { .. }));
        retry.progressed();
        let later = t0 + Duration::from_secs(60);
        assert_eq!(
            retry.after_failure(&lost(), later),
            Next::Retry { wait: Duration::from_secs(1), attempt: 1 }
        );
    }

    fn finished(resumed: u64, elapsed: Duration) -> TransferEvent {
        TransferEvent::Finished { files: 1, bytes: 100, failures: 0, resumed, elapsed }
    }

    /// (resumed, elapsed) of the `Finished` after `note`.
    fn noted(sessions: &mut Sessions, mut event: TransferEvent, now: Instant) -> (u64, Duration) {
        sessions.note(&mut event, now);
        match event {
            TransferEvent::Finished { resumed, elapsed, .. } => (resumed, elapsed),
            other => panic!("{other:?}"),
        }
    }

    /// Catches: a reconnected copy calling what its first session sent "already there",
    /// or timing only its last session.
    #[test]
    fn what_an_earlier_session_sent_is_not_resumed() {
        let t0 = Instant::now();
        let mut s = Sessions::default();
        s.begin();
        s.note(&mut TransferEvent::Planned { files: 1, bytes: 100 }, t0);
        s.note(&mut TransferEvent::Sent { bytes: 10 }, t0);
        s.note(&mut TransferEvent::Sent { bytes: 30 }, t0);
        // The second session finds the 30 bytes held and sends the other 70.
        s.begin();
        s.note(&mut TransferEvent::Planned { files: 1, bytes: 100 }, t0 + Duration::from_secs(9));
        s.note(&mut TransferEvent::Sent { bytes: 70 }, t0 + Duration::from_secs(10));
        let end = t0 + Duration::from_secs(10);
        assert_eq!(noted(&mut s, finished(30, Duration::from_secs(1)), end), (0, end - t0));
    }

    /// Catches: a sender's counts told out of order (its chunk tasks run at once)
    /// lowering what the session sent, so that the next session's held bytes, sent by
    /// this one, would be called resumed.
    #[test]
    fn a_smaller_count_told_late_does_not_lower_what_was_sent() {
        let t0 = Instant::now();
        let mut s = Sessions::default();
        s.begin();
        s.note(&mut TransferEvent::Sent { bytes: 50 }, t0);
        s.note(&mut TransferEvent::Sent { bytes: 40 }, t0);
        s.begin();
        assert_eq!(noted(&mut s, finished(50, Duration::from_secs(1)), t0).0, 0);
    }

    /// Catches: losing what the target held before the command (an earlier run's).
    #[test]
    fn what_the_target_held_before_the_command_stays_resumed() {
        let t0 = Instant::now();
        let mut s = Sessions::default();
        // 40 held from an earlier run; the first session sends 20 and is cut, the
        // second finds 60 held and sends the last 40; then a third session, a switch
        // of transport that sent nothing, finds all 100 held.
        s.begin();
        s.note(&mut TransferEvent::Sent { bytes: 20 }, t0);
        s.begin();
        s.note(&mut TransferEvent::Sent { bytes: 40 }, t0);
        s.begin();
        assert_eq!(noted(&mut s, finished(100, Duration::from_secs(1)), t0).0, 40);
    }

    /// Catches: a copy that never reconnected getting other figures than its engine's.
    #[test]
    fn one_session_is_left_as_it_is() {
        let t0 = Instant::now();
        let mut s = Sessions::default();
        s.begin();
        s.note(&mut TransferEvent::Planned { files: 1, bytes: 100 }, t0);
        s.note(&mut TransferEvent::Sent { bytes: 60 }, t0);
        let later = t0 + Duration::from_secs(5);
        let engine = (40, Duration::from_secs(2));
        assert_eq!(noted(&mut s, finished(engine.0, engine.1), later), engine);
    }

    #[test]
    fn refusals_and_first_logins_are_not_retried() {
        let t0 = Instant::now();
        let remote: anyhow::Error = EngineError::Remote("disk full".into()).into();
        assert_eq!(Retry::new(Duration::from_secs(60)).after_failure(&remote, t0), Next::GiveUp);
        let login: anyhow::Error = Exit::connection("Permission denied (publickey)").into();
        assert_eq!(Retry::new(Duration::from_secs(60)).after_failure(&login, t0), Next::GiveUp);
        assert_eq!(Retry::new(Duration::ZERO).after_failure(&lost(), t0), Next::GiveUp);
    }
}
