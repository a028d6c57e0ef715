//! The output of `soku diagnose`: a short report for people on stdout, or with
//! `--json` one JSON object `{"facts": ..., "verdict": ..., "seconds": ...}`.

use std::fmt::Write as _;
use std::time::Duration;

use super::facts::{Direction, PathFacts, Side};
use super::units::{bytes, bytes_rate, rate};
use super::verdict::Verdict;
use crate::exit;
use crate::ui::visible;

/// One JSON object on stdout.
pub fn json(facts: &PathFacts, verdict: &Verdict, took: Duration) -> anyhow::Result<()> {
    let value = serde_json::json!({
        "facts": facts,
        "verdict": verdict,
        "seconds": took.as_secs_f64(),
    });
    let mut out = serde_json::to_vec(&value)?;
    out.push(b'\n');
    exit::write_stdout(&out)
}

/// The report for people. The remote's disk path and errors, and the warnings, are
/// the peer's words: each is made visible on its own line.
pub fn human(
    facts: &PathFacts,
    verdict: &Verdict,
    warnings: &[String],
    took: Duration,
) -> anyhow::Result<()> {
    exit::write_stdout(render(facts, verdict, warnings, took).as_bytes())
}

fn render(facts: &PathFacts, verdict: &Verdict, warnings: &[String], took: Duration) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "soku diagnose {} ({:.1} s, over {})",
        visible(&facts.host),
        took.as_secs_f64(),
        facts.transport
    );
    let rtt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |ms| format!("{ms:.1} ms"));
    let mtu = facts.mtu.map_or_else(|| "-".to_string(), |m| format!("{m} bytes (UDP payload)"));
    let _ = writeln!(
        out,
        "  round trip   ssh {}, QUIC {}; path MTU {mtu}",
        rtt(facts.ssh_rtt_ms),
        rtt(facts.quic_rtt_ms)
    );
    let yes = |b: Option<bool>| match b {
        Some(true) => "gets through",
        Some(false) => "does not get through",
        None => "not tried",
    };
    let _ = writeln!(out, "  UDP          {}; TCP {}", yes(Some(facts.udp)), yes(facts.tcp));
    for (name, dir) in [("upload", &facts.upload), ("download", &facts.download)] {
        if let Some(d) = dir {
            let _ = writeln!(out, "  {name:<12} {}", direction(d));
        }
    }
    let _ = writeln!(out, "  {:<12} {}", facts.local.name, visible(&host(&facts.local, "reads")));
    if let Some(remote) = &facts.remote {
        let _ =
            writeln!(out, "  {:<12} {}", visible(&remote.name), visible(&host(remote, "writes")));
    }
    let est = |b: Option<u64>| b.map_or_else(|| "-".to_string(), rate);
    let _ = writeln!(
        out,
        "  expect       soku {}, scp {} (an upload)",
        est(verdict.soku_bps),
        est(verdict.scp_bps)
    );
    for warning in warnings {
        let _ = writeln!(out, "  warning      {}", visible(warning));
    }
    let _ = writeln!(out, "verdict:");
    if verdict.findings.is_empty() {
        let _ = writeln!(out, "  nothing measured limits a copy here");
    }
    for finding in &verdict.findings {
        let _ =
            writeln!(out, "  {} {}", if finding.limit { "*" } else { "-" }, visible(&finding.text));
    }
    out
}

fn direction(d: &Direction) -> String {
    let pattern = match d.loss_pattern {
        super::facts::LossPattern::Random => ", random",
        super::facts::LossPattern::Queue => ", at a full queue",
        super::facts::LossPattern::Unclear => "",
    };
    let drops = match d.received.rcvbuf_errors {
        Some(n) if n > 0 => format!(", {n} dropped at the receiver's UDP buffer"),
        _ => String::new(),
    };
    let reordering = match d.reordering {
        Some(share) => format!(
            "; reordered {:.2} % ({} of {} tags)",
            share * 100.0,
            d.received.reordered,
            d.received.tags
        ),
        None => "; reordering not measured".to_string(),
    };
    format!(
        "{}, loss {:.2} %{pattern}{drops}; RTT {:.1}-{:.1} ms (mean {:.1}, at losses {:.1}){reordering}",
        rate(d.rate_bps),
        d.loss * 100.0,
        d.sent.min_rtt_us as f64 / 1000.0,
        d.sent.max_rtt_us as f64 / 1000.0,
        d.sent.mean_rtt_us as f64 / 1000.0,
        d.sent.loss_rtt_us as f64 / 1000.0,
    )
}

/// One host's line; `verb`: what its disk test did ("reads", "writes").
fn host(side: &Side, verb: &str) -> String {
    let f = &side.facts;
    let cap = |c: Option<u64>| c.map_or_else(|| "?".to_string(), bytes);
    let disk = match &f.disk {
        Some(d) if d.error.is_none() => {
            format!("; disk {verb} {} at {}", bytes_rate(d.bytes_per_sec), d.path)
        }
        Some(d) => format!("; disk at {}: {}", d.path, d.error.as_deref().unwrap_or("?")),
        None => String::new(),
    };
    // A system with no caps to read (Windows, macOS) shows what the socket got alone.
    let caps = match (f.rmem_max, f.wmem_max) {
        (None, None) => String::new(),
        (r, w) => format!(" (rmem_max {}, wmem_max {})", cap(r), cap(w)),
    };
    format!(
        "{} cores; AES-GCM {}, ChaCha20 {} per core; UDP buffers {}/{}{caps}{disk}",
        f.cores,
        bytes_rate(f.aes_gcm_bps),
        bytes_rate(f.chacha_bps),
        bytes(f.udp_recv_buffer),
        bytes(f.udp_send_buffer),
    )
}
