//! Writing results: CSV (one row per run), markdown tables, SVG charts, time series.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use crate::cpu::CpuRow;
use crate::matrix::{Row, Samples};
use crate::smallpkt::{Mode, SmallRow, SIZES};
use crate::svg::{Chart, Series};
use crate::tools::Status;
use soku_bench::proc::median;

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `results.csv`: one row per run.
pub fn matrix_csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "date,rate_mbit,rtt_ms,loss_pct,loss_dir,tool,run,cc,bytes,seconds,mbit_s,pct_of_link,\
         client_cpu_s,server_cpu_s,client_peak_rss_mib,server_peak_rss_mib,status,load_start,\
         load_end,netem_pkts_a2b,netem_loss_drops,netem_queue_drops,login_s,\
         pct_of_link_after_login,copy_s,pct_of_link_copy,ceiling_pct,command\n",
    );
    for r in rows {
        let sc = &r.scenario;
        let (p, l, q) = r.netem.unwrap_or((0, 0, 0));
        let copy = r.copy_seconds();
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{:.3},{:.2},{:.1},{:.2},{:.2},{:.1},{:.1},{},{:.2},{:.2},{p},{l},{q},{},{:.1},{},{},{:.1},{}",
            r.date,
            sc.rate_bps / 1_000_000,
            sc.rtt.as_millis(),
            sc.loss_pct(),
            sc.loss_dir.name(),
            r.tool,
            r.run,
            r.m.cc,
            r.m.bytes,
            r.m.seconds,
            r.mbit(),
            r.pct(),
            r.m.client_cpu,
            r.m.server_cpu,
            r.m.peak_rss_mib.0,
            r.m.peak_rss_mib.1,
            csv_field(&r.m.status.to_string()),
            r.load.0,
            r.load.1,
            r.login.map(|l| format!("{:.3}", l.as_secs_f64())).unwrap_or_default(),
            r.pct_after_login(),
            copy.map(|s| format!("{s:.3}")).unwrap_or_default(),
            copy.map(|s| format!("{:.1}", r.pct_over(s))).unwrap_or_default(),
            sc.ceiling_pct(),
            csv_field(&r.command)
        );
    }
    s
}

/// Which time a goodput figure is over.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The whole command ([`Row::pct`]).
    Whole,
    /// The command less the ssh login ([`Row::pct_after_login`]).
    AfterLogin,
    /// The copy alone, for tools that tell it ([`Row::pct_copy`]).
    Copy,
}

impl Basis {
    fn pct(self, r: &Row) -> f64 {
        match self {
            Basis::Whole => r.pct(),
            Basis::AfterLogin => r.pct_after_login(),
            Basis::Copy => r.pct_copy(),
        }
    }
}

/// A cell: percent of link, or `timeout (>X s)` / `FAILED`.
fn cell(r: &Row, basis: Basis) -> String {
    match &r.m.status {
        Status::Ok => num(basis.pct(r), 0),
        Status::Timeout => format!("timeout (>{:.0} s, {:.0} %)", r.m.seconds, r.pct()),
        Status::Failed(_) => "FAILED".into(),
        Status::Skipped(_) => "skipped".into(),
    }
}

/// A cell for all runs of one tool on one path: one run as [`cell`]; several as the
/// median % of link with the range, e.g. `71 (68-74)`, and any run that did not
/// finish named after it; `skipped` when none ran.
fn cell_of(runs: &[&Row], basis: Basis) -> String {
    let ran: Vec<&Row> = runs.iter().copied().filter(|r| !is_skipped(r)).collect();
    match ran.as_slice() {
        [] if !runs.is_empty() => "skipped".into(),
        [] => String::new(),
        [one] => cell(one, basis),
        _ => {
            let runs = &ran;
            let pcts: Vec<f64> =
                runs.iter().map(|r| basis.pct(r)).filter(|x| x.is_finite()).collect();
            if pcts.is_empty() {
                return "-".into();
            }
            let (lo, hi) =
                pcts.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            let mut s = format!("{:.0} ({lo:.0}-{hi:.0})", median(&pcts));
            let failed: Vec<String> = runs
                .iter()
                .filter(|r| r.m.status != Status::Ok)
                .map(|r| format!("run {}: {}", r.run, cell(r, basis)))
                .collect();
            if !failed.is_empty() {
                let _ = write!(s, " [{}]", failed.join("; "));
            }
            s
        }
    }
}

