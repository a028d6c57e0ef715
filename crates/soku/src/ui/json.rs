//! Machine-readable events: one JSON object per line on stderr.

use std::io::Write;

use crate::events::{EventSink, PathReport, TransferEvent};

/// Writes each event as a JSON line on stderr.
#[derive(Debug, Default)]
pub struct JsonLines;

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// One path report as a JSON object; `kind` names the event (the final `path` or a
/// running `path_sample`).
fn path_line(kind: &str, p: &PathReport) -> String {
    let (model_bw, model_rtt, phase) = match p.model {
        Some(m) => (
            format!("{:.3}", m.bandwidth_bps as f64 / 1e6),
            format!("{:.3}", m.min_rtt.as_secs_f64() * 1e3),
            format!(r#""{}""#, m.phase.name()),
        ),
        None => ("null".into(), "null".into(), "null".into()),
    };
    format!(
        r#"{{"event":"{kind}","rtt_ms":{:.3},"min_rtt_ms":{:.3},"mtu":{},"sent_packets":{},"lost_packets":{},"congestion_events":{},"cwnd":{},"model_bw_mbit":{model_bw},"model_min_rtt_ms":{model_rtt},"phase":{phase}}}"#,
        p.rtt.as_secs_f64() * 1e3,
        p.min_rtt.as_secs_f64() * 1e3,
        p.mtu,
        p.sent_packets,
        p.lost_packets,
        p.congestion_events,
        p.cwnd
    )
}

impl EventSink for JsonLines {
    fn event(&self, event: TransferEvent) {
        let line = match event {
            TransferEvent::Connected { transport } => {
                format!(r#"{{"event":"connected","transport":"{}"}}"#, escape(&transport))
            }
            TransferEvent::Planned { files, bytes } => {
                format!(r#"{{"event":"planned","files":{files},"bytes":{bytes}}}"#)
            }
            TransferEvent::Verified { bytes } => {
                format!(r#"{{"event":"verified","bytes":{bytes}}}"#)
            }
            TransferEvent::FileFailed { path, message } => format!(
                r#"{{"event":"file_failed","path":"{}","message":"{}"}}"#,
                escape(&path),
                escape(&message)
            ),
            TransferEvent::Warning(message) => {
                format!(r#"{{"event":"warning","message":"{}"}}"#, escape(&message))
            }
            TransferEvent::PathStats(p) => path_line("path", &p),
            TransferEvent::PathSample(p) => path_line("path_sample", &p),
            TransferEvent::Finished { files, bytes, failures, elapsed } => format!(
                r#"{{"event":"finished","files":{files},"bytes":{bytes},"failures":{failures},"seconds":{:.6}}}"#,
                elapsed.as_secs_f64()
            ),
        };
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
            model,
        }
    }

    #[test]
    fn path_lines_carry_every_figure_and_the_phase() {
        let model = soku_transport::PathModel {
            bandwidth_bps: 950_000_000,
            min_rtt: Duration::from_millis(300),
            phase: soku_transport::CcPhase::ProbeBw,
        };
        assert_eq!(
            path_line("path_sample", &report(Some(model))),
            r#"{"event":"path_sample","rtt_ms":301.500,"min_rtt_ms":300.000,"mtu":1452,"sent_packets":1000,"lost_packets":10,"congestion_events":1,"cwnd":40000000,"model_bw_mbit":950.000,"model_min_rtt_ms":300.000,"phase":"probe_bw"}"#
        );
        let line = path_line("path", &report(None));
        assert!(line.starts_with(r#"{"event":"path","#), "{line}");
        assert!(
            line.ends_with(r#""model_bw_mbit":null,"model_min_rtt_ms":null,"phase":null}"#),
            "{line}"
        );
    }
}
