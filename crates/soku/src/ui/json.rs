//! Machine-readable events: one JSON object per line on stderr (RFC 8259), written by
//! serde_json. Figures in milliseconds and Mbit/s carry 3 decimals, seconds 6.

use std::io::Write;

use serde::Serialize;
use soku_engine::events::{EventSink, PathReport, TransferEvent};
use soku_proto::message::UNFINISHED_NAMES;

use super::silence::{Notice, Silence};

/// Writes each event as a JSON line on stderr.
#[derive(Debug)]
pub struct JsonLines {
    /// What the server's side is called: "remote", or "local" for a copy whose server
    /// runs on this machine.
    other_side: &'static str,
}

impl Default for JsonLines {
    fn default() -> Self {
        JsonLines { other_side: "remote" }
    }
}

impl JsonLines {
    /// Names the server's side `name` ("remote" unless told).
    pub fn other_side(name: &'static str) -> Self {
        JsonLines { other_side: name }
    }
}

/// One line: `"event"` names the kind and comes first, the figures follow in order.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Line<'a> {
    Connected {
        transport: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'a str>,
    },
    Planned {
        files: u32,
        bytes: u64,
    },
    Verified {
        bytes: u64,
    },
    /// Not written (see [`JsonLines`]'s `event`); here so that every event has a form.
    Sent {
        bytes: u64,
    },
    /// Not written (see [`JsonLines`]'s `event`); here so that every event has a form.
    Resumed {
        bytes: u64,
    },
    /// Not written (see [`JsonLines`]'s `event`); here so that every event has a form.
    File {
        path: &'a str,
        bytes: u64,
    },
    FileFailed {
        path: &'a str,
        message: &'a str,
    },
    TargetFailed {
        source: &'a str,
        message: &'a str,
    },
    SourceFailed {
        target: &'a str,
        message: &'a str,
    },
    Warning {
        message: &'a str,
    },
    Notice {
        message: &'a str,
    },
    /// A sync did not send this file (`reason`: unchanged, newer at the target, or in a
    /// dry run "would send").
    Skipped {
        path: &'a str,
        reason: &'static str,
    },
    /// A sync deleted this path at the target (in a dry run: would).
    Deleted {
        path: &'a str,
    },
    /// A sync's counts, before `finished`.
    SyncTotals {
        sent_files: u32,
        resumed_files: u32,
        skipped_files: u32,
        deleted_paths: u32,
    },
    /// The receiving side ran out of space: what its target holds (`partial` names the
    /// first of the partial files, `partial_unlisted` counts the others).
    Unfinished {
        side: &'a str,
        target: &'a str,
        planned_files: u32,
        whole_files: u32,
        partial_files: u32,
        partial_bytes: u64,
        partial: &'a [String],
        partial_unlisted: u32,
    },
    Reconnecting {
        reason: &'a str,
        attempt: u32,
        wait_seconds: f64,
    },
    /// Nothing verified for `seconds`: the copy waits; it reconnects if the remote stays
    /// silent for `reconnect_after_seconds` (see `ui::silence`).
    Waiting {
        seconds: f64,
        reconnect_after_seconds: f64,
    },
    /// Bytes verified again after `after_seconds` without.
    Flowing {
        after_seconds: f64,
    },
    /// The final `path` report.
    Path(PathLine),
    /// A running `path_sample`.
    PathSample(PathLine),
    Finished {
        files: u32,
        bytes: u64,
        failures: u32,
        /// Of `bytes`, those the receiver held already when the command started (resume;
        /// what an earlier connection of the same command sent is not counted).
        resumed_bytes: u64,
        seconds: f64,
    },
}

