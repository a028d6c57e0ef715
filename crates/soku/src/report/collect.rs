//! Collecting what a report shows: the copy's events, timestamped as they pass on to
//! the meter or `--json` (the same events, so the page and the JSON agree).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use soku_engine::events::{EventSink, PathReport, TransferEvent};
use soku_proto::hello::PathPoint;

/// Files listed by name at most; the rest are counted (a copy of a million small files
/// must not make a page of a million rows).
pub const MAX_FILES: usize = 200;
/// Failures and warnings kept at most (the rest are counted).
const MAX_NOTES: usize = 50;
/// Verified-bytes samples closer than this to the previous one replace it: the
/// receiver reports every few chunks, and the charts bin by at least a quarter second.
const VERIFIED_EVERY: Duration = Duration::from_millis(50);

/// One path sample, in the report's units, from either side.
#[derive(Debug, Clone, PartialEq)]
pub struct PathSample {
    /// Seconds since the recording started.
    pub t: f64,
    /// Smoothed RTT, milliseconds.
    pub rtt_ms: f64,
    /// Smallest RTT seen, milliseconds.
    pub min_rtt_ms: f64,
    /// Packets this side sent so far, and lost of them.
    pub sent_packets: u64,
    /// See `sent_packets`.
    pub lost_packets: u64,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// The controller's bottleneck estimate, Mbit/s.
    pub model_mbit: Option<f64>,
    /// The controller's phase name, if it runs soku-cc.
    pub phase: Option<String>,
}

impl PathSample {
    /// From this side's report at `t`.
    pub fn from_report(t: f64, p: &PathReport) -> Self {
        PathSample {
            t,
            rtt_ms: p.rtt.as_secs_f64() * 1e3,
            min_rtt_ms: p.min_rtt.as_secs_f64() * 1e3,
            sent_packets: p.sent_packets,
            lost_packets: p.lost_packets,
            cwnd: p.cwnd,
            model_mbit: p.model.map(|m| m.bandwidth_bps as f64 / 1e6),
            phase: p.model.map(|m| m.phase.name().to_string()),
        }
    }

    /// From the server's summary, whose times count from its connection's start
    /// (`connected`, on our clock: the two differ by up to half an RTT).
    pub fn from_point(connected: f64, p: &PathPoint) -> Self {
        PathSample {
            t: connected + p.at_ms as f64 / 1e3,
            rtt_ms: p.rtt_us as f64 / 1e3,
            min_rtt_ms: p.min_rtt_us as f64 / 1e3,
            sent_packets: p.sent_packets,
            lost_packets: p.lost_packets,
            cwnd: p.cwnd,
            model_mbit: (p.bandwidth_bps > 0).then(|| p.bandwidth_bps as f64 / 1e6),
            phase: (!p.phase.is_empty()).then(|| p.phase.clone()),
        }
    }

    /// Lost packets as a percentage of those sent.
    pub fn loss_percent(&self) -> f64 {
        if self.sent_packets == 0 {
            0.0
        } else {
            self.lost_packets as f64 * 100.0 / self.sent_packets as f64
        }
    }
}

/// How the copy ended, from its `Finished` event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finished {
    /// Files verified.
    pub files: u32,
    /// Bytes verified, resumed ones included.
    pub bytes: u64,
    /// Files that failed.
    pub failures: u32,
    /// Of `bytes`, those the receiver held already when the command started.
    pub resumed: u64,
    /// Seconds of data transfer.
    pub seconds: f64,
}

/// Everything recorded of one copy.
#[derive(Debug, Clone, Default)]
pub struct Recording {
    /// The transport ("QUIC to ...") and why not QUIC, from the last `Connected`.
    pub transport: Option<(String, Option<String>)>,
    /// Seconds from the start to the first `Connected` (ssh login, hellos, handshake).
    pub first_connected_at: Option<f64>,
    /// ...and to the last (a reconnected copy's server summary counts from it).
    pub connected_at: Option<f64>,
    /// Seconds from the start to the first `Planned` (the data starts; a reconnected
    /// copy plans again).
    pub planned_at: Option<f64>,
    /// The whole job: files and bytes.
    pub planned: Option<(u32, u64)>,
    /// (seconds, cumulative verified bytes of the current session).
    pub verified: Vec<(f64, u64)>,
    /// This side's path every half second (QUIC only).
    pub paths: Vec<PathSample>,
    /// This side's path at the end.
    pub final_path: Option<PathSample>,
    /// Files and sizes, in the order they entered the copy, at most [`MAX_FILES`].
    pub files: Vec<(String, u64)>,
    /// Files that entered the copy beyond `files`, and their bytes.
    pub more_files: (u64, u64),
    /// (path, why) of failed files, at most a few; `more_failures` counts the rest.
    pub failures: Vec<(String, String)>,
    /// See `failures`.
    pub more_failures: u64,
    /// Warnings, at most a few.
    pub warnings: Vec<String>,
    /// Reconnections during the copy.
    pub reconnects: u32,
    /// The end.
    pub finished: Option<Finished>,
}

/// Passes every event on to `inner` and records it.
pub struct Recorder {
    inner: Arc<dyn EventSink>,
    start: Instant,
    state: Mutex<Recording>,
}

