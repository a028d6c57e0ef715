//! The progress meter on stderr (only when it is a terminal) and the one-line summary.
//!
//! Progress counts bytes the receiver has verified, never bytes handed to a socket.
//! The live line is drawn by `indicatif`: it redraws a line that wraps on a narrow
//! terminal without leaving the wrapped rows behind, truncates the message part to the
//! width, and draws nothing when stderr is not a terminal (the measurement that chose it
//! over the meter soku had is in `docs/ui.md`).

use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use super::silence::{self, Notice, Silence};
use super::units::{human_bytes, human_rate};
use soku_engine::events::{EventSink, TransferEvent};

/// Redraws per second at most: as the meter before indicatif (every 200 ms), which a
/// reader follows and a slow terminal (a serial console, ssh over a thin link) keeps up
/// with.
const REDRAW_HZ: u8 = 5;

/// The live line: progress of the whole job, the average rate since the data started
/// (as the summary gives it, in MB/s and Mbit/s), the ETA, then the message (the
/// transport, and with `-v` the path), which is cut first when the terminal is narrow.
const TEMPLATE: &str = "{pct}% of {total} | {verified} {rate} | ETA {eta} | {wide_msg}";

/// Progress meter and summary for people.
pub struct ProgressMeter {
    quiet: bool,
    verbose: bool,
    /// Whether a copy that went well ends with the summary line: on a terminal, or with
    /// `-v`. Without a terminal (cron, a script) it is noise, and scp prints nothing
    /// there either; errors and warnings are written all the same.
    summary: bool,
    bar: ProgressBar,
    /// Where the bar draws once the job is planned (hidden until then, so that no
    /// empty "0 B of 0 B" line shows during the login).
    target: Mutex<Option<ProgressDrawTarget>>,
    state: Mutex<State>,
    /// What the server's side is called in lines about it: "remote", or "local" for a
    /// copy whose server runs on this machine.
    other_side: &'static str,
    /// A sync's dry run: its decisions are listed on stdout, and its summary says what
    /// would happen.
    dry_run: bool,
}

#[derive(Debug, Default)]
struct State {
    /// What carries the data, shortly ("QUIC", "TLS/TCP", "ssh"), once connected.
    carrier: Option<&'static str>,
    /// The latest path sample (QUIC only): shown with `-v`.
    path: Option<PathNow>,
    /// Of the verified bytes, those the target held already (resume), this session.
    resumed: u64,
    /// A sync's counts, once told.
    sync: Option<SyncCounts>,
    /// Files a dry run would send.
    would_send: u32,
}

/// A sync's counts ([`TransferEvent::SyncTotals`]).
#[derive(Debug, Clone, Copy, Default)]
struct SyncCounts {
    sent: u32,
    resumed: u32,
    skipped: u32,
    deleted: u32,
}

impl SyncCounts {
    /// The summary's words for them; a dry run's, of which `would_send` of the files
    /// skipped would be sent.
    fn said(self, dry_run: Option<u32>) -> String {
        let n =
            |count: u32, what: &str| format!("{count} {what}{}", if count == 1 { "" } else { "s" });
        if let Some(would_send) = dry_run {
            return format!(
                "dry run: {} would be sent, {} skipped, {} would be deleted; nothing was changed",
                n(would_send, "file"),
                self.skipped.saturating_sub(would_send),
                n(self.deleted, "path"),
            );
        }
        format!(
            "{} sent ({} resumed), {} skipped, {} deleted",
            n(self.sent, "file"),
            self.resumed,
            self.skipped,
            self.deleted
        )
    }
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

/// The message part of the live line: the transport, and with `-v` the path.
fn message(carrier: Option<&str>, path: Option<PathNow>) -> String {
    let mut text = carrier.unwrap_or_default().to_string();
    if let Some(path) = path {
        // Two decimals of loss: the rates that matter on a long path are fractions of
        // a percent (RFC 9002's loss detection counts this side's packets).
        if !text.is_empty() {
            text.push_str(" | ");
        }
        text.push_str(&format!(
            "rtt {:.1} ms, loss {:.2} %",
            path.rtt.as_secs_f64() * 1e3,
            path.loss_percent
        ));
    }
    text
}

/// The live line's style: [`TEMPLATE`] with soku's own units.
fn style() -> ProgressStyle {
    type Out<'a> = &'a mut dyn std::fmt::Write;
    let rate = |s: &ProgressState| s.pos() as f64 / s.elapsed().as_secs_f64().max(1e-3);
    ProgressStyle::with_template(TEMPLATE)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key("pct", |s: &ProgressState, w: Out| {
            let pct = match s.len() {
                Some(total) if total > 0 => s.pos() as f64 * 100.0 / total as f64,
                _ => 100.0,
            };
            let _ = write!(w, "{pct:5.1}");
        })
        .with_key("total", |s: &ProgressState, w: Out| {
            let _ = write!(w, "{}", human_bytes(s.len().unwrap_or(0)));
        })
        .with_key("verified", |s: &ProgressState, w: Out| {
            let _ = write!(w, "{}", human_bytes(s.pos()));
        })
        .with_key("rate", move |s: &ProgressState, w: Out| {
            let _ = write!(w, "{}", human_rate(rate(s)));
        })
        .with_key("eta", move |s: &ProgressState, w: Out| {
            let left = s.len().unwrap_or(0).saturating_sub(s.pos()) as f64;
            let r = rate(s);
            let _ = write!(w, "{}", clock(if r > 0.0 { left / r } else { 0.0 }));
        })
}

impl ProgressMeter {
    /// A meter; `quiet` silences everything but errors, `verbose` adds connection details.
    pub fn new(quiet: bool, verbose: bool) -> Self {
        let target = (!quiet).then(|| ProgressDrawTarget::stderr_with_hz(REDRAW_HZ));
        let summary = verbose || std::io::IsTerminal::is_terminal(&std::io::stderr());
        Self { summary, ..Self::with_target(quiet, verbose, target) }
    }