/// The figures of one path report; the model's are `null` when the controller has none.
#[derive(Debug, Serialize)]
struct PathLine {
    rtt_ms: f64,
    min_rtt_ms: f64,
    mtu: u16,
    sent_packets: u64,
    lost_packets: u64,
    congestion_events: u64,
    cwnd: u64,
    flow_blocked: u64,
    model_bw_mbit: Option<f64>,
    model_min_rtt_ms: Option<f64>,
    phase: Option<&'static str>,
    /// Careful resume's phase (`normal` without a jump) and the window it jumped to.
    resume: Option<&'static str>,
    resume_jump: Option<u64>,
    /// This side's controller yields to other traffic (`--background`).
    background: Option<bool>,
    /// Round trips so far, and those in which the sender had less to send than its
    /// window allowed.
    rounds: Option<u64>,
    app_limited_rounds: Option<u64>,
    /// The share of packets the path loses at every rate, in percent, once known.
    loss_floor_pct: Option<f64>,
    /// The rate a policer on the path passes, while the controller holds to it.
    policed_mbit: Option<f64>,
    /// Loss shares at the top of the RTT range and below it, in percent, whether the
    /// top is found to lose more (the queue's loss), the top of that range, the loss
    /// bound on bytes in flight, and whether it grows back as CUBIC's window does
    /// (`soku_cc::queue_loss`).
    queue_top_loss_pct: Option<f64>,
    queue_below_loss_pct: Option<f64>,
    queue_loss_found: Option<bool>,
    rtt_top_ms: Option<f64>,
    inflight_bound: Option<u64>,
    coexisting: Option<bool>,
}

/// `x` rounded to `decimals` places, so that the shortest form serde_json writes has at
/// most that many (as `{:.3}` had, without the trailing zeros).
fn round(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round() / scale
}

fn ms(d: std::time::Duration) -> f64 {
    round(d.as_secs_f64() * 1e3, 3)
}

impl PathLine {
    fn new(p: &PathReport) -> Self {
        let queue = p.model.map(|m| m.queue);
        PathLine {
            rtt_ms: ms(p.rtt),
            min_rtt_ms: ms(p.min_rtt),
            mtu: p.mtu,
            sent_packets: p.sent_packets,
            lost_packets: p.lost_packets,
            congestion_events: p.congestion_events,
            cwnd: p.cwnd,
            flow_blocked: p.flow_blocked,
            model_bw_mbit: p.model.map(|m| round(m.bandwidth_bps as f64 / 1e6, 3)),
            model_min_rtt_ms: p.model.map(|m| ms(m.min_rtt)),
            phase: p.model.map(|m| m.phase.name()),
            resume: p.model.map(|m| m.resume.name()),
            resume_jump: p.model.map(|m| m.resume_jump),
            background: p.model.map(|m| m.background),
            rounds: p.model.map(|m| m.rounds),
            app_limited_rounds: p.model.map(|m| m.app_limited_rounds),
            loss_floor_pct: p.model.and_then(|m| m.loss_floor).map(|f| round(f * 100.0, 2)),
            policed_mbit: p.model.and_then(|m| m.policed_bps).map(|b| round(b as f64 / 1e6, 3)),
            queue_top_loss_pct: queue.and_then(|q| q.lost_top).map(|f| round(f * 100.0, 3)),
            queue_below_loss_pct: queue.and_then(|q| q.lost_below).map(|f| round(f * 100.0, 3)),
            queue_loss_found: queue.map(|q| q.found),
            rtt_top_ms: queue.and_then(|q| q.rtt_top).map(ms),
            inflight_bound: queue.and_then(|q| q.bound),
            coexisting: queue.map(|q| q.coexisting),
        }
    }
}

