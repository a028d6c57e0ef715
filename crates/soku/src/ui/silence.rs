//! Telling the user when a running copy stops making progress.
//!
//! A path that goes silent (a blackout, a dead Wi-Fi) leaves the meter frozen: QUIC
//! waits for the path up to its idle timeout, and only then does the copy reconnect and
//! say so. Until then the user saw nothing move and nothing said, and could not tell a
//! wait from a hang. [`SilenceWatch`] sits in front of the user's sink: it notes when the
//! receiver last verified new bytes, and once nothing has been verified for
//! [`FIRST_NOTICE`] (or longer, on a copy whose progress comes in larger steps) it tells
//! the user, again every [`REPEAT`], what soku is waiting for and after how much silence
//! it reconnects; when progress comes back it says after how long.
//!
//! It claims no more than it knows: "nothing verified for N s" is always true; whether
//! the path is down it cannot tell (a stalled disk looks the same), so the notice says
//! what happens *if* the remote stays silent.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use soku_engine::events::{EventSink, TransferEvent};

/// Silence before the first notice. A healthy copy verifies a chunk every few
/// milliseconds to a second; five seconds without one is worth a word (a blackout of
/// ten is then told while it lasts, whatever the timer's phase).
pub const FIRST_NOTICE: Duration = Duration::from_secs(5);

/// Between two notices of the same silence.
pub const REPEAT: Duration = Duration::from_secs(10);

/// A copy whose verified bytes come in steps (a slow `-l` copy finishes many chunks at
/// once) is told only after this many times its longest step seen so far.
const GAP_FACTOR: u32 = 3;

/// How often the watch looks at the clock.
const TICK: Duration = Duration::from_secs(1);

/// What the user is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Silence {
    /// Nothing verified for `silent`; the copy is waiting.
    Waiting {
        /// Time since bytes were last verified.
        silent: Duration,
        /// The silence from the remote after which the connection counts as lost and
        /// the copy reconnects, for the transport carrying the data.
        reconnect_after: Duration,
    },
    /// Bytes are verified again, after `silent` without.
    Flowing {
        /// How long nothing was verified.
        silent: Duration,
    },
}

/// A sink that can tell the user about a [`Silence`].
pub trait Notice: Send + Sync {
    /// Shows `silence`.
    fn silence(&self, silence: Silence);
}

/// Passes every event on to the user's sink, and tells it about silences.
pub struct SilenceWatch {
    inner: Arc<dyn EventSink>,
    notice: Arc<dyn Notice>,
    state: Mutex<Watch>,
}

impl SilenceWatch {
    /// Wraps `sink`, and starts the thread that looks at the clock (it ends with the
    /// copy, or when the watch is dropped).
    pub fn start<S: EventSink + Notice + 'static>(sink: Arc<S>) -> Arc<SilenceWatch> {
        let watch = Arc::new(SilenceWatch {
            inner: sink.clone(),
            notice: sink,
            state: Mutex::new(Watch::default()),
        });
        let weak = Arc::downgrade(&watch);
        // Without the thread the copy runs as before, only without these notices.
        let _ = std::thread::Builder::new().name("soku-silence".into()).spawn(move || tick(weak));
        watch
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watch> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Looks at the clock every [`TICK`] while the watch lives and its copy runs.
fn tick(weak: Weak<SilenceWatch>) {
    while let Some(watch) = weak.upgrade() {
        let (told, done) = {
            let mut state = watch.lock();
            (state.tick(Instant::now()), state.done)
        };
        if let Some(silence) = told {
            watch.notice.silence(silence);
        }
        if done {
            return;
        }
        drop(watch);
        std::thread::sleep(TICK);
    }
}

impl EventSink for SilenceWatch {
    fn event(&self, event: TransferEvent) {
        let told = self.lock().note(&event, Instant::now());
        // The copy's own event first: a `Flowing` follows the progress that ended it.
        self.inner.event(event);
        if let Some(silence) = told {
            self.notice.silence(silence);
        }
    }
}

/// What the watch keeps: a pure state machine on the times it is given.
#[derive(Debug, Default)]
struct Watch {
    /// When bytes were last verified (or the copy planned, or a new connection made),
    /// while data is expected; `None` before the plan, while reconnecting, and after
    /// the end.
    since: Option<Instant>,
    /// The last verified figure.
    verified: u64,
    /// When this connection last verified new bytes: the steps between two figures,
    /// not the wait before the first (a login, hashing what the target holds).
    last_step: Option<Instant>,
    /// The longest step between two verified figures of this connection.
    longest_gap: Duration,
    /// Notices given for the current silence.
    told: u32,
    /// The silence after which the current transport gives the connection up.
    reconnect_after: Duration,
    /// The copy is over.
    done: bool,
}

impl Watch {
    /// Notes `event` at `now`; progress after a notice is told as [`Silence::Flowing`].
    fn note(&mut self, event: &TransferEvent, now: Instant) -> Option<Silence> {
        match event {
            TransferEvent::Connected { transport, .. } => {
                self.reconnect_after = reconnect_after(transport);
                self.longest_gap = Duration::ZERO;
                self.last_step = None;
                None
            }
            TransferEvent::Planned { .. } => self.progress(now),
            TransferEvent::Verified { bytes } if *bytes != self.verified => {
                self.verified = *bytes;
                // A silence that was told is not a step of the copy's.
                if let Some(last) = self.last_step.filter(|_| self.told == 0) {
                    self.longest_gap = self.longest_gap.max(now.saturating_duration_since(last));
                }
                self.last_step = Some(now);
                self.progress(now)
            }
            // The reconnect is told by its own event; the next connection's plan
            // starts the clock again.
            TransferEvent::Reconnecting { .. } => {
                self.since = None;
                self.last_step = None;
                self.told = 0;
                None
            }
            TransferEvent::Finished { .. } => {
                self.since = None;
                self.done = true;
                None
            }
            _ => None,
        }
    }