/// Text for a markdown table cell: `|` escaped, one line.
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn is_skipped(r: &Row) -> bool {
    matches!(r.m.status, Status::Skipped(_))
}

/// A number for a table, `-` when there is none (NaN).
fn num(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        format!("{x:.decimals$}")
    } else {
        "-".into()
    }
}

fn uniq<T: Ord + Copy>(it: impl Iterator<Item = T>) -> Vec<T> {
    it.collect::<BTreeSet<_>>().into_iter().collect()
}

fn tools_in(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.contains(&r.tool) {
            out.push(r.tool.clone());
        }
    }
    out
}

/// Markdown: per rate, rows RTT x loss, columns tools, cells % of link rate (with
/// `--repeat`, the median and range of the runs).
pub fn matrix_tables(rows: &[Row], basis: Basis) -> String {
    let mut s = String::new();
    let tools = tools_in(rows);
    for rate in uniq(rows.iter().map(|r| r.scenario.rate_bps)) {
        let rr: Vec<&Row> = rows.iter().filter(|r| r.scenario.rate_bps == rate).collect();
        let dir = rr.first().map(|r| r.scenario.loss_dir.name()).unwrap_or("a>b");
        let _ = writeln!(
            s,
            "\n### {} Mbit/s: goodput as % of link rate (loss on {dir}){}\n",
            rate / 1_000_000,
            match basis {
                Basis::Whole => "",
                Basis::AfterLogin => ", with the ssh login taken out",
                Basis::Copy => ", the copy alone, beside the most the lossy link carries",
            }
        );
        // The ceiling shows where a lossy path's figures stop: lost packets used the
        // link too ([`Scenario::ceiling_pct`]).
        let (ceiling_head, ceiling_rule) =
            if basis == Basis::Copy { (" ceiling |", "---|") } else { ("", "") };
        let _ = writeln!(s, "| RTT | loss |{ceiling_head} {} |", tools.join(" | "));
        let _ = writeln!(s, "|---|---|{ceiling_rule}{}", "---|".repeat(tools.len()));
        for rtt in uniq(rr.iter().map(|r| r.scenario.rtt)) {
            for loss in uniq(
                rr.iter().filter(|r| r.scenario.rtt == rtt).map(|r| (r.scenario.loss * 1e6) as u64),
            ) {
                let cells: Vec<String> = tools
                    .iter()
                    .map(|t| {
                        let runs: Vec<&Row> = rr
                            .iter()
                            .filter(|r| {
                                r.scenario.rtt == rtt
                                    && (r.scenario.loss * 1e6) as u64 == loss
                                    && &r.tool == t
                            })
                            .copied()
                            .collect();
                        cell_of(&runs, basis)
                    })
                    .collect();
                let ceiling = if basis == Basis::Copy {
                    format!(" {:.0} |", 100.0 - loss as f64 / 1e4)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    s,
                    "| {} ms | {} % |{ceiling} {} |",
                    rtt.as_millis(),
                    loss as f64 / 1e4,
                    cells.join(" | ")
                );
            }
        }
    }
    s
}

