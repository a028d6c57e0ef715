//! Machine-readable events: one JSON object per line on stderr.

use std::io::Write;

use crate::events::{EventSink, TransferEvent};

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
            TransferEvent::PathStats(p) => {
                let (model_bw, model_rtt) = match p.model {
                    Some(m) => (
                        format!("{:.3}", m.bandwidth_bps as f64 / 1e6),
                        format!("{:.3}", m.min_rtt.as_secs_f64() * 1e3),
                    ),
                    None => ("null".into(), "null".into()),
                };
                format!(
                    r#"{{"event":"path","rtt_ms":{:.3},"min_rtt_ms":{:.3},"mtu":{},"sent_packets":{},"lost_packets":{},"congestion_events":{},"cwnd":{},"model_bw_mbit":{model_bw},"model_min_rtt_ms":{model_rtt}}}"#,
                    p.rtt.as_secs_f64() * 1e3,
                    p.min_rtt.as_secs_f64() * 1e3,
                    p.mtu,
                    p.sent_packets,
                    p.lost_packets,
                    p.congestion_events,
                    p.cwnd
                )
            }
            TransferEvent::Finished { files, bytes, failures, elapsed } => format!(
                r#"{{"event":"finished","files":{files},"bytes":{bytes},"failures":{failures},"seconds":{:.6}}}"#,
                elapsed.as_secs_f64()
            ),
        };
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}