    /// A meter drawing on `target` (none: never drawn).
    fn with_target(quiet: bool, verbose: bool, target: Option<ProgressDrawTarget>) -> Self {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        bar.set_style(style());
        Self {
            quiet,
            verbose,
            summary: true,
            bar,
            target: Mutex::new(target),
            state: Mutex::new(State::default()),
            other_side: "remote",
            dry_run: false,
        }
    }

    /// For a sync's dry run (see [`ProgressMeter::dry_run`]'s field).
    pub fn dry_run(self, dry_run: bool) -> Self {
        Self { dry_run, ..self }
    }

    /// A line on stdout: what a dry run would do, for a script to read (made visible:
    /// names come from either side).
    fn listed(&self, text: &str) {
        self.bar.suspend(|| println!("{}", super::visible(text)));
    }

    /// Names the server's side `name` in the lines about it ("remote" unless told).
    pub fn other_side(self, name: &'static str) -> Self {
        Self { other_side: name, ..self }
    }

    /// A line above the meter (the meter is cleared, the line written, the meter
    /// redrawn): written whether or not stderr is a terminal, made visible (it may
    /// carry names and the peer's messages).
    fn line(&self, text: &str) {
        self.bar.suspend(|| super::say(text));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the message from the state.
    fn refresh_message(&self) {
        let state = self.lock();
        let path = state.path.filter(|_| self.verbose);
        let mut text = message(state.carrier, path);
        if state.resumed > 0 {
            // What was already there is part of the percentage, and said apart, so a
            // copy that jumps ahead at its start is seen to be resuming.
            let held = format!("{} already there", crate::ui::human_bytes(state.resumed));
            text = if text.is_empty() { held } else { format!("{held} | {text}") };
        }
        drop(state);
        self.bar.set_message(text);
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
                self.bar.set_length(bytes);
                self.bar.set_position(0);
                self.bar.reset_elapsed();
                let target = self.target.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(target) = target {
                    self.bar.set_draw_target(target);
                }
            }
            TransferEvent::Verified { bytes } => self.bar.set_position(bytes),
            TransferEvent::Resumed { bytes } => {
                // The largest: concurrent tasks may tell counts out of order.
                let changed = {
                    let mut state = self.lock();
                    let changed = bytes > state.resumed;
                    state.resumed = state.resumed.max(bytes);
                    changed
                };
                if changed {
                    self.refresh_message();
                }
            }
            TransferEvent::Connected { transport, .. } => {
                self.lock().carrier = Some(carrier(&transport));
                self.refresh_message();
                if self.verbose && !self.quiet {
                    self.line(&format!("soku: data over {transport}"));
                }
            }
            // Each failure says which side it happened on: this one's paths, or the line
            // the remote side sent (which names its own path).
            TransferEvent::FileFailed { path, message } => {
                self.line(&format!("soku: local: {path}: {message}"));
            }
            TransferEvent::SourceFailed { message, .. } => {
                self.line(&format!("soku: {}: {message}", self.other_side));
            }
            TransferEvent::TargetFailed { message, .. } => {
                self.line(&format!("soku: {}: {message}", self.other_side));
            }
            TransferEvent::Warning(message) => {
                if !self.quiet {
                    self.line(&format!("soku: warning: {message}"));
                }
            }
            TransferEvent::Notice(message) => {
                if !self.quiet {
                    self.line(&format!("soku: {message}"));
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
                    self.lock().path = Some(PathNow { rtt: p.rtt, loss_percent: p.loss_percent() });
                    self.refresh_message();
                }
            }
            TransferEvent::File { .. } | TransferEvent::Sent { .. } => {}
            TransferEvent::Skipped { path, reason } => {
                if reason == soku_proto::sync::SkipReason::WouldSend {
                    self.lock().would_send += 1;
                    self.listed(&format!("would send: {path}"));
                }
            }
            TransferEvent::Deleted { path } => {
                if self.dry_run {
                    self.listed(&format!("would delete: {path}"));
                } else if self.verbose && !self.quiet {
                    self.line(&format!("soku: deleted {path}"));
                }
            }
            TransferEvent::SyncTotals { sent, resumed, skipped, deleted } => {
                self.lock().sync = Some(SyncCounts { sent, resumed, skipped, deleted });
            }
            // Its summary follows the error line that ends the copy (`exit::Stopped`).
            TransferEvent::Unfinished { .. } => {}
            TransferEvent::PathStats(p) => {
                if self.verbose && !self.quiet {
                    let model = match p.model {
                        Some(m) => format!(
                            "; model {:.1} Mbit/s x {:.1} ms; {} of {} round trips with less \
                             to send than the window allowed",
                            m.bandwidth_bps as f64 / 1e6,
                            m.min_rtt.as_secs_f64() * 1e3,
                            m.app_limited_rounds,
                            m.rounds
                        ),
                        None => String::new(),
                    };
                    self.line(&format!(
                        "soku: path: rtt {:.1} ms (min {:.1}), mtu {}, {} packets sent, {} lost ({:.2} %), {} congestion events, cwnd {}, flow control held the sender {} times{model}",
                        p.rtt.as_secs_f64() * 1e3,
                        p.min_rtt.as_secs_f64() * 1e3,
                        p.mtu,
                        p.sent_packets,
                        p.lost_packets,
                        p.loss_percent(),
                        p.congestion_events,
                        human_bytes(p.cwnd),
                        p.flow_blocked
                    ));
                }
            }
            TransferEvent::Finished { files, bytes, failures, resumed, elapsed } => {
                self.bar.finish_and_clear();
                if self.quiet || !self.summary {
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
                let mut moved = format!(
                    "{}{held} in {:.2} s, {}",
                    human_bytes(bytes),
                    secs,
                    human_rate(sent as f64 / secs)
                );
                if failures > 0 {
                    moved.push_str(&format!(", {failures} failed"));
                }
                let (counts, would_send) = {
                    let state = self.lock();
                    (state.sync, state.would_send)
                };
                let text = match counts {
                    Some(counts) if self.dry_run => counts.said(Some(would_send)),
                    // A sync's files are counted by what happened to them.
                    Some(counts) => format!("{}; {moved}", counts.said(None)),
                    None => format!("{files} file{}, {moved}", if files == 1 { "" } else { "s" }),
                };
                self.line(&text);
            }
        }
    }
}

impl Notice for ProgressMeter {
    /// A line above the meter, as a reconnect gets: a frozen meter alone does not say
    /// whether soku is waiting or hung.
    fn silence(&self, silence: Silence) {
        if !self.quiet {
            self.line(&format!("soku: {}", silence::describe(silence)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: a sync's summary that lost a count, or a dry run's that reads as done.
    #[test]
    fn a_syncs_summary_counts_what_happened_to_the_files() {
        let counts = SyncCounts { sent: 3, resumed: 1, skipped: 96, deleted: 2 };
        assert_eq!(counts.said(None), "3 files sent (1 resumed), 96 skipped, 2 deleted");
        let dry = SyncCounts { sent: 0, resumed: 0, skipped: 10, deleted: 1 };
        assert_eq!(
            dry.said(Some(4)),
            "dry run: 4 files would be sent, 6 skipped, 1 path would be deleted; nothing was \
             changed"
        );
    }

    #[test]
    fn the_progress_line_names_each_transport_shortly() {
        assert_eq!(carrier("QUIC to 10.0.0.2:4000"), "QUIC");
        assert_eq!(carrier("TLS/TCP to 10.0.0.2:4000 (4 data connections; bbr)"), "TLS/TCP");
        assert_eq!(carrier("the ssh channel"), "ssh");
    }

    /// A meter drawing into an in-memory terminal `cols` wide.
    fn on_terminal(verbose: bool, cols: u16) -> (ProgressMeter, indicatif::InMemoryTerm) {
        let term = indicatif::InMemoryTerm::new(10, cols);
        let target = ProgressDrawTarget::term_like(Box::new(term.clone()));
        (ProgressMeter::with_target(false, verbose, Some(target)), term)
    }

    fn sample() -> soku_engine::events::PathReport {
        soku_engine::events::PathReport {
            rtt: Duration::from_micros(51_260),
            min_rtt: Duration::from_millis(50),
            mtu: 1452,
            sent_packets: 100_000,
            lost_packets: 457,
            congestion_events: 1,
            cwnd: 1 << 20,
            flow_blocked: 0,
            model: None,
        }
    }

    /// Runs a copy's events into `meter` up to half of 100 MiB verified.
    fn halfway(meter: &ProgressMeter) {
        meter.event(TransferEvent::Connected {
            transport: "QUIC to 10.0.0.2:4000".into(),
            reason: None,
        });
        meter.event(TransferEvent::Planned { files: 1, bytes: 100 << 20 });
        meter.event(TransferEvent::PathSample(sample()));
        meter.event(TransferEvent::Verified { bytes: 50 << 20 });
        meter.bar.force_draw();
    }

    /// Catches: `-v` not showing the path on the live line, or showing it in other units.
    #[test]
    fn verbose_live_line_shows_rtt_and_loss() {
        let (meter, term) = on_terminal(true, 160);
        halfway(&meter);
        let text = term.contents();
        assert!(text.starts_with(" 50.0% of 100.0 MiB | 50.0 MiB "), "{text}");
        assert!(text.contains("| ETA "), "{text}");
        assert!(text.trim_end().ends_with("| QUIC | rtt 51.3 ms, loss 0.46 %"), "{text}");
    }

    /// Catches: a resumed copy's live line not saying how much was already there.
    #[test]
    fn a_resumed_copy_says_how_much_was_already_there() {
        let (meter, term) = on_terminal(false, 160);
        meter.event(TransferEvent::Connected {
            transport: "QUIC to 10.0.0.2:4000".into(),
            reason: None,
        });
        meter.event(TransferEvent::Planned { files: 1, bytes: 100 << 20 });
        meter.event(TransferEvent::Resumed { bytes: 40 << 20 });
        meter.event(TransferEvent::Resumed { bytes: 30 << 20 });
        meter.event(TransferEvent::Verified { bytes: 60 << 20 });
        meter.bar.force_draw();
        let text = term.contents();
        assert!(text.starts_with(" 60.0% of 100.0 MiB"), "{text}");
        assert!(text.trim_end().ends_with("| 40.0 MiB already there | QUIC"), "{text}");
    }

    /// Catches: the path figures leaking onto the line without `-v`.
    #[test]
    fn plain_live_line_has_no_path_figures() {
        let (meter, term) = on_terminal(false, 160);
        halfway(&meter);
        let text = term.contents();
        assert!(!text.contains("rtt") && !text.contains("loss"), "{text}");
        assert!(text.trim_end().ends_with("| QUIC"), "{text}");
        assert_eq!(message(None, None), "");
    }

    /// Catches: on a terminal narrower than the line, stale rows piling up at each
    /// redraw (the meter before indicatif cleared only the last row of a wrapped line).
    #[test]
    fn a_narrow_terminal_keeps_one_live_line() {
        let (meter, term) = on_terminal(true, 40);
        halfway(&meter);
        for step in 1..=5u64 {
            meter.event(TransferEvent::Verified { bytes: (50 + step * 5) << 20 });
            meter.bar.force_draw();
        }
        let text = term.contents();
        let rows: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        // One live line, wrapped onto at most three rows of 40, showing the latest.
        assert!(rows.len() <= 3, "{rows:?}");
        assert!(rows.iter().all(|r| r.chars().count() <= 40), "{rows:?}");
        assert!(rows[0].starts_with(" 75.0% of 100.0 MiB"), "{rows:?}");
        // A line written above the meter (to stderr itself, terminal or not) leaves
        // the meter drawn again after it.
        meter.event(TransferEvent::Warning("disk nearly full".into()));
        meter.bar.force_draw();
        assert!(term.contents().contains(" 75.0% of 100.0 MiB"), "{}", term.contents());
    }

    /// Catches: the summary not replacing the live line at the end.
    #[test]
    fn the_live_line_is_cleared_at_the_end() {
        let (meter, term) = on_terminal(false, 160);
        halfway(&meter);
        meter.event(TransferEvent::Finished {
            files: 1,
            bytes: 100 << 20,
            failures: 0,
            resumed: 0,
            elapsed: Duration::from_secs(2),
        });
        assert!(!term.contents().contains("ETA"), "{}", term.contents());
    }
}