/// Markdown, Table 3 style: every tool on one path, with CPU and congestion control. CPU
/// is given per GB moved, the figure that compares tools whose rows moved different
/// amounts (iperf3's seconds of data, the floor's whole MiBs).
pub fn one_path_table(rows: &[&Row]) -> String {
    let mut s = String::new();
    let Some(first) = rows.first() else { return s };
    let sc = first.scenario;
    let _ = writeln!(
        s,
        "\n### All tools on one path: {} Mbit/s, RTT {} ms, loss {} % ({})\n",
        sc.rate_bps / 1_000_000,
        sc.rtt.as_millis(),
        sc.loss_pct(),
        sc.loss_dir.name()
    );
    s.push_str(
        "| tool | cc | MB/s | % of link | seconds | client CPU s/GB | server CPU s/GB | client peak RSS MiB | server peak RSS MiB | status |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let ran = !is_skipped(r);
        let gb = r.m.bytes as f64 / 1e9;
        let per_gb = |cpu: f64| if ran && gb > 0.0 { num(cpu / gb, 2) } else { "-".into() };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.tool,
            r.m.cc,
            if ran { num(r.mbit() / 8.0, 1) } else { "-".into() },
            if ran { num(r.pct(), 0) } else { "-".into() },
            if ran { num(r.m.seconds, 1) } else { "-".into() },
            per_gb(r.m.client_cpu),
            per_gb(r.m.server_cpu),
            num(r.m.peak_rss_mib.0, 0),
            num(r.m.peak_rss_mib.1, 0),
            md_cell(&r.m.status.to_string())
        );
    }
    s
}

/// Charts of % of link vs RTT (one per rate and loss) and vs loss (one per rate and
/// RTT), one line per tool (the median of repeated runs); returns (file name, svg).
pub fn matrix_charts(rows: &[Row]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let tools = tools_in(rows);
    for rate in uniq(rows.iter().map(|r| r.scenario.rate_bps)) {
        let sel: Vec<&Row> = rows.iter().filter(|r| r.scenario.rate_bps == rate).collect();
        let rtts = uniq(sel.iter().map(|r| r.scenario.rtt));
        let losses = uniq(sel.iter().map(|r| (r.scenario.loss * 1e6) as u64));
        let mbit = rate / 1_000_000;
        let series_for = |pred: &dyn Fn(&Row, usize) -> bool, n: usize| -> Vec<Series> {
            tools
                .iter()
                .map(|t| Series {
                    name: t.clone(),
                    ys: (0..n)
                        .map(|i| {
                            let pcts: Vec<f64> = sel
                                .iter()
                                .filter(|r| &r.tool == t && !is_skipped(r) && pred(r, i))
                                .map(|r| r.pct())
                                .collect();
                            (!pcts.is_empty()).then(|| median(&pcts))
                        })
                        .collect(),
                })
                .collect()
        };
        if rtts.len() > 1 {
            for &loss in &losses {
                let pred = |r: &Row, i: usize| {
                    r.scenario.rtt == rtts[i] && (r.scenario.loss * 1e6) as u64 == loss
                };
                let lp = loss as f64 / 1e4;
                let title = format!("{mbit} Mbit/s, loss {lp} %: throughput vs RTT");
                let chart = Chart {
                    title: &title,
                    x_label: "RTT (ms)",
                    y_label: "% of link rate",
                    xs: rtts.iter().map(|d| d.as_secs_f64() * 1e3).collect(),
                    x_labels: rtts.iter().map(|d| d.as_millis().to_string()).collect(),
                    linear_x: true,
                    y_max: 100.0,
                    series: series_for(&pred, rtts.len()),
                };
                out.push((format!("vs-rtt-{mbit}mbit-loss{lp}.svg"), chart.render()));
            }
        }
        if losses.len() > 1 {
            let mut panels = Vec::new();
            for &rtt in &rtts {
                let pred = |r: &Row, i: usize| {
                    r.scenario.rtt == rtt && (r.scenario.loss * 1e6) as u64 == losses[i]
                };
                let ms = rtt.as_millis();
                let title = format!("{mbit} Mbit/s, RTT {ms} ms: throughput vs loss");
                let chart = Chart {
                    title: &title,
                    x_label: "random loss on the data direction (%), evenly spaced",
                    y_label: "% of link rate",
                    xs: (0..losses.len()).map(|i| i as f64).collect(),
                    x_labels: losses.iter().map(|&l| format!("{}", l as f64 / 1e4)).collect(),
                    linear_x: false,
                    y_max: 100.0,
                    series: series_for(&pred, losses.len()),
                };
                let svg = chart.render();
                panels.push(svg.clone());
                out.push((format!("vs-loss-{mbit}mbit-rtt{ms}ms.svg"), svg));
            }
            // The seeds' Table 6 as one picture: every RTT's panel side by side.
            if panels.len() > 1 {
                out.push((format!("vs-loss-{mbit}mbit.svg"), crate::svg::side_by_side(&panels)));
            }
        }
    }
    out
}