/// The JSON line for one event, without the newline; the server's side is named
/// `other_side`.
fn line(event: &TransferEvent, other_side: &str) -> String {
    let line = match event {
        TransferEvent::Connected { transport, reason } => {
            Line::Connected { transport, reason: reason.as_deref() }
        }
        TransferEvent::Planned { files, bytes } => Line::Planned { files: *files, bytes: *bytes },
        TransferEvent::Verified { bytes } => Line::Verified { bytes: *bytes },
        TransferEvent::Sent { bytes } => Line::Sent { bytes: *bytes },
        TransferEvent::Resumed { bytes } => Line::Resumed { bytes: *bytes },
        TransferEvent::File { path, bytes } => Line::File { path, bytes: *bytes },
        TransferEvent::FileFailed { path, message } => Line::FileFailed { path, message },
        TransferEvent::TargetFailed { source, message } => Line::TargetFailed { source, message },
        TransferEvent::SourceFailed { target, message } => Line::SourceFailed { target, message },
        TransferEvent::Warning(message) => Line::Warning { message },
        TransferEvent::Notice(message) => Line::Notice { message },
        TransferEvent::Skipped { path, reason } => Line::Skipped { path, reason: reason.said() },
        TransferEvent::Deleted { path } => Line::Deleted { path },
        TransferEvent::SyncTotals { sent, resumed, skipped, deleted } => Line::SyncTotals {
            sent_files: *sent,
            resumed_files: *resumed,
            skipped_files: *skipped,
            deleted_paths: *deleted,
        },
        TransferEvent::Unfinished { facts, here } => {
            // A peer's list is held to what it may send.
            let listed = facts.names.len().min(facts.partial as usize).min(UNFINISHED_NAMES);
            let partial = &facts.names[..listed];
            Line::Unfinished {
                side: if *here { "local" } else { other_side },
                target: &facts.target,
                planned_files: facts.planned,
                whole_files: facts.whole,
                partial_files: facts.partial,
                partial_bytes: facts.partial_bytes,
                partial,
                partial_unlisted: facts.partial.saturating_sub(u32::try_from(listed).unwrap_or(0)),
            }
        }
        TransferEvent::Reconnecting { reason, attempt, wait } => Line::Reconnecting {
            reason,
            attempt: *attempt,
            wait_seconds: round(wait.as_secs_f64(), 3),
        },
        TransferEvent::PathStats(p) => Line::Path(PathLine::new(p)),
        TransferEvent::PathSample(p) => Line::PathSample(PathLine::new(p)),
        TransferEvent::Finished { files, bytes, failures, resumed, elapsed } => Line::Finished {
            files: *files,
            bytes: *bytes,
            failures: *failures,
            resumed_bytes: *resumed,
            seconds: round(elapsed.as_secs_f64(), 6),
        },
    };
    // Cannot fail: no maps, and serde_json writes non-finite floats as null.
    serde_json::to_string(&line).unwrap_or_default()
}

/// The line that ends a failed command under `--json`, without the newline: the error
/// as the line for people would say it, and the exit status.
pub fn error_line(message: &str, exit_status: u8) -> String {
    #[derive(Serialize)]
    struct Error<'a> {
        event: &'static str,
        message: &'a str,
        exit_status: u8,
    }
    serde_json::to_string(&Error { event: "error", message, exit_status }).unwrap_or_default()
}

/// A line of ssh's error output (ssh's own messages, the remote shell's and the remote
/// soku's) under `--json`, without the newline.
pub fn ssh_line(line: &str) -> String {
    #[derive(Serialize)]
    struct SshStderr<'a> {
        event: &'static str,
        line: &'a str,
    }
    serde_json::to_string(&SshStderr { event: "ssh_stderr", line }).unwrap_or_default()
}

/// The JSON line for a silence notice, without the newline.
fn silence_line(silence: Silence) -> String {
    let line = match silence {
        Silence::Waiting { silent, reconnect_after } => Line::Waiting {
            seconds: round(silent.as_secs_f64(), 3),
            reconnect_after_seconds: round(reconnect_after.as_secs_f64(), 3),
        },
        Silence::Flowing { silent } => {
            Line::Flowing { after_seconds: round(silent.as_secs_f64(), 3) }
        }
    };
    serde_json::to_string(&line).unwrap_or_default()
}

/// Writes `line` and a newline to stderr in one write (stderr is unbuffered), so that
/// other writers to the same stderr cannot cut into a line.
fn write_line(line: String) {
    let mut bytes = line.into_bytes();
    bytes.push(b'\n');
    let _ = std::io::stderr().lock().write_all(&bytes);
}

impl EventSink for JsonLines {
    fn event(&self, event: TransferEvent) {
        // One line per file would multiply the output of a copy of many small files,
        // and no consumer asked for it; `--report` lists them.
        // Nor one per chunk sent or found held: `finished` has the command's totals.
        if let TransferEvent::File { .. }
        | TransferEvent::Sent { .. }
        | TransferEvent::Resumed { .. } = event
        {
            return;
        }
        write_line(line(&event, self.other_side));
    }
}