    /// Progress at `now`: the clock starts again.
    fn progress(&mut self, now: Instant) -> Option<Silence> {
        let told = std::mem::take(&mut self.told);
        let since = self.since.replace(now);
        match since {
            Some(since) if told > 0 => {
                Some(Silence::Flowing { silent: now.saturating_duration_since(since) })
            }
            _ => None,
        }
    }

    /// The notice due at `now`, if one is.
    fn tick(&mut self, now: Instant) -> Option<Silence> {
        let silent = now.saturating_duration_since(self.since?);
        let first = FIRST_NOTICE.max(self.longest_gap * GAP_FACTOR);
        if silent < first + REPEAT * self.told {
            return None;
        }
        self.told += 1;
        Some(Silence::Waiting { silent, reconnect_after: self.reconnect_after })
    }
}

/// The silence after which the connection described by a `Connected` event's
/// `transport` counts as lost: QUIC's idle timeout; on TCP or the ssh channel, the
/// link's stall limit (the peers' keep-alives stop arriving).
fn reconnect_after(transport: &str) -> Duration {
    if transport.starts_with("QUIC") {
        soku_transport::IDLE_TIMEOUT
    } else {
        soku_engine::link::DEFAULT_STALL_LIMIT
    }
}

/// The notice's words, for people (the meter's line).
pub fn describe(silence: Silence) -> String {
    match silence {
        Silence::Waiting { silent, reconnect_after } => format!(
            "nothing verified for {} s: waiting for the remote (if it stays silent for {} s, \
             soku connects again and resumes)",
            silent.as_secs(),
            reconnect_after.as_secs()
        ),
        Silence::Flowing { silent } => {
            format!("data flowing again after {} s without progress", silent.as_secs())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn quic() -> TransferEvent {
        TransferEvent::Connected { transport: "QUIC to 10.0.0.2:4000".into(), reason: None }
    }

    fn verified(bytes: u64) -> TransferEvent {
        TransferEvent::Verified { bytes }
    }

    /// A watch on a QUIC copy planned at `t0` and verified up to 1 MiB at `t0`.
    fn running(t0: Instant) -> Watch {
        let mut w = Watch::default();
        assert_eq!(w.note(&quic(), t0), None);
        assert_eq!(w.note(&TransferEvent::Planned { files: 1, bytes: 10 << 20 }, t0), None);
        assert_eq!(w.note(&verified(1 << 20), t0), None);
        w
    }

    /// Catches: a frozen meter with nothing said (the complaint: a 40 s blackout printed
    /// nothing), a notice every tick, or a notice that names the wrong timeout.
    #[test]
    fn a_silence_is_told_after_five_seconds_then_every_ten() {
        let t0 = Instant::now();
        let mut w = running(t0);
        assert_eq!(w.tick(t0 + secs(4)), None);
        let first = w.tick(t0 + secs(5));
        assert_eq!(first, Some(Silence::Waiting { silent: secs(5), reconnect_after: secs(60) }));
        assert_eq!(w.tick(t0 + secs(6)), None, "once, not every tick");
        assert_eq!(w.tick(t0 + secs(14)), None);
        assert!(matches!(w.tick(t0 + secs(15)), Some(Silence::Waiting { .. })));
        // The same figure again is no progress; a new one ends the silence.
        assert_eq!(w.note(&verified(1 << 20), t0 + secs(21)), None);
        assert_eq!(
            w.note(&verified(2 << 20), t0 + secs(24)),
            Some(Silence::Flowing { silent: secs(24) })
        );
        assert_eq!(w.tick(t0 + secs(28)), None, "the clock started again");
        assert!(matches!(w.tick(t0 + secs(29)), Some(Silence::Waiting { .. })));
        // A told silence is not a step: the threshold stays at five seconds.
        assert_eq!(w.longest_gap, Duration::ZERO);
    }

    /// Catches: the wait before the first verified bytes (a login, hashing a large
    /// partial file) counted as a step, which would silence the notices for minutes.
    #[test]
    fn the_wait_before_the_first_bytes_is_not_a_step() {
        let t0 = Instant::now();
        let mut w = Watch::default();
        w.note(&quic(), t0);
        w.note(&TransferEvent::Planned { files: 1, bytes: 10 << 20 }, t0);
        w.note(&verified(1 << 20), t0 + secs(4));
        assert_eq!(w.longest_gap, Duration::ZERO);
        assert!(matches!(w.tick(t0 + secs(9)), Some(Silence::Waiting { .. })));
    }

    /// Catches: notices before the copy starts (the login, the plan), during a reconnect
    /// (which has its own line) or after the end, and "flowing" lines without a notice.
    #[test]
    fn nothing_is_told_outside_a_running_copy() {
        let t0 = Instant::now();
        let mut w = Watch::default();
        assert_eq!(w.tick(t0 + secs(100)), None, "before the plan");
        let mut w = running(t0);
        assert_eq!(w.note(&verified(3 << 20), t0 + secs(1)), None, "no notice, no flowing");
        let reconnecting =
            TransferEvent::Reconnecting { reason: "lost".into(), attempt: 1, wait: secs(1) };
        assert_eq!(w.note(&reconnecting, t0 + secs(2)), None);
        assert_eq!(w.tick(t0 + secs(60)), None, "while reconnecting");
        let tcp = TransferEvent::Connected { transport: "TLS/TCP to h".into(), reason: None };
        w.note(&tcp, t0 + secs(61));
        w.note(&TransferEvent::Planned { files: 1, bytes: 10 << 20 }, t0 + secs(61));
        assert_eq!(
            w.tick(t0 + secs(66)),
            Some(Silence::Waiting { silent: secs(5), reconnect_after: secs(120) }),
            "TCP gives up after the stall limit"
        );
        let finished = TransferEvent::Finished {
            files: 1,
            bytes: 10 << 20,
            failures: 0,
            resumed: 0,
            elapsed: secs(80),
        };
        w.note(&finished, t0 + secs(80));
        assert!(w.done);
        assert_eq!(w.tick(t0 + secs(200)), None, "after the end");
    }

    /// Catches: a slow copy whose chunks are verified many at once every 8 s (`-l`)
    /// being told it is silent between steps.
    #[test]
    fn a_copy_that_moves_in_steps_is_told_only_past_its_steps() {
        let t0 = Instant::now();
        let mut w = running(t0);
        w.note(&verified(2 << 20), t0 + secs(8));
        assert_eq!(w.tick(t0 + secs(18)), None, "10 s after a step of 8 s");
        assert_eq!(w.tick(t0 + secs(31)), None);
        assert!(matches!(w.tick(t0 + secs(32)), Some(Silence::Waiting { .. })), "3 x 8 s");
    }

    #[test]
    fn the_words_say_what_is_known() {
        let text = describe(Silence::Waiting {
            silent: Duration::from_millis(12_400),
            reconnect_after: secs(60),
        });
        assert_eq!(
            text,
            "nothing verified for 12 s: waiting for the remote (if it stays silent for 60 s, \
             soku connects again and resumes)"
        );
        assert_eq!(
            describe(Silence::Flowing { silent: secs(14) }),
            "data flowing again after 14 s without progress"
        );
    }
}