/// Time series of one soku run: verified goodput (from its JSON events) and the
/// emulator's delivered rate and loss drops A->B, in 500 ms bins. Returns (csv, svg).
pub fn timeseries(row: &Row, samples: &Samples) -> (String, String) {
    let bin = 0.5;
    let mut verified: Vec<(f64, u64)> = Vec::new();
    for (t, line) in &row.m.stderr {
        if line.contains("\"event\":\"verified\"") {
            if let Some(b) = line
                .split("\"bytes\":")
                .nth(1)
                .and_then(|r| r.trim_end_matches('}').trim().parse::<u64>().ok())
            {
                verified.push((t.as_secs_f64(), b));
            }
        }
    }
    let end = row.m.seconds.max(bin);
    let nbins = (end / bin).ceil() as usize;
    let at = |series: &[(f64, u64)], t: f64| -> u64 {
        series.iter().take_while(|(x, _)| *x <= t).last().map(|p| p.1).unwrap_or(0)
    };
    let net: Vec<(f64, u64)> =
        samples.iter().map(|(t, s)| (t.as_secs_f64(), s.a_to_b.bytes)).collect();
    let drops: Vec<(f64, u64)> =
        samples.iter().map(|(t, s)| (t.as_secs_f64(), s.a_to_b.dropped_loss)).collect();
    let pkts: Vec<(f64, u64)> =
        samples.iter().map(|(t, s)| (t.as_secs_f64(), s.a_to_b.packets_in)).collect();
    let mut csv =
        String::from("t_s,soku_verified_mbit_s,link_delivered_mbit_s,loss_drops,packets_in\n");
    let (mut g, mut l) = (Vec::new(), Vec::new());
    let base_net = net.first().map(|p| p.1).unwrap_or(0);
    let base_drop = drops.first().map(|p| p.1).unwrap_or(0);
    let base_pkts = pkts.first().map(|p| p.1).unwrap_or(0);
    for i in 0..nbins {
        let (t0, t1) = (i as f64 * bin, (i + 1) as f64 * bin);
        let v = (at(&verified, t1) - at(&verified, t0)) as f64 * 8.0 / bin / 1e6;
        let n = (at(&net, t1).max(base_net) - at(&net, t0).max(base_net)) as f64 * 8.0 / bin / 1e6;
        let d = at(&drops, t1).max(base_drop) - at(&drops, t0).max(base_drop);
        let p = at(&pkts, t1).max(base_pkts) - at(&pkts, t0).max(base_pkts);
        let _ = writeln!(csv, "{t1:.1},{v:.2},{n:.2},{d},{p}");
        g.push(Some(v));
        l.push(Some(n));
    }
    let sc = row.scenario;
    let title = format!(
        "soku over time: {} Mbit/s, RTT {} ms, loss {} % ({})",
        sc.rate_bps / 1_000_000,
        sc.rtt.as_millis(),
        sc.loss_pct(),
        sc.loss_dir.name()
    );
    let xs: Vec<f64> = (1..=nbins).map(|i| i as f64 * bin).collect();
    let chart = Chart {
        title: &title,
        x_label: "seconds since the command started (login included)",
        y_label: "Mbit/s per 500 ms",
        x_labels: xs.iter().map(|x| format!("{x:.0}")).collect(),
        xs,
        linear_x: true,
        y_max: sc.rate_bps as f64 / 1e6 * 1.1,
        series: vec![
            Series { name: "soku verified".into(), ys: g },
            Series { name: "link a>b (IP bytes)".into(), ys: l },
        ],
    };
    (csv, chart.render())
}