impl Notice for JsonLines {
    fn silence(&self, silence: Silence) {
        write_line(silence_line(silence));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{json, Value};

    use super::*;

    fn report(model: Option<soku_transport::PathModel>) -> PathReport {
        PathReport {
            rtt: Duration::from_micros(301_500),
            min_rtt: Duration::from_millis(300),
            mtu: 1452,
            sent_packets: 1000,
            lost_packets: 10,
            congestion_events: 1,
            cwnd: 40_000_000,
            flow_blocked: 0,
            model,
        }
    }

    fn line_of(event: &TransferEvent) -> String {
        line(event, "remote")
    }

    fn parsed(event: TransferEvent) -> Value {
        let text = line_of(&event);
        assert!(!text.contains('\n'), "one line: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    #[test]
    fn path_lines_carry_every_figure_and_the_phase() {
        let model = soku_transport::PathModel {
            bandwidth_bps: 950_000_000,
            min_rtt: Duration::from_millis(300),
            phase: soku_transport::CcPhase::ProbeBw,
            resume: soku_transport::ResumePhase::Normal,
            resume_jump: 1_250_000,
            resume_lost_without_queue: false,
            resume_retreat_settled: false,
            background: false,
            rounds: 400,
            app_limited_rounds: 3,
            loss_floor: Some(0.012345),
            policed_bps: Some(4_990_000),
            queue: soku_transport::QueueView {
                lost_top: Some(0.02),
                lost_below: Some(0.001),
                found: true,
                rtt_top: Some(std::time::Duration::from_millis(325)),
                bound: Some(30_000_000),
                coexisting: true,
            },
        };
        // Numbers stay numbers; serde_json writes 301.5 where `{:.3}` wrote 301.500.
        assert_eq!(
            line_of(&TransferEvent::PathSample(report(Some(model)))),
            r#"{"event":"path_sample","rtt_ms":301.5,"min_rtt_ms":300.0,"mtu":1452,"sent_packets":1000,"lost_packets":10,"congestion_events":1,"cwnd":40000000,"flow_blocked":0,"model_bw_mbit":950.0,"model_min_rtt_ms":300.0,"phase":"probe_bw","resume":"normal","resume_jump":1250000,"background":false,"rounds":400,"app_limited_rounds":3,"loss_floor_pct":1.23,"policed_mbit":4.99,"queue_top_loss_pct":2.0,"queue_below_loss_pct":0.1,"queue_loss_found":true,"rtt_top_ms":325.0,"inflight_bound":30000000,"coexisting":true}"#
        );
        let line = line_of(&TransferEvent::PathStats(report(None)));
        assert!(line.starts_with(r#"{"event":"path","#), "{line}");
        assert!(
            line.ends_with(r#""model_bw_mbit":null,"model_min_rtt_ms":null,"phase":null,"resume":null,"resume_jump":null,"background":null,"rounds":null,"app_limited_rounds":null,"loss_floor_pct":null,"policed_mbit":null,"queue_top_loss_pct":null,"queue_below_loss_pct":null,"queue_loss_found":null,"rtt_top_ms":null,"inflight_bound":null,"coexisting":null}"#),
            "{line}"
        );
    }

    #[test]
    fn figures_keep_their_decimals() {
        let model = soku_transport::PathModel {
            bandwidth_bps: 123_456_789,
            min_rtt: Duration::from_nanos(12_345_678),
            phase: soku_transport::CcPhase::ProbeBw,
            resume: soku_transport::ResumePhase::Normal,
            resume_jump: 0,
            rounds: 0,
            app_limited_rounds: 0,
            resume_lost_without_queue: false,
            resume_retreat_settled: false,
            background: false,
            loss_floor: None,
            policed_bps: None,
            queue: Default::default(),
        };
        let mut rep = report(Some(model));
        rep.rtt = Duration::from_nanos(1_234_567);
        let v = parsed(TransferEvent::PathStats(rep));
        assert_eq!(v["rtt_ms"], json!(1.235));
        assert_eq!(v["model_bw_mbit"], json!(123.457));
        assert_eq!(v["model_min_rtt_ms"], json!(12.346));
        let v = parsed(TransferEvent::Finished {
            files: 3,
            bytes: u64::MAX,
            failures: 1,
            resumed: 7,
            elapsed: Duration::from_nanos(2_123_456_789),
        });
        let want = json!({
            "event": "finished", "files": 3, "bytes": u64::MAX, "failures": 1,
            "resumed_bytes": 7, "seconds": 2.123457
        });
        assert_eq!(v, want);
    }

    #[test]
    fn every_event_has_its_fields() {
        let cases = [
            (
                TransferEvent::Connected { transport: "QUIC".into(), reason: None },
                json!({"event": "connected", "transport": "QUIC"}),
            ),
            (
                TransferEvent::Connected {
                    transport: "TLS/TCP".into(),
                    reason: Some("no QUIC".into()),
                },
                json!({"event": "connected", "transport": "TLS/TCP", "reason": "no QUIC"}),
            ),
            (
                TransferEvent::Planned { files: 2, bytes: 1 << 40 },
                json!({"event": "planned", "files": 2, "bytes": 1u64 << 40}),
            ),
            (TransferEvent::Verified { bytes: 7 }, json!({"event": "verified", "bytes": 7})),
            (
                TransferEvent::FileFailed { path: "a/b".into(), message: "gone".into() },
                json!({"event": "file_failed", "path": "a/b", "message": "gone"}),
            ),
            (TransferEvent::Warning("slow".into()), json!({"event": "warning", "message": "slow"})),
            (TransferEvent::Notice("sent".into()), json!({"event": "notice", "message": "sent"})),
            (
                TransferEvent::Unfinished {
                    facts: soku_proto::message::Unfinished {
                        target: "dl".into(),
                        planned: 9,
                        whole: 3,
                        partial: 12,
                        partial_bytes: 4096,
                        names: vec!["dl/a".into(), "dl/b".into()],
                    },
                    here: false,
                },
                json!({
                    "event": "unfinished", "side": "remote", "target": "dl",
                    "planned_files": 9, "whole_files": 3, "partial_files": 12,
                    "partial_bytes": 4096, "partial": ["dl/a", "dl/b"], "partial_unlisted": 10
                }),
            ),
        ];
        for (event, want) in cases {
            assert_eq!(parsed(event), want);
        }
        assert_eq!(
            line_of(&TransferEvent::FileFailed { path: "p".into(), message: "m".into() }),
            r#"{"event":"file_failed","path":"p","message":"m"}"#
        );
    }

    /// Catches: a failed command's last line not being JSON under `--json`.
    #[test]
    fn the_error_is_a_json_object_with_the_exit_status() {
        let v: Value = serde_json::from_str(&error_line("ssh: \"x\"\n", 255)).expect("json");
        assert_eq!(v, json!({"event": "error", "message": "ssh: \"x\"\n", "exit_status": 255}));
    }

    /// Catches: a silence notice missing from `--json`, or in other units.
    #[test]
    fn silences_have_their_lines() {
        let waiting = Silence::Waiting {
            silent: Duration::from_millis(10_250),
            reconnect_after: Duration::from_secs(60),
        };
        let v: Value = serde_json::from_str(&silence_line(waiting)).expect("json");
        assert_eq!(
            v,
            json!({"event": "waiting", "seconds": 10.25, "reconnect_after_seconds": 60.0})
        );
        let flowing = Silence::Flowing { silent: Duration::from_secs(14) };
        let v: Value = serde_json::from_str(&silence_line(flowing)).expect("json");
        assert_eq!(v, json!({"event": "flowing", "after_seconds": 14.0}));
    }

    #[test]
    fn strings_survive_quotes_backslashes_and_control_characters() {
        let nasty = "say \"hi\" \\ a\\b \n\r\t\u{0}\u{1f}\u{7f} ünï 日本 \u{2028} 🦀 </script>";
        let v = parsed(TransferEvent::FileFailed { path: nasty.into(), message: nasty.into() });
        assert_eq!(v["path"], nasty);
        assert_eq!(v["message"], nasty);
        assert_eq!(parsed(TransferEvent::Warning(nasty.into()))["message"], nasty);
        assert_eq!(
            parsed(TransferEvent::Connected { transport: nasty.into(), reason: None })["transport"],
            nasty
        );
        // Control characters are escaped, never written raw.
        let text = line_of(&TransferEvent::Warning(nasty.into()));
        assert!(!text.chars().any(|c| c < ' '), "{text:?}");
    }

    proptest::proptest! {
        /// Catches: a character written unescaped or escaped wrongly (a quote, a backslash,
        /// a control character, a character outside the BMP): every string must
        /// come back whole from a JSON parser, on one line. Regressions go to
        /// `crates/soku/proptest-regressions/ui/json.txt`.
        #[test]
        fn any_string_parses_back(
            path in ".*",
            message in proptest::prelude::any::<String>(),
        ) {
            let event = TransferEvent::FileFailed { path: path.clone(), message: message.clone() };
            let v = parsed(event);
            proptest::prop_assert_eq!(v["path"].as_str(), Some(path.as_str()));
            proptest::prop_assert_eq!(v["message"].as_str(), Some(message.as_str()));
        }
    }
}