impl Recorder {
    /// Records from now on, passing events to `inner`.
    pub fn new(inner: Arc<dyn EventSink>) -> Self {
        Recorder { inner, start: Instant::now(), state: Mutex::new(Recording::default()) }
    }

    /// What was recorded so far.
    pub fn recording(&self) -> Recording {
        self.lock().clone()
    }

    /// Seconds since the recording started.
    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recording> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(&self, event: &TransferEvent) {
        let t = self.elapsed();
        let mut r = self.lock();
        match event {
            TransferEvent::Connected { transport, reason } => {
                r.transport = Some((transport.clone(), reason.clone()));
                r.first_connected_at.get_or_insert(t);
                r.connected_at = Some(t);
            }
            TransferEvent::Planned { files, bytes } => {
                r.planned = Some((*files, *bytes));
                r.planned_at.get_or_insert(t);
            }
            TransferEvent::File { path, bytes } => {
                if r.files.len() < MAX_FILES {
                    r.files.push((path.clone(), *bytes));
                } else {
                    r.more_files.0 += 1;
                    r.more_files.1 = r.more_files.1.saturating_add(*bytes);
                }
            }
            TransferEvent::Verified { bytes } => {
                // The last point moves until it is VERIFIED_EVERY past the one before.
                let n = r.verified.len();
                if n >= 2 && r.verified[n - 2].0 + VERIFIED_EVERY.as_secs_f64() > t {
                    r.verified.pop();
                }
                r.verified.push((t, *bytes));
            }
            TransferEvent::FileFailed { path, message } => {
                note_failure(&mut r, path, message);
            }
            TransferEvent::TargetFailed { source, message } => {
                note_failure(&mut r, source, message);
            }
            TransferEvent::SourceFailed { target, message } => {
                note_failure(&mut r, target, message);
            }
            TransferEvent::Skipped { .. }
            | TransferEvent::Deleted { .. }
            | TransferEvent::SyncTotals { .. } => {}
            TransferEvent::Warning(message) => {
                if r.warnings.len() < MAX_NOTES {
                    r.warnings.push(message.clone());
                }
            }
            // What soku did around the copy (a binary sent to the remote): not the
            // copy's to report.
            TransferEvent::Notice(_) => {}
            TransferEvent::Reconnecting { .. } => r.reconnects += 1,
            TransferEvent::Unfinished { facts, here } => {
                let side = if *here { "local" } else { "remote" };
                if let Some(line) = crate::ui::unfinished::summary(facts, side).first() {
                    r.warnings.push(line.clone());
                }
            }
            // The command's figures come with `Finished`.
            TransferEvent::Sent { .. } | TransferEvent::Resumed { .. } => {}
            TransferEvent::PathSample(p) => r.paths.push(PathSample::from_report(t, p)),
            TransferEvent::PathStats(p) => r.final_path = Some(PathSample::from_report(t, p)),
            TransferEvent::Finished { files, bytes, failures, resumed, elapsed } => {
                // After a reconnection the engine's time is the last session's, while
                // the bytes are the whole copy's: the copy's time is then counted from
                // the first plan (outages included, as the user waited through them).
                let seconds = match r.planned_at {
                    Some(first) if r.reconnects > 0 => t - first,
                    _ => elapsed.as_secs_f64(),
                };
                r.finished = Some(Finished {
                    files: *files,
                    bytes: *bytes,
                    failures: *failures,
                    resumed: *resumed,
                    seconds,
                });
            }
        }
    }
}

fn note_failure(r: &mut Recording, path: &str, message: &str) {
    if r.failures.len() < MAX_NOTES {
        r.failures.push((path.to_string(), message.to_string()));
    } else {
        r.more_failures += 1;
    }
}

impl EventSink for Recorder {
    fn event(&self, event: TransferEvent) {
        self.record(&event);
        self.inner.event(event);
    }
}

#[cfg(test)]
mod tests {
    use soku_engine::events::Silent;

    use super::*;

    /// Catches: an unbounded file list, or the count of the rest going wrong.
    #[test]
    fn files_beyond_the_cap_are_counted_not_kept() {
        let rec = Recorder::new(Arc::new(Silent));
        for i in 0..MAX_FILES as u64 + 5 {
            rec.event(TransferEvent::File { path: format!("f{i}"), bytes: 10 });
        }
        let r = rec.recording();
        assert_eq!(r.files.len(), MAX_FILES);
        assert_eq!(r.files[0], ("f0".to_string(), 10));
        assert_eq!(r.more_files, (5, 50));
    }

    /// Catches: verified samples piling up at the receiver's reporting rate.
    #[test]
    fn close_verified_samples_are_merged() {
        let rec = Recorder::new(Arc::new(Silent));
        for bytes in 1..=1000 {
            rec.event(TransferEvent::Verified { bytes });
        }
        let r = rec.recording();
        assert!(r.verified.len() <= 3, "{:?}", r.verified.len());
        assert_eq!(r.verified.last().map(|v| v.1), Some(1000));
        assert_eq!(r.verified.first().map(|v| v.1), Some(1));
    }
}
