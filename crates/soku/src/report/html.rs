//! The report page: one HTML document with its CSS and SVG inline. Every string that
//! came from outside (file names, messages, the command line) goes through
//! [`escape`].

use std::fmt::Write as _;

use super::collect::{PathSample, Recording};
use super::context::Context;
use super::escape::escape;
use super::series::{goodput, loss_per_interval, phase_bands, quantile};
use super::svg::{Chart, Line};
use super::verdict::{verdict, Figures};
use crate::ui::human_bytes;

const STYLE: &str = "
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:#1d2330;background:#f3f5f8;margin:0}
main{max-width:940px;margin:0 auto;padding:20px}
h1{font-size:26px;margin:4px 0 2px}
h2{font-size:18px;margin:0 0 10px}
.sub{color:#5b6476;margin:0 0 16px;overflow-wrap:anywhere}
section{background:#fff;border:1px solid #dde2ea;border-radius:8px;padding:16px 18px;margin:0 0 16px}
.verdict{border-left:6px solid #2a9d8f}
.verdict p.head{font-size:17px;font-weight:600;margin:0 0 6px}
.verdict p{margin:4px 0}
.tiles{display:flex;flex-wrap:wrap;gap:10px}
.tile{flex:1 1 150px;background:#f7f9fc;border:1px solid #e3e8ef;border-radius:6px;padding:8px 10px}
.tile b{display:block;font-size:20px}
.tile span{color:#5b6476;font-size:13px}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #edf0f4;vertical-align:top}
td.num,th.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
td.path{overflow-wrap:anywhere;font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:13px}
.note{color:#5b6476;font-size:13px}
svg.chart{display:block;max-width:100%;height:auto;margin:6px 0 14px}
svg .title{font-size:15px;font-weight:600;fill:#1d2330}
svg .legend,svg .tick{font-size:12px;fill:#3b4456}
svg .label{font-size:12.5px;fill:#3b4456}
svg .grid{stroke:#e6e9ef}
svg .axis{stroke:#8a93a5}
";

const BLUE: &str = "#1f77b4";
const ORANGE: &str = "#e76f51";
const GREY: &str = "#6c757d";
const GREEN: &str = "#2a9d8f";
const PURPLE: &str = "#7b2cbf";

/// The data sender's path samples, and whether they are the sender's: this side's on
/// an upload, the server's (from its summary) on a download.
fn sender_paths(rec: &Recording, ctx: &Context) -> (Vec<PathSample>, bool) {
    if ctx.upload {
        return (rec.paths.clone(), true);
    }
    match (&ctx.server, rec.connected_at) {
        (Some(s), Some(connected)) if s.sent_data && !s.samples.is_empty() => {
            let samples = s.samples.iter().map(|p| PathSample::from_point(connected, p)).collect();
            (samples, true)
        }
        _ => (rec.paths.clone(), false),
    }
}

/// CPU seconds over wall seconds of each side: (sender, receiver).
fn cores(ctx: &Context) -> (Option<f64>, Option<f64>) {
    let client = Some(ctx.client_cpu.as_secs_f64() / ctx.client_wall.as_secs_f64().max(1e-3));
    let server = ctx.server.as_ref().map(|s| s.cpu_us as f64 / (s.wall_us.max(1000)) as f64);
    if ctx.upload {
        (client, server)
    } else {
        (server, client)
    }
}

/// The verdict's figures from the records.
fn figures(rec: &Recording, ctx: &Context, paths: &[PathSample], sender_view: bool) -> Figures {
    let (sender_cores, receiver_cores) = cores(ctx);
    let fin = rec.finished;
    // The queue is judged once startup (which builds one on purpose) is over.
    let steady: Vec<f64> = paths
        .iter()
        .filter(|p| !matches!(p.phase.as_deref(), Some("startup" | "drain")))
        .map(|p| p.rtt_ms)
        .collect();
    let all: Vec<f64> = paths.iter().map(|p| p.rtt_ms).collect();
    let last = if sender_view && ctx.upload {
        rec.final_path.as_ref().or(paths.last())
    } else {
        paths.last()
    };
    Figures {
        sent_bytes: fin.map_or(0, |f| f.bytes.saturating_sub(f.resumed)),
        seconds: fin.map_or(0.0, |f| f.seconds),
        rate_limit_bps: ctx.rate_limit_bps,
        min_rtt_ms: paths.iter().map(|p| p.min_rtt_ms).filter(|m| *m > 0.0).reduce(f64::min),
        rtt_p90_ms: quantile(if steady.is_empty() { &all } else { &steady }, 0.9),
        loss_percent: last.filter(|_| sender_view).map(PathSample::loss_percent),
        loss_median_percent: quantile(
            &loss_per_interval(paths).into_iter().map(|(_, l)| l).collect::<Vec<_>>(),
            0.5,
        )
        .filter(|_| sender_view),
        model_bps: last.and_then(|p| p.model_mbit).map(|m| m * 1e6).filter(|_| sender_view),
        sender_cores,
        receiver_cores,
    }
}

/// A date and time from Unix seconds, UTC: `2026-11-24 09:30:00 UTC` (days to a
/// civil date by the proleptic Gregorian calendar, in 400-year eras).
fn utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

fn tile(out: &mut String, value: &str, what: &str) {
    let _ = write!(
        out,
        r#"<div class="tile"><b>{}</b><span>{}</span></div>"#,
        escape(value),
        escape(what)
    );
}

/// The whole page.
pub fn page(rec: &Recording, ctx: &Context) -> String {
    let (paths, sender_view) = sender_paths(rec, ctx);
    let fig = figures(rec, ctx, &paths, sender_view);
    let v = verdict(&fig);
    let fin = rec.finished;
    let start = rec.planned_at.or(rec.connected_at).unwrap_or(0.0);
    let end = fin
        .map(|f| start + f.seconds)
        .into_iter()
        .chain(rec.verified.last().map(|v| v.0))
        .fold(start + 0.5, f64::max);
    // Charts count from the start of the data (the login before it is in the tiles).
    let shift = |t: f64| t - start;
    let x_max = end - start;

    let mut s = String::with_capacity(64 * 1024);
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    s.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    let _ = write!(s, "<title>soku copy report</title><style>{STYLE}</style></head><body><main>");
    let _ = write!(
        s,
        r#"<h1>soku copy report</h1><p class="sub">{} · soku {} · <code>{}</code></p>"#,
        utc(ctx.started_unix),
        env!("CARGO_PKG_VERSION"),
        escape(&ctx.command)
    );

    // The verdict first: it is what a reader came for.
    let _ = write!(
        s,
        r#"<section class="verdict"><h2>Verdict</h2><p class="head">{}</p>"#,
        escape(&v.headline)
    );
    for note in &v.notes {
        let _ = write!(s, "<p>{}</p>", escape(note));
    }
    s.push_str("</section>");

    // Key figures.
    s.push_str(r#"<section><h2>The copy</h2><div class="tiles">"#);
    if let Some(f) = fin {
        let sent = f.bytes.saturating_sub(f.resumed);
        tile(
            &mut s,
            &format!("{} file{}", f.files, if f.files == 1 { "" } else { "s" }),
            &human_bytes(f.bytes),
        );
        tile(
            &mut s,
            &format!("{:.1} Mbit/s", sent as f64 * 8.0 / f.seconds.max(1e-6) / 1e6),
            "average goodput (verified)",
        );
        tile(&mut s, &format!("{:.2} s", f.seconds), "data transfer");
        tile(&mut s, &human_bytes(sent), "sent over the network");
        tile(&mut s, &human_bytes(f.resumed), "resumed (already at the target)");
        if f.failures > 0 {
            tile(&mut s, &f.failures.to_string(), "files failed");
        }
    } else {
        tile(&mut s, "unfinished", "the copy did not end normally");
    }
    if let Some(c) = rec.first_connected_at {
        tile(&mut s, &format!("{c:.2} s"), "set-up (ssh login, hellos, handshake)");
    }
    if let Some(m) = fig.min_rtt_ms {
        tile(&mut s, &format!("{m:.1} ms"), "min RTT");
    }
    if let Some(l) = fig.loss_percent {
        tile(&mut s, &format!("{l:.2} %"), "packets lost (data sender)");
    }
    if rec.reconnects > 0 {
        tile(&mut s, &rec.reconnects.to_string(), "reconnections");
    }
    s.push_str("</div>");
    match &rec.transport {
        Some((transport, reason)) => {
            let _ = write!(s, "<p>Data over <b>{}</b>", escape(transport));
            match reason {
                Some(why) => {
                    let _ = write!(s, ", not QUIC: {}.</p>", escape(why));
                }
                None => s.push_str(
                    ": QUIC, soku's own transport with its congestion controller, soku-cc.</p>",
                ),
            }
        }
        None => s.push_str("<p>No data path was set up.</p>"),
    }
    s.push_str("</section>");

    // Charts.
    s.push_str("<section><h2>Over time</h2>");
    let goodput_points: Vec<(f64, f64)> =
        goodput(&rec.verified, start, end).into_iter().map(|(t, v)| (shift(t), v)).collect();
    let goodput_top = goodput_points.iter().map(|p| p.1).fold(0.0, f64::max);
    let mut lines = vec![Line {
        name: "goodput (receiver-verified)".into(),
        color: BLUE,
        points: goodput_points,
        dashed: false,
    }];
    let model: Vec<(f64, f64)> =
        paths.iter().filter_map(|p| Some((shift(p.t), p.model_mbit?))).collect();
    let model_top = model.iter().map(|p| p.1).fold(0.0, f64::max);
    // An estimate far above the goodput (a copy held back by -l or by the ends, whose
    // short bursts the controller measures) would flatten the goodput to the axis: the
    // axis then follows the goodput, the estimate runs off the top, and its legend
    // says how high it went.
    let y_cap = (model_top > 3.0 * goodput_top && goodput_top > 0.0).then_some(1.5 * goodput_top);
    if sender_view && !model.is_empty() {
        let name = match y_cap {
            Some(_) => {
                format!("soku-cc bottleneck estimate (off the scale, up to {model_top:.0} Mbit/s)")
            }
            None => "soku-cc bottleneck estimate".into(),
        };
        lines.push(Line { name, color: ORANGE, points: model, dashed: true });
    }
    s.push_str(
        &Chart {
            title: "Goodput".into(),
            y_label: "Mbit/s".into(),
            x_max,
            lines,
            bands: Vec::new(),
            y_cap: y_cap.filter(|_| sender_view),
        }
        .render(),
    );
    if paths.is_empty() {
        s.push_str(r#"<p class="note">No path samples: they come from QUIC, and this copy ran over another transport.</p>"#);
    } else {
        let rtt = Chart {
            title: "Round-trip time".into(),
            y_label: "RTT (ms)".into(),
            x_max,
            lines: vec![
                Line {
                    name: "smoothed RTT".into(),
                    color: GREEN,
                    points: paths.iter().map(|p| (shift(p.t), p.rtt_ms)).collect(),
                    dashed: false,
                },
                Line {
                    name: "min RTT".into(),
                    color: GREY,
                    points: paths.iter().map(|p| (shift(p.t), p.min_rtt_ms)).collect(),
                    dashed: true,
                },
            ],
            bands: Vec::new(),
            y_cap: None,
        };
        s.push_str(&rtt.render());
        if sender_view {
            let loss = Chart {
                title: "Loss of the data sender's packets".into(),
                y_label: "lost (% of packets sent)".into(),
                x_max,
                lines: vec![Line {
                    name: "per half second".into(),
                    color: ORANGE,
                    points: loss_per_interval(&paths)
                        .into_iter()
                        .map(|(t, v)| (shift(t), v))
                        .collect(),
                    dashed: false,
                }],
                bands: Vec::new(),
                y_cap: None,
            };
            s.push_str(&loss.render());
            let cwnd = Chart {
                title: "Congestion window and soku-cc's phase".into(),
                y_label: "window (MB)".into(),
                x_max,
                lines: vec![Line {
                    name: "congestion window".into(),
                    color: PURPLE,
                    points: paths.iter().map(|p| (shift(p.t), p.cwnd as f64 / 1e6)).collect(),
                    dashed: false,
                }],
                bands: phase_bands(&paths, end)
                    .into_iter()
                    .map(|mut b| {
                        b.from = shift(b.from);
                        b.to = shift(b.to);
                        b
                    })
                    .collect(),
                y_cap: None,
            };
            s.push_str(&cwnd.render());
        } else {
            s.push_str(r#"<p class="note">This side received the data and the server sent no figures of its own (an older soku): loss, window and phase of the data sender are not known.</p>"#);
        }
    }
    s.push_str("</section>");

    // CPU.
    s.push_str("<section><h2>CPU</h2><table><tr><th>side</th><th>role</th><th class=\"num\">CPU time</th><th class=\"num\">wall time</th><th class=\"num\">cores busy</th><th class=\"num\">CPU s per GB</th></tr>");
    let gb = fin.map_or(0.0, |f| f.bytes.saturating_sub(f.resumed) as f64 / 1e9);
    let mut cpu_row = |side: &str, role: &str, cpu: f64, wall: f64| {
        let per_gb = if gb > 0.0 { format!("{:.2}", cpu / gb) } else { "-".into() };
        let _ = write!(
            s,
            r#"<tr><td>{side}</td><td>{role}</td><td class="num">{cpu:.2} s</td><td class="num">{wall:.2} s</td><td class="num">{:.0} %</td><td class="num">{per_gb}</td></tr>"#,
            cpu / wall.max(1e-3) * 100.0
        );
    };
    let (client_role, server_role) =
        if ctx.upload { ("sender", "receiver") } else { ("receiver", "sender") };
    cpu_row(
        "this host (client)",
        client_role,
        ctx.client_cpu.as_secs_f64(),
        ctx.client_wall.as_secs_f64(),
    );
    let server_row =
        ctx.server.as_ref().map(|srv| (srv.cpu_us as f64 / 1e6, srv.wall_us as f64 / 1e6));
    if let Some((cpu, wall)) = server_row {
        cpu_row("remote (soku serve)", server_role, cpu, wall);
    }
    s.push_str("</table>");
    if ctx.server.is_none() {
        s.push_str(r#"<p class="note">The server's CPU is not known: it reports it over QUIC and TCP copies only (the ssh channel carries the data itself), and only since this version.</p>"#);
    }
    s.push_str(r#"<p class="note">Whole processes from start to end, ssh login included; 100 % is one core.</p></section>"#);

    // Files.
    s.push_str("<section><h2>Files</h2><table><tr><th>path</th><th class=\"num\">size</th></tr>");
    for (path, bytes) in &rec.files {
        let _ = write!(
            s,
            r#"<tr><td class="path">{}</td><td class="num">{}</td></tr>"#,
            escape(path),
            human_bytes(*bytes)
        );
    }
    let (more, more_bytes) = rec.more_files;
    if more > 0 {
        let _ = write!(
            s,
            r#"<tr><td colspan="2">and {more} more ({})</td></tr>"#,
            human_bytes(more_bytes)
        );
    }
    if rec.files.is_empty() {
        s.push_str(r#"<tr><td colspan="2">no files</td></tr>"#);
    }
    s.push_str("</table>");
    if !rec.failures.is_empty() {
        s.push_str("<h2 style=\"margin-top:14px\">Failed</h2><table>");
        for (path, why) in &rec.failures {
            let _ = write!(
                s,
                r#"<tr><td class="path">{}</td><td>{}</td></tr>"#,
                escape(path),
                escape(why)
            );
        }
        if rec.more_failures > 0 {
            let _ = write!(s, r#"<tr><td colspan="2">and {} more</td></tr>"#, rec.more_failures);
        }
        s.push_str("</table>");
    }
    if !rec.warnings.is_empty() {
        s.push_str("<h2 style=\"margin-top:14px\">Warnings</h2><ul>");
        for w in &rec.warnings {
            let _ = write!(s, "<li>{}</li>", escape(w));
        }
        s.push_str("</ul>");
    }
    s.push_str("</section>");
    s.push_str(r#"<p class="note">Written by soku --report. Goodput counts bytes the receiver verified (BLAKE3), per interval; path figures are sampled every half second from the data sender's QUIC connection.</p>"#);
    s.push_str("</main></body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::report::collect::Finished;

    fn recording() -> Recording {
        let paths = (1..=30)
            .map(|i| PathSample {
                t: 1.0 + i as f64 * 0.5,
                rtt_ms: 51.0,
                min_rtt_ms: 50.0,
                sent_packets: i * 1000,
                lost_packets: i * 5,
                cwnd: 1_250_000,
                model_mbit: Some(95.0),
                phase: Some(if i < 4 { "startup" } else { "probe_bw" }.into()),
            })
            .collect();
        Recording {
            transport: Some(("QUIC to 10.0.0.2:4000".into(), None)),
            first_connected_at: Some(1.0),
            connected_at: Some(1.0),
            planned_at: Some(1.1),
            planned: Some((2, 175_000_000)),
            verified: (0..=150).map(|i| (1.1 + i as f64 * 0.1, i * 1_160_000)).collect(),
            paths,
            final_path: None,
            files: vec![
                ("<script>alert(1)</script>".into(), 1000),
                ("big \"quoted\" & 'odd'.bin".into(), 174_000_000),
            ],
            more_files: (3, 3000),
            failures: vec![("<b>x</b>".into(), "no <i>room</i>".into())],
            more_failures: 0,
            warnings: vec!["<img src=x onerror=alert(1)>".into()],
            reconnects: 0,
            finished: Some(Finished {
                files: 2,
                bytes: 175_000_000,
                failures: 0,
                resumed: 1_000_000,
                seconds: 15.0,
            }),
        }
    }

    fn context() -> Context {
        Context {
            command: "soku --report r.html '<script>' host:".into(),
            upload: true,
            rate_limit_bps: None,
            client_cpu: Duration::from_millis(1500),
            client_wall: Duration::from_secs(17),
            server: None,
            started_unix: 1_795_512_600,
        }
    }

    /// Catches: a hostile file name (or message, or command line) reaching the page as
    /// markup.
    #[test]
    fn file_names_and_messages_are_escaped() {
        let page = page(&recording(), &context());
        assert!(!page.contains("<script>"), "a raw script tag");
        assert!(!page.contains("<img"), "a raw img tag");
        assert!(!page.contains("<b>x"));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("big &quot;quoted&quot; &amp; &#39;odd&#39;.bin"));
        assert!(page.contains("and 3 more (2.9 KiB)"));
    }

    /// Catches: a chart or section missing, an external resource or script sneaking in.
    #[test]
    fn the_page_is_self_contained_with_every_chart() {
        let page = page(&recording(), &context());
        assert_eq!(page.matches("<svg").count(), 4, "goodput, RTT, loss, window");
        for needle in [
            "Goodput",
            "Round-trip time",
            "Loss of the data sender",
            "phase",
            "Verdict",
            "CPU",
            "Files",
        ] {
            assert!(page.contains(needle), "{needle}");
        }
        for banned in ["<script", "<img", "<link", " href=", "@import", "url("] {
            assert!(!page.contains(banned), "{banned}");
        }
        assert!(page.contains("2026-11-24"), "the date");
        assert!(page.contains("The link was"), "the verdict");
        assert!(page.contains("0.50 % was random"), "the loss note");
    }

    /// Catches: a hostile (or broken) server's summary panicking the page or reaching
    /// it as markup: it is peer input like any other.
    #[test]
    fn a_hostile_server_summary_is_harmless() {
        let point = |at_ms, sent| soku_proto::hello::PathPoint {
            at_ms,
            rtt_us: u64::MAX,
            min_rtt_us: 0,
            sent_packets: sent,
            lost_packets: u64::MAX,
            cwnd: u64::MAX,
            bandwidth_bps: u64::MAX,
            phase: "<script>alert(1)</script>".into(),
        };
        let ctx = Context {
            upload: false,
            server: Some(soku_proto::hello::ServerSummary {
                cpu_us: u64::MAX,
                wall_us: 0,
                sent_data: true,
                samples: vec![point(u64::MAX, 10), point(0, 5), point(500, u64::MAX)],
            }),
            ..context()
        };
        let page = page(&recording(), &ctx);
        assert!(!page.contains("<script"), "markup from the server");
        assert!(page.contains("&lt;script&gt;"), "the phase shown as text");
        for bad in ["NaN", "\"inf", ",inf", ">inf", "-inf"] {
            assert!(!page.contains(bad), "a non-finite figure: {bad}");
        }
    }

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_795_512_600), "2026-11-24 09:30:00 UTC");
    }
}
