//! The progress meter on stderr (only when it is a terminal) and the one-line summary.
//!
//! Progress counts bytes the receiver has verified, never bytes handed to a socket.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{human_bytes, human_rate};
use soku_engine::events::{EventSink, TransferEvent};

/// Redraws at most this often.
const REDRAW: Duration = Duration::from_millis(200);

/// Progress meter and summary for people.
#[derive(Debug)]
pub struct ProgressMeter {
    quiet: bool,
    verbose: bool,
    live: bool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    start: Instant,
    total: Option<u64>,
    last_draw: Option<Instant>,
    drawn: bool,
    /// What carries the data, shortly ("QUIC", "TLS/TCP", "ssh"), once connected.
    carrier: Option<&'static str>,
}

impl ProgressMeter {
    /// A meter; `quiet` silences everything but errors, `verbose` adds connection details.
    pub fn new(quiet: bool, verbose: bool) -> Self {
        Self {
            quiet,
            verbose,
            live: !quiet && std::io::stderr().is_terminal(),
            state: Mutex::new(State {
                start: Instant::now(),
                total: None,
                last_draw: None,
                drawn: false,
                carrier: None,
            }),
        }
    }

    fn line(&self, text: &str) {
        let mut err = std::io::stderr().lock();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.drawn {
            let _ = write!(err, "\r\x1b[K");
            state.drawn = false;
        }
        let _ = writeln!(err, "{text}");
    }

    fn draw(&self, verified: u64) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if state.last_draw.is_some_and(|t| now - t < REDRAW) {
            return;
        }
        state.last_draw = Some(now);
        let secs = (now - state.start).as_secs_f64().max(1e-3);
        let rate = verified as f64 / secs;
        let mut text = format!("{} {}", human_bytes(verified), human_rate(rate));
        if let Some(total) = state.total.filter(|t| *t > 0) {
            let pct = verified as f64 * 100.0 / total as f64;
            let eta = if rate > 0.0 { (total.saturating_sub(verified)) as f64 / rate } else { 0.0 };
            text = format!("{pct:5.1}% of {} | {text} | ETA {}", human_bytes(total), clock(eta));
        }
        if let Some(carrier) = state.carrier {
            text = format!("{text} | {carrier}");
        }
        let _ = write!(std::io::stderr().lock(), "\r\x1b[K{text}");
        state.drawn = true;
    }
}

/// The short name of the transport a `Connected` event describes.
fn carrier(transport: &str) -> &'static str {
    if transport.starts_with("QUIC") {
        "QUIC"
    } else if transport.starts_with("TLS/TCP") {
        "TLS/TCP"
    } else {
        "ssh"
    }
}

fn clock(secs: f64) -> String {
    let s = secs.round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

impl EventSink for ProgressMeter {
    fn event(&self, event: TransferEvent) {
        match event {
            TransferEvent::Planned { bytes, .. } => {
                let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                state.total = Some(bytes);
                state.start = Instant::now();
            }
            TransferEvent::Verified { bytes } if self.live => self.draw(bytes),
            TransferEvent::Verified { .. } => {}
            TransferEvent::Connected { transport, .. } => {
                let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                state.carrier = Some(carrier(&transport));
                drop(state);
                if self.verbose && !self.quiet {
                    self.line(&format!("soku: data over {transport}"));
                }
            }
            TransferEvent::FileFailed { path, message } => {
                self.line(&format!("soku: {path}: {message}"));
            }
            TransferEvent::TargetFailed { message, .. } => {
                self.line(&format!("soku: remote: {message}"));
            }
            TransferEvent::Warning(message) => {
                if !self.quiet {
                    self.line(&format!("soku: warning: {message}"));
                }
            }
            TransferEvent::Reconnecting { reason, attempt, wait } => {
                if !self.quiet {
                    self.line(&format!(
                        "soku: {reason}: reconnecting in {} s (attempt {attempt}); the copy \
                         resumes from what the target holds",
                        wait.as_secs()
                    ));
                }
            }
            // A line every half second would bury the meter; `--json` has them.
            TransferEvent::PathSample(_) => {}
            TransferEvent::PathStats(p) => {
                if self.verbose && !self.quiet {
                    let model = match p.model {
                        Some(m) => format!(
                            "; model {:.1} Mbit/s x {:.1} ms",
                            m.bandwidth_bps as f64 / 1e6,
                            m.min_rtt.as_secs_f64() * 1e3
                        ),
                        None => String::new(),
                    };
                    self.line(&format!(
                        "soku: path: rtt {:.1} ms (min {:.1}), mtu {}, {} packets sent, {} lost ({:.2} %), {} congestion events, cwnd {}{model}",
                        p.rtt.as_secs_f64() * 1e3,
                        p.min_rtt.as_secs_f64() * 1e3,
                        p.mtu,
                        p.sent_packets,
                        p.lost_packets,
                        p.loss_percent(),
                        p.congestion_events,
                        human_bytes(p.cwnd)
                    ));
                }
            }
            TransferEvent::Finished { files, bytes, failures, resumed, elapsed } => {
                if self.quiet {
                    return;
                }
                let secs = elapsed.as_secs_f64().max(1e-6);
                // The rate is that of the bytes that crossed the network.
                let sent = bytes.saturating_sub(resumed);
                let held = if resumed > 0 {
                    format!(" ({} already there, {} sent)", human_bytes(resumed), human_bytes(sent))
                } else {
                    String::new()
                };
                let mut text = format!(
                    "{} file{}, {}{held} in {:.2} s, {}",
                    files,
                    if files == 1 { "" } else { "s" },
                    human_bytes(bytes),
                    secs,
                    human_rate(sent as f64 / secs)
                );
                if failures > 0 {
                    text.push_str(&format!(", {failures} failed"));
                }
                self.line(&text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_names_each_transport_shortly() {
        assert_eq!(carrier("QUIC to 10.0.0.2:4000"), "QUIC");
        assert_eq!(carrier("TLS/TCP to 10.0.0.2:4000 (4 data connections; bbr)"), "TLS/TCP");
        assert_eq!(carrier("the ssh channel"), "ssh");
    }
}