/// `cpu.csv` (every run) and a markdown table of the loopback rows: one line per tool,
/// options and data, in first-run order, with the median of the rounds (MB/s and CPU
/// per GB each taken separately) and every round's MB/s.
pub fn cpu_outputs(rows: &[CpuRow]) -> (String, String) {
    let mut csv = String::from(
        "round,tool,data,bytes,seconds,mb_s,client_cpu_s,server_cpu_s,client_cpu_s_per_gb,server_cpu_s_per_gb,status,command\n",
    );
    for r in rows {
        let (c, s) = r.cpu_per_gb();
        let _ = writeln!(
            csv,
            "{},{},{},{},{:.3},{:.1},{:.2},{:.2},{c:.2},{s:.2},{},{}",
            r.round,
            csv_field(&r.label),
            r.data,
            r.m.bytes,
            r.m.seconds,
            r.mbs(),
            r.m.client_cpu,
            r.m.server_cpu,
            csv_field(&r.m.status.to_string()),
            csv_field(&r.command)
        );
    }
    let mut md = String::from(
        "| tool and options | data | MB/s (median) | MB/s of each round | client CPU s/GB | server CPU s/GB | status |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if !keys.contains(&(r.label.as_str(), r.data.as_str())) {
            keys.push((&r.label, &r.data));
        }
    }
    for (label, data) in keys {
        let runs: Vec<&CpuRow> =
            rows.iter().filter(|r| r.label == label && r.data == data).collect();
        let ok: Vec<&CpuRow> = runs.iter().copied().filter(|r| r.m.status == Status::Ok).collect();
        let pick =
            |f: &dyn Fn(&CpuRow) -> f64| median(&ok.iter().map(|r| f(r)).collect::<Vec<_>>());
        let each: Vec<String> = runs.iter().map(|r| num(r.mbs(), 0)).collect();
        let status: Vec<String> = runs
            .iter()
            .filter(|r| r.m.status != Status::Ok)
            .map(|r| format!("round {}: {}", r.round, r.m.status))
            .collect();
        let status = if status.is_empty() { "ok".to_string() } else { md_cell(&status.join("; ")) };
        let _ = writeln!(
            md,
            "| {label} | {data} | {} | {} | {} | {} | {status} |",
            num(pick(&|r| r.mbs()), 0),
            each.join(", "),
            num(pick(&|r| r.cpu_per_gb().0), 2),
            num(pick(&|r| r.cpu_per_gb().1), 2),
        );
    }
    (csv, md)
}

/// `smallpkt.csv` and a markdown table (rows sizes, columns modes, median/p90 ms).
pub fn small_outputs(rows: &[SmallRow]) -> (String, String) {
    let mut csv = String::from("mode,payload_bytes,median_ms,p90_ms,exchanges\n");
    for r in rows {
        let _ = writeln!(
            csv,
            "{},{},{:.2},{:.2},{}",
            r.mode.name(),
            r.size,
            r.median_ms,
            r.p90_ms,
            r.n
        );
    }
    let mut md = String::from("| payload bytes |");
    for m in Mode::ALL {
        let _ = write!(md, " {} median / p90 ms |", m.name());
    }
    md.push_str("\n|---|");
    md.push_str(&"---|".repeat(Mode::ALL.len()));
    md.push('\n');
    for size in SIZES {
        let _ = write!(md, "| {size} |");
        for m in Mode::ALL {
            match rows.iter().find(|r| r.mode == m && r.size == size) {
                Some(r) => {
                    let _ = write!(md, " {:.1} / {:.1} |", r.median_ms, r.p90_ms);
                }
                None => md.push_str(" |"),
            }
        }
        md.push('\n');
    }
    (csv, md)
}

