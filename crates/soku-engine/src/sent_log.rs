//! `SOKU_SENT_LOG=FILE`: a measurement switch, like `SOKU_CC`, not a feature. The data
//! sender (the client on an upload, `soku serve` on a download) appends to FILE one line
//! per chunk it hands to the transport, `SESSION BYTES` (the session's cumulative
//! count, [`TransferEvent::Sent`]), and `SESSION 0` when its session begins. The crash
//! suite (`crates/soku/tests/e2e/crash_suite.rs`) needs the sender's count as it was at a
//! kill -9, on whichever side the sender runs: the `--json` events do not carry it (one
//! line per chunk would flood them), the server's go nowhere, and a killed process tells
//! nothing afterwards, but lines already written to a file stay there. Each line is one
//! `write` to a file opened for appending, so the lines of several processes do not cut
//! into each other, and the file's length when a process is killed marks what was said
//! before.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::events::{EventSink, TransferEvent};

/// The environment variable naming the file.
pub(crate) const VAR: &str = "SOKU_SENT_LOG";

/// Passes every event on to `inner` and logs the `Sent` counts, when `SOKU_SENT_LOG`
/// names a file this process can open; otherwise returns `inner` itself. Called once
/// per sending session.
pub(crate) fn wrap(inner: Arc<dyn EventSink>) -> Arc<dyn EventSink> {
    let Some(path) = std::env::var_os(VAR).filter(|p| !p.is_empty()) else { return inner };
    // A measurement aid: a file it cannot open leaves the copy as it is (the reader of
    // the log finds the lines missing).
    let Ok(file) = OpenOptions::new().create(true).append(true).open(path) else { return inner };
    static SESSIONS: AtomicU32 = AtomicU32::new(0);
    let session = format!("{}.{}", std::process::id(), SESSIONS.fetch_add(1, Ordering::Relaxed));
    let log = SentLog { inner, file, session };
    log.line(0);
    Arc::new(log)
}

struct SentLog {
    inner: Arc<dyn EventSink>,
    file: File,
    /// This process's PID and its count of sessions, unique within the file.
    session: String,
}

impl SentLog {
    fn line(&self, bytes: u64) {
        let line = format!("{} {bytes}\n", self.session);
        // One write, so that the line is whole; a failed write only loses a figure.
        let _ = (&self.file).write_all(line.as_bytes());
    }
}

impl EventSink for SentLog {
    fn event(&self, event: TransferEvent) {
        if let TransferEvent::Sent { bytes } = &event {
            self.line(*bytes);
        }
        self.inner.event(event);
    }
}
