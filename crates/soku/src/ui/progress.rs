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
    /// The latest path sample (QUIC only): shown with `-v`.
    path: Option<PathNow>,
}

/// What `-v` adds to the live line: the path as the last [`TransferEvent::PathSample`]
/// saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct PathNow {
    /// Smoothed RTT.
    rtt: Duration,
    /// Lost packets as a percentage of those sent, over the connection so far.
    loss_percent: f64,
}

/// The live line's figures.
#[derive(Debug, Clone, Copy)]
struct Live {
    verified: u64,
    total: Option<u64>,
    secs: f64,
    carrier: Option<&'static str>,
    /// Only with `-v`.
    path: Option<PathNow>,
}

/// The text of the live line: progress, rate, ETA, transport, and with `-v` the path.
fn live_text(live: &Live) -> String {
    let rate = live.verified as f64 / live.secs.max(1e-3);
    let mut text = format!("{} {}", human_bytes(live.verified), human_rate(rate));
    if let Some(total) = live.total.filter(|t| *t > 0) {
        let pct = live.verified as f64 * 100.0 / total as f64;
        let eta =
            if rate > 0.0 { (total.saturating_sub(live.verified)) as f64 / rate } else { 0.0 };
        text = format!("{pct:5.1}% of {} | {text} | ETA {}", human_bytes(total), clock(eta));
    }
    if let Some(carrier) = live.carrier {
        text = format!("{text} | {carrier}");
    }
    if let Some(path) = live.path {
        // Two decimals of loss: the rates that matter on a long path are fractions of
        // a percent (RFC 9002's loss detection counts this side's packets).
        text = format!(
            "{text} | rtt {:.1} ms, loss {:.2} %",
            path.rtt.as_secs_f64() * 1e3,
            path.loss_percent
        );
    }
    text
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
                path: None,
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
        let text = live_text(&Live {
            verified,
            total: state.total,
            secs: (now - state.start).as_secs_f64(),
            carrier: state.carrier,
            path: state.path.filter(|_| self.verbose),
        });
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
            // A line every half second would bury the meter (`--json` has them); `-v`
            // shows the latest RTT and loss on the live line instead.
            TransferEvent::PathSample(p) => {
                if self.verbose {
                    let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    state.path = Some(PathNow { rtt: p.rtt, loss_percent: p.loss_percent() });
                }
            }
            TransferEvent::File { .. } => {}
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

    fn live(path: Option<PathNow>) -> Live {
        Live { verified: 50 << 20, total: Some(100 << 20), secs: 2.0, carrier: Some("QUIC"), path }
    }

    /// Catches: `-v` not showing the path on the live line, or showing it in other units.
    #[test]
    fn verbose_live_line_shows_rtt_and_loss() {
        let path = PathNow { rtt: Duration::from_micros(51_260), loss_percent: 0.4567 };
        let text = live_text(&live(Some(path)));
        assert!(text.ends_with("| QUIC | rtt 51.3 ms, loss 0.46 %"), "{text}");
        assert!(text.starts_with(" 50.0% of 100.0 MiB | 50.0 MiB 26.2 MB/s"), "{text}");
        assert!(text.contains("ETA 0:00:02"), "{text}");
    }

    /// Catches: the path figures leaking onto the line without `-v` (the meter keeps
    /// its width), or a sample arriving before any byte is verified breaking the line.
    #[test]
    fn plain_live_line_has_no_path_figures() {
        let text = live_text(&live(None));
        assert!(!text.contains("rtt") && !text.contains("loss"), "{text}");
        assert!(text.ends_with("| QUIC"), "{text}");
        let empty =
            live_text(&Live { verified: 0, total: Some(0), secs: 0.0, carrier: None, path: None });
        assert_eq!(empty, "0 B 0.0 MB/s (0 Mbit/s)");
    }

    /// Catches: the meter ignoring path samples under `-v`, or keeping them without it.
    #[test]
    fn path_samples_reach_the_line_only_when_verbose() {
        let sample = soku_engine::events::PathReport {
            rtt: Duration::from_millis(50),
            min_rtt: Duration::from_millis(50),
            mtu: 1452,
            sent_packets: 1000,
            lost_packets: 5,
            congestion_events: 1,
            cwnd: 1 << 20,
            model: None,
        };
        for verbose in [false, true] {
            let meter = ProgressMeter::new(false, verbose);
            meter.event(TransferEvent::PathSample(sample.clone()));
            let got = meter.state.lock().expect("lock").path;
            let want =
                verbose.then_some(PathNow { rtt: Duration::from_millis(50), loss_percent: 0.5 });
            assert_eq!(got, want);
        }
    }
}