/// Writes `name` under `dir`.
pub fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    std::fs::write(dir.join(name), text)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::{LossDir, Scenario};
    use crate::tools::Measured;
    use std::time::Duration;

    /// A 100 Mbit/s row of `tool`'s run `run` that moved 100 MB in `seconds`.
    fn row(tool: &str, run: u32, seconds: f64, status: Status) -> Row {
        Row {
            date: String::new(),
            scenario: Scenario {
                rate_bps: 100_000_000,
                rtt: Duration::from_millis(50),
                loss: 0.01,
                loss_dir: LossDir::Data,
            },
            tool: tool.into(),
            run,
            m: Measured {
                cc: "bbr".into(),
                bytes: 100_000_000,
                seconds,
                status,
                client_cpu: 0.0,
                server_cpu: f64::NAN,
                peak_rss_mib: (f64::NAN, f64::NAN),
                stderr: Vec::new(),
                started: None,
            },
            load: (0.0, 0.0),
            netem: None,
            login: None,
            command: String::new(),
        }
    }

    fn cpu_row(round: u32, label: &str, seconds: f64, client_cpu: f64, status: Status) -> CpuRow {
        CpuRow {
            round,
            label: label.into(),
            data: "random 1000 MiB".into(),
            m: Measured {
                cc: String::new(),
                bytes: 1_000_000_000,
                seconds,
                status,
                client_cpu,
                server_cpu: 2.0,
                peak_rss_mib: (f64::NAN, f64::NAN),
                stderr: Vec::new(),
                started: None,
            },
            command: String::new(),
        }
    }

    #[test]
    fn loopback_rounds_show_the_median_of_the_good_runs_and_every_round() {
        let rows = [
            cpu_row(1, "soku (default)", 2.0, 1.0, Status::Ok),
            cpu_row(1, "scp (default)", 4.0, 3.0, Status::Ok),
            cpu_row(2, "soku (default)", 1.0, 1.2, Status::Ok),
            cpu_row(2, "scp (default)", 5.0, 2.0, Status::Timeout),
            cpu_row(3, "soku (default)", 4.0, 0.8, Status::Ok),
            cpu_row(3, "scp (default)", 2.0, 4.0, Status::Ok),
        ];
        let (csv, table) = cpu_outputs(&rows);
        assert_eq!(csv.lines().count(), 7, "{csv}");
        assert!(csv.lines().nth(4).is_some_and(|l| l.starts_with("2,scp (default),")), "{csv}");
        let lines: Vec<&str> = table.lines().skip(2).collect();
        assert_eq!(
            lines,
            [
                "| soku (default) | random 1000 MiB | 500 | 500, 1000, 250 | 1.00 | 2.00 | ok |",
                "| scp (default) | random 1000 MiB | 375 | 250, 200, 500 | 3.50 | 2.00 | round 2: timeout |",
            ],
            "{table}"
        );
    }

    #[test]
    fn repeated_runs_show_median_and_range() {
        // 100 MB in 10 s = 80 % of 100 Mbit/s; 16 s = 50 %; 20 s = 40 %.
        let rows = [
            row("soku", 1, 10.0, Status::Ok),
            row("scp", 1, 20.0, Status::Ok),
            row("soku", 2, 16.0, Status::Ok),
            row("scp", 2, 20.0, Status::Timeout),
            row("soku", 3, 20.0, Status::Ok),
        ];
        let table = matrix_tables(&rows, Basis::Whole);
        let line = table.lines().find(|l| l.starts_with("| 50 ms")).expect("a row for 50 ms");
        assert_eq!(
            line, "| 50 ms | 1 % | 50 (40-80) | 40 (40-40) [run 2: timeout (>20 s, 40 %)] |",
            "{table}"
        );
        assert_eq!(cell_of(&[&rows[0]], Basis::Whole), "80");
        let skipped = row("qcp", 1, 0.0, Status::Skipped("no network | offline".into()));
        assert_eq!(cell_of(&[&skipped], Basis::Whole), "skipped");
        assert_eq!(cell_of(&[&skipped, &rows[0]], Basis::Whole), "80");
        let one = one_path_table(&[&skipped]);
        assert!(one.contains("| qcp | bbr | - | - | - | - | - |"), "{one}");
        assert!(one.contains("skipped: no network \\| offline |"), "{one}");
        // 0.9 CPU-s over 100 MB is 9 per GB; an unknown side stays unknown.
        let mut ran = row("quinn-floor", 1, 10.0, Status::Ok);
        ran.m.client_cpu = 0.9;
        let one = one_path_table(&[&ran]);
        assert!(one.contains("| quinn-floor | bbr | 10.0 | 80 | 10.0 | 9.00 | - |"), "{one}");
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), 2.5);
    }

    #[test]
    fn the_login_comes_off_copies_only() {
        // 100 MB in 12.5 s = 64 % of 100 Mbit/s; less a 2.5 s login, 10 s = 80 %.
        let mut copy = row("scp", 1, 12.5, Status::Ok);
        copy.login = Some(Duration::from_millis(2500));
        assert_eq!(cell_of(&[&copy], Basis::Whole), "64");
        assert_eq!(cell_of(&[&copy], Basis::AfterLogin), "80");
        // iperf3 has no login: the same figure either way.
        let iperf = row("iperf3-bbr", 1, 10.0, Status::Ok);
        assert_eq!(cell_of(&[&iperf], Basis::AfterLogin), "80");
        let table = matrix_tables(&[copy, iperf], Basis::AfterLogin);
        assert!(table.contains("with the ssh login taken out"), "{table}");
        assert!(table.contains("| 50 ms | 1 % | 80 | 80 |"), "{table}");
        let csv = matrix_csv(&[row("soku", 1, 10.0, Status::Ok)]);
        assert!(csv.lines().nth(1).is_some_and(|l| l.ends_with(",,80.0,,,99.0,")), "{csv}");
    }

    #[test]
    fn the_copy_alone_runs_from_the_first_connection_to_the_end() {
        // 100 MB: 12.5 s in all, connected at 2.5 s and again (a move to TCP) at 4 s,
        // finished at 12.5 s: 10 s of copy, 80 % of 100 Mbit/s.
        let soku = |finished: bool| {
            let mut r = row("soku", 1, 12.5, Status::Ok);
            let at = |ms, line: &str| (Duration::from_millis(ms), line.to_string());
            r.m.stderr = vec![
                at(2500, r#"{"event":"connected","transport":"QUIC to 10.77.0.2:1"}"#),
                at(3000, "not JSON: a line of ssh's"),
                at(4000, r#"{"event":"connected","transport":"TLS/TCP to 10.77.0.2:2"}"#),
            ];
            if finished {
                r.m.stderr.push(at(
                    12500,
                    r#"{"event":"finished","files":1,"bytes":100000000,"seconds":8.5}"#,
                ));
            }
            r
        };
        assert_eq!(soku(true).copy_seconds(), Some(10.0));
        assert_eq!(cell_of(&[&soku(true)], Basis::Copy), "80");
        // A tool with no such events has no copy figure, nor has a run cut short.
        let scp = row("scp", 1, 12.5, Status::Ok);
        assert_eq!(scp.copy_seconds(), None);
        assert_eq!(cell_of(&[&scp], Basis::Copy), "-");
        assert_eq!(soku(false).copy_seconds(), None);
        let table = matrix_tables(&[soku(true), scp], Basis::Copy);
        assert!(table.contains("| RTT | loss | ceiling | soku | scp |"), "{table}");
        assert!(table.contains("| 50 ms | 1 % | 99 | 80 | - |"), "{table}");
        let csv = matrix_csv(&[soku(true)]);
        assert!(csv.lines().nth(1).is_some_and(|l| l.ends_with(",10.000,80.0,99.0,")), "{csv}");
    }
}
