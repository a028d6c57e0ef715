//! Sharing one bottleneck: soku beside a CUBIC TCP flow and beside another soku, and
//! what `--background` yields. Each case starts each flow two seconds after the one
//! before began to move data, on one emulated path (drop-tail queue of one BDP, no
//! loss), and measures every flow's goodput over the same window, once all are past
//! their start: soku's from its `--json` `verified` events (bytes its receiver proved),
//! iperf3's from its per-second intervals. Flows that outlast the window are stopped at
//! its end.

use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::matrix::{self, IperfServer};
use crate::proc::{self, Outcome};
use crate::sshd;
use crate::tools::{self, SourceFile};
use soku_bench::proc::show;

/// Where and how long to measure.
pub struct SharingOpts<'a> {
    /// Namespace prefix.
    pub name: &'a str,
    /// The soku binary (both sides).
    pub soku: &'a Path,
    /// Scratch directory for the source file and the targets.
    pub work: &'a Path,
    /// The bench's output directory: each flow's own report goes to `sharing/` in it.
    pub out: &'a Path,
    pub rate_bps: u64,
    pub rtt: Duration,
    /// Random loss on the data direction (A to B, where the uploads go), 0..1.
    pub loss: f64,
    /// The data direction's drop-tail queue, in bandwidth-delay products.
    pub queue_bdp: f64,
    /// When the window opens, after the first flow started (login and startup behind).
    pub warm: Duration,
    /// How long the window lasts.
    pub window: Duration,
    /// Only the cases with these keys (see [`CASES`]); all of them when empty.
    pub only: &'a [String],
}

/// One flow of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Soku,
    SokuBackground,
    Cubic,
    /// CUBIC that leaves as the window opens: what a background flow does once the
    /// link is free again.
    CubicLeaving,
}

impl Flow {
    fn label(self) -> &'static str {
        match self {
            Flow::Soku => "soku",
            Flow::SokuBackground => "soku --background",
            Flow::Cubic => "iperf3 -C cubic",
            Flow::CubicLeaving => "iperf3 -C cubic (leaves)",
        }
    }
}

/// One case: flows that start on the path one after the other, `STAGGER` apart.
pub struct Case {
    /// Its key for `--sharing-cases`.
    pub key: &'static str,
    /// Its name in the tables.
    pub name: &'static str,
    pub flows: &'static [Flow],
    /// What soku's flows start with remembered of the path.
    pub remembered: Remembered,
}

/// What soku's flows of a case start with in their path memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remembered {
    /// Nothing: every soku flow is a first copy.
    Nothing,
    /// What a normal copy on the idle path just before the case learned, as an earlier
    /// copy to the same host does for a scheduled backup.
    ThePath,
    /// That, with a min RTT of two fifths of the path's: a laptop that moved to a slower
    /// network. A background flow must not take the difference for a standing queue.
    ALowerMinRtt,
}

/// The cases, in order.
pub const CASES: [Case; 9] = [
    Case {
        key: "alone",
        name: "soku alone",
        flows: &[Flow::Soku],
        remembered: Remembered::Nothing,
    },
    Case {
        key: "background",
        name: "soku --background alone",
        flows: &[Flow::SokuBackground],
        remembered: Remembered::Nothing,
    },
    Case {
        key: "cubic",
        name: "CUBIC, then soku",
        flows: &[Flow::Cubic, Flow::Soku],
        remembered: Remembered::Nothing,
    },
    Case {
        key: "soku-cubic",
        name: "soku, then CUBIC",
        flows: &[Flow::Soku, Flow::Cubic],
        remembered: Remembered::Nothing,
    },
    Case {
        key: "cubic-background",
        name: "CUBIC, then soku --background",
        flows: &[Flow::Cubic, Flow::SokuBackground],
        remembered: Remembered::Nothing,
    },
    Case {
        key: "cubic-background-again",
        name: "CUBIC, then soku --background, path remembered",
        flows: &[Flow::Cubic, Flow::SokuBackground],
        remembered: Remembered::ThePath,
    },
    Case {
        key: "soku-soku",
        name: "soku, then soku",
        flows: &[Flow::Soku, Flow::Soku],
        remembered: Remembered::Nothing,
    },
    Case {
        key: "cubic-leaves-background",
        name: "CUBIC, then soku --background, CUBIC leaves as the window opens",
        flows: &[Flow::CubicLeaving, Flow::SokuBackground],
        remembered: Remembered::Nothing,
    },
    Case {
        key: "background-lower-min-rtt",
        name: "soku --background alone, a min RTT below the path's remembered",
        flows: &[Flow::SokuBackground],
        remembered: Remembered::ALowerMinRtt,
    },
];
/// How long the copy that primes a remembered case's path memory runs on the idle
/// path: long enough for the memory's rate window (`crates/soku/src/client/path_memory.rs`:
/// two seconds and more after startup).
const PRIMING: Duration = Duration::from_secs(6);
/// The span over which a background flow counts as back at the link's rate.
const BACK_SPAN: Duration = Duration::from_secs(2);
/// From when a case's flow began to move data to the start of the next: soku's
/// `connected` event (its login and QUIC handshake behind it), iperf3's start (its
/// control connection takes a few round trips). Counted from the commands' starts, a
/// soku flow's login (1.5-1.7 s at 100 ms) took most of the lead, and the CUBIC flow
/// meant to arrive while soku copies arrived inside soku's startup instead
/// (`lab/2026-11-30-cubic-joins-soku`).
const STAGGER: Duration = Duration::from_secs(2);
/// How long the next flow waits at most for the one before to begin.
const BEGIN_LIMIT: Duration = Duration::from_secs(30);

/// What one case measured.
#[derive(Debug, Clone)]
pub struct SharingRow {
    pub case: String,
    /// Per flow: label, goodput in the window (Mbit/s), or why there is none.
    pub flows: Vec<(String, Result<f64, String>)>,
    /// For a case whose CUBIC flow leaves: how long after it left soku first carried
    /// 90 % of the link over two seconds, or why it did not.
    pub back: Option<Result<Duration, String>>,
}

impl SharingRow {
    /// Jain's fairness index of the flows' goodputs, if every flow has one.
    pub fn jain(&self) -> Option<f64> {
        let rates: Vec<f64> =
            self.flows.iter().map(|(_, r)| r.clone().ok()).collect::<Option<_>>()?;
        let sum: f64 = rates.iter().sum();
        let squares: f64 = rates.iter().map(|r| r * r).sum();
        (squares > 0.0).then(|| sum * sum / (rates.len() as f64 * squares))
    }
}

/// Runs every case on a fresh path; rows and sanity problems.
pub fn run(
    o: &SharingOpts<'_>,
    log: &dyn Fn(&str),
) -> anyhow::Result<(Vec<SharingRow>, Vec<String>)> {
    let mut spec = soku_netem::PathSpec::symmetric(o.rtt, 0.0, Some(o.rate_bps));
    spec.a_to_b.loss = o.loss;
    let bdp = o.rate_bps as f64 / 8.0 * o.rtt.as_secs_f64();
    spec.a_to_b.queue_bytes = Some((bdp * o.queue_bdp) as usize);
    let _ = soku_netem::Path::cleanup(o.name);
    let path = soku_netem::Path::up(o.name, spec).context("bringing the path up")?;
    matrix::tune_tcp_buffers(&path)?;
    let sshd = sshd::start(path.command_b("/usr/sbin/sshd"), path.addr_b(), 22)?;
    let _iperf = IperfServer::start(&path)?;
    // Enough data for any flow to outlast the window even alone on the link.
    let total = o.warm + o.window + STAGGER * 2;
    let size = (o.rate_bps as f64 / 8.0 * total.as_secs_f64()) as u64;
    let src = SourceFile::create(&o.work.join("sharing-src"), size, false)?;
    let memory = tempfile::Builder::new().prefix("soku-bench-memory-").tempdir()?;
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for Case { key, name: case, flows, remembered } in CASES {
        if !o.only.is_empty() && !o.only.iter().any(|k| k == key) {
            continue;
        }
        log(&format!("sharing: {case}"));
        let _ = std::fs::remove_dir_all(memory.path());
        if remembered != Remembered::Nothing {
            if let Err(e) = prime_memory(o, &path, &sshd, memory.path(), remembered) {
                problems.push(format!("sharing, {case}: {e:#}"));
                continue;
            }
        }
        // Each flow's time counts from its own start: iperf3 runs `total` seconds,
        // and a flow that started late must not be cut off before it has.
        let until = total + Duration::from_secs(5);
        let case_start = Instant::now();
        let outcomes = std::thread::scope(|s| {
            let mut before: Option<mpsc::Receiver<()>> = None;
            let handles: Vec<_> = flows
                .iter()
                .enumerate()
                .map(|(i, &flow)| {
                    let (began, began_rx) = mpsc::channel();
                    let after = before.replace(began_rx);
                    let cmd =
                        flow_command(flow, o, total, &path, &sshd, &src.path, i, memory.path());
                    s.spawn(move || {
                        if let Some(before) = after {
                            // A flow that failed before it began closes its channel:
                            // the next one starts then.
                            let _ = before.recv_timeout(BEGIN_LIMIT);
                            std::thread::sleep(STAGGER);
                        }
                        let delay = case_start.elapsed();
                        let shown = show(&cmd);
                        let out = match flow {
                            Flow::Soku | Flow::SokuBackground => {
                                proc::run_noting(cmd, until, move |line| {
                                    if is_event(line, "connected") {
                                        let _ = began.send(());
                                    }
                                })
                            }
                            Flow::Cubic | Flow::CubicLeaving => {
                                let _ = began.send(());
                                proc::run(cmd, until)
                            }
                        };
                        (delay, out, shown)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
        });
        crate::proc::end_kept_servers(sshd.pid());
        crate::tools::end_shared_logins(memory.path());
        let mut row = SharingRow { case: case.to_string(), flows: Vec::new(), back: None };
        for (i, (&flow, outcome)) in flows.iter().zip(outcomes).enumerate() {
            if flow == Flow::CubicLeaving {
                if let Ok((_, Ok(out), _)) = &outcome {
                    if let Err(e) = keep_report(o.out, key, i, flow, out) {
                        problems.push(format!("sharing, {case}: keeping its reports: {e}"));
                    }
                }
                continue;
            }
            if flows.contains(&Flow::CubicLeaving) {
                if let Ok((delay, Ok(out), _)) = &outcome {
                    let back = back_at(out, o.warm.saturating_sub(*delay), o.rate_bps);
                    log(&format!(
                        "  back at 90 % of the link: {}",
                        back.as_ref().map_or_else(|e| e.clone(), |d| format!("{d:.1?} after"))
                    ));
                    row.back = Some(back);
                }
            }
            let rate = match outcome {
                Ok((delay, Ok(out), shown)) => {
                    if let Err(e) = keep_report(o.out, key, i, flow, &out) {
                        problems.push(format!("sharing, {case}: keeping its reports: {e}"));
                    }
                    let rate = goodput(flow, &out, delay, o.warm, o.window);
                    if let Err(why) = &rate {
                        problems
                            .push(format!("sharing, {case}, {}: {why} ({shown})", flow.label()));
                    }
                    rate
                }
                Ok((_, Err(e), _)) => Err(format!("{e:#}")),
                Err(_) => Err("the flow's thread panicked".into()),
            };
            log(&format!(
                "  {:<20} {}",
                flow.label(),
                rate.as_ref().map_or_else(|e| e.clone(), |r| format!("{r:.1} Mbit/s"))
            ));
            row.flows.push((flow.label().to_string(), rate));
        }
        if let (2.., Some(j)) = (row.flows.len(), row.jain()) {
            log(&format!("  Jain's index {j:.3}"));
        }
        rows.push(row);
        let _ = std::fs::remove_dir_all(o.work.join("sharing-dst"));
    }
    let _ = std::fs::remove_file(&src.path);
    drop(sshd);
    if let Err(e) = path.down() {
        problems.push(format!("sharing: path teardown: {e}"));
    }
    Ok((rows, problems))
}

/// Runs a normal soku copy of [`PRIMING`]'s worth of data on the idle path with
/// `memory` as its cache, and checks that it left a path memory.
fn prime_memory(
    o: &SharingOpts<'_>,
    path: &soku_netem::Path,
    sshd: &sshd::Sshd,
    memory: &Path,
    remembered: Remembered,
) -> anyhow::Result<()> {
    let size = (o.rate_bps as f64 / 8.0 * PRIMING.as_secs_f64()) as u64;
    let src = SourceFile::create(&o.work.join("sharing-priming"), size, false)?;
    let dst = o.work.join("sharing-dst").join("priming");
    std::fs::create_dir_all(&dst)?;
    let c = soku_upload(o, path, sshd, memory, &[], &src.path, &dst);
    let shown = show(&c);
    let out = proc::run(c, PRIMING * 10 + Duration::from_secs(30))?;
    crate::proc::end_kept_servers(sshd.pid());
    crate::tools::end_shared_logins(memory);
    let _ = std::fs::remove_file(&src.path);
    anyhow::ensure!(out.ok(), "the priming copy failed ({shown})");
    let file = crate::tools::memory_file(memory);
    anyhow::ensure!(file.exists(), "the priming copy left no path memory ({shown})");
    if remembered == Remembered::ALowerMinRtt {
        let lower = o.rtt.as_micros() as u64 * 2 / 5;
        let text = std::fs::read_to_string(&file)?;
        std::fs::write(&file, with_min_rtt(&text, lower))?;
    }
    Ok(())
}

/// A path memory's lines (`host flow bandwidth_bps min_rtt_us saved`,
/// `crates/soku/src/client/path_memory.rs`) with every min RTT set to `min_rtt_us`.
fn with_min_rtt(text: &str, min_rtt_us: u64) -> String {
    text.lines()
        .map(|line| {
            let mut words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
            if words.len() == 5 {
                words[3] = min_rtt_us.to_string();
            }
            words.join(" ") + "\n"
        })
        .collect()
}

/// When, after `left` into a soku flow's run, it first verified 90 % of `rate_bps`'s
/// bytes within [`BACK_SPAN`]: how long after `left` that span began. (Verified bytes
/// come a chunk, 1 MiB, at a time: over one second at 100 Mbit/s that is a twelfth,
/// more than the margin to tell 90 % by.)
fn back_at(out: &Outcome, left: Duration, rate_bps: u64) -> Result<Duration, String> {
    let series = soku_series(out);
    let wanted = 0.9 * rate_bps as f64 / 8.0 * BACK_SPAN.as_secs_f64();
    let at = |t: Duration| bytes_by(&series, t);
    series
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| *t >= left)
        .find(|t| at(*t + BACK_SPAN) - at(*t) >= wanted)
        .map(|t| t - left)
        .ok_or_else(|| "never within the run".to_string())
}

#[allow(clippy::too_many_arguments)]
fn flow_command(
    flow: Flow,
    o: &SharingOpts<'_>,
    total: Duration,
    path: &soku_netem::Path,
    sshd: &sshd::Sshd,
    src: &Path,
    index: usize,
    memory: &Path,
) -> Command {
    let secs = total.as_secs().to_string();
    match flow {
        Flow::Cubic | Flow::CubicLeaving => {
            let secs = match flow {
                Flow::CubicLeaving => o.warm.as_secs().to_string(),
                _ => secs,
            };
            let mut c = path.command_a("iperf3");
            c.args(["-c", &path.addr_b().to_string(), "-t", &secs, "-C", "cubic", "-i", "1", "-J"]);
            c
        }
        Flow::Soku | Flow::SokuBackground => {
            let dst = o.work.join("sharing-dst").join(index.to_string());
            let _ = std::fs::create_dir_all(&dst);
            let flags: &[&str] = if flow == Flow::SokuBackground {
                &["--json", "--background"]
            } else {
                &["--json"]
            };
            soku_upload(o, path, sshd, memory, flags, src, &dst)
        }
    }
}

/// A soku upload of `src` into `dst` on the server, with `flags`, and `memory` as its
/// homes: no path memory from the case before, so a first copy, or what the case's
/// priming copy left (`Case::remembered`).
fn soku_upload(
    o: &SharingOpts<'_>,
    path: &soku_netem::Path,
    sshd: &sshd::Sshd,
    memory: &Path,
    flags: &[&str],
    src: &Path,
    dst: &Path,
) -> Command {
    let mut c = path.command_a(&o.soku.display().to_string());
    crate::tools::soku_homes(&mut c, memory);
    c.args(flags).args(["-P", &sshd.port().to_string()]).args(sshd.ssh_args());
    c.arg("--remote-soku").arg(o.soku).arg(src);
    c.arg(format!("{}:{}", sshd.destination(), dst.display()));
    c
}

/// Writes what flow `index` of case `key` reported to `sharing/` in `out`: iperf3's
/// JSON (per second: bytes, congestion window, RTT) or soku's `--json` events, each
/// line after the seconds since the flow started (its path samples: RTT, min RTT,
/// bandwidth estimate, window, phase).
fn keep_report(
    out: &Path,
    key: &str,
    index: usize,
    flow: Flow,
    ran: &Outcome,
) -> std::io::Result<()> {
    let dir = out.join("sharing");
    std::fs::create_dir_all(&dir)?;
    let (name, text) = match flow {
        Flow::Cubic | Flow::CubicLeaving => {
            (format!("{key}-{index}-iperf3.json"), ran.stdout.clone())
        }
        Flow::Soku | Flow::SokuBackground => {
            (format!("{key}-{index}-soku.txt"), ran.timed_stderr())
        }
    };
    std::fs::write(dir.join(name), text)
}

/// A flow's goodput in Mbit/s over `[warm, warm + window]` of the case, the flow having
/// started `delay` into it.
fn goodput(
    flow: Flow,
    out: &Outcome,
    delay: Duration,
    warm: Duration,
    window: Duration,
) -> Result<f64, String> {
    let from = warm.checked_sub(delay).ok_or("started after the window opened")?;
    let to = from + window;
    // (time since the flow started, bytes so far)
    let series: Vec<(Duration, f64)> = match flow {
        Flow::Cubic | Flow::CubicLeaving => iperf_series(&out.stdout)?,
        Flow::Soku | Flow::SokuBackground => soku_series(out),
    };
    let at = |t: Duration| bytes_by(&series, t);
    // A flow still running when the window closed (stopped at the case's end) counts
    // even if its last report came before: a background flow that yielded may verify
    // no 1 MiB chunk for seconds, and its goodput is then what it had verified by
    // then (exact to a chunk). A flow that ended by itself before it does not.
    let ran_through = out.timed_out() && out.wall >= to;
    if !ran_through && series.last().is_none_or(|(t, _)| *t < to) {
        return Err(format!(
            "ended before the window closed ({})",
            if out.ok() { "it finished" } else { "it failed" }
        ));
    }
    Ok((at(to) - at(from)) * 8.0 / window.as_secs_f64() / 1e6)
}

/// The bytes a flow's series (time since the flow started, bytes so far) counts by `t`.
fn bytes_by(series: &[(Duration, f64)], t: Duration) -> f64 {
    series.iter().filter(|(s, _)| *s <= t).map(|(_, b)| *b).fold(0.0, f64::max)
}

/// Whether a line of soku's `--json` output is an event of kind `kind`.
fn is_event(line: &str, kind: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| v["event"] == kind)
}

/// soku's `verified` events: (time read, cumulative bytes).
fn soku_series(out: &Outcome) -> Vec<(Duration, f64)> {
    tools::json_events(&out.stderr)
        .filter_map(|(t, v)| (v["event"] == "verified").then(|| Some((t, v["bytes"].as_f64()?)))?)
        .collect()
}

/// iperf3's per-second intervals from its JSON: (interval end, cumulative bytes).
fn iperf_series(stdout: &str) -> Result<Vec<(Duration, f64)>, String> {
    let v: serde_json::Value =
        serde_json::from_str(stdout).map_err(|e| format!("iperf3 JSON: {e}"))?;
    let intervals = v["intervals"].as_array().ok_or("iperf3 JSON without intervals")?;
    let mut total = 0.0;
    let mut series = Vec::new();
    for i in intervals {
        let end = i["sum"]["end"].as_f64().ok_or("interval without an end")?;
        total += i["sum"]["bytes"].as_f64().ok_or("interval without bytes")?;
        series.push((Duration::from_secs_f64(end), total));
    }
    Ok(series)
}

/// The markdown section.
pub fn table(rows: &[SharingRow]) -> String {
    let mut s = String::from(
        "| case | flows: goodput in the window (Mbit/s) | Jain's index |\n|---|---|---|\n",
    );
    for r in rows {
        let flows: Vec<String> = r
            .flows
            .iter()
            .map(|(l, rate)| match rate {
                Ok(m) => format!("{l} {m:.1}"),
                Err(e) => format!("{l}: {e}"),
            })
            .collect();
        let jain = match (r.flows.len(), r.jain()) {
            (1, _) | (_, None) => "-".to_string(),
            (_, Some(j)) => format!("{j:.3}"),
        };
        let back = match &r.back {
            Some(Ok(after)) => {
                format!("; 90 % of the link {:.1} s after CUBIC left", after.as_secs_f64())
            }
            Some(Err(why)) => format!("; 90 % of the link: {why}"),
            None => String::new(),
        };
        s.push_str(&format!("| {} | {}{back} | {jain} |\n", r.case, flows.join("; ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_for_equal_shares_and_half_for_one_of_two() {
        let row = |a: f64, b: f64| SharingRow {
            case: String::new(),
            flows: vec![("a".into(), Ok(a)), ("b".into(), Ok(b))],
            back: None,
        };
        assert!((row(45.0, 45.0).jain().unwrap() - 1.0).abs() < 1e-9);
        assert!((row(90.0, 0.0).jain().unwrap() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_lower_min_rtt_replaces_each_remembered_one_and_nothing_else() {
        let text = "10.0.0.2 up 95000000 50210 1764400000\n10.0.0.2 down 90000000 50400 17\n";
        assert_eq!(
            with_min_rtt(text, 20000),
            "10.0.0.2 up 95000000 20000 1764400000\n10.0.0.2 down 90000000 20000 17\n"
        );
    }

    #[test]
    fn iperf_intervals_accumulate() {
        let json = r#"{"intervals":[{"sum":{"start":0,"end":1.0,"bytes":1000}},{"sum":{"start":1.0,"end":2.0,"bytes":3000}}]}"#;
        let s = iperf_series(json).expect("parses");
        assert_eq!(s, vec![(Duration::from_secs(1), 1000.0), (Duration::from_secs(2), 4000.0)]);
    }

    /// A soku flow's outcome: a `verified` event of 1 MiB each second for `reports`
    /// seconds, the process stopped (`status` None) or exited 0 after `wall`.
    fn soku_outcome(reports: u64, wall: Duration, stopped: bool) -> Outcome {
        use std::os::unix::process::ExitStatusExt;
        let stderr = (1..=reports)
            .map(|i| {
                let line = format!(r#"{{"event":"verified","bytes":{}}}"#, i << 20);
                (Duration::from_secs(i), line)
            })
            .collect();
        Outcome {
            status: (!stopped).then(|| std::process::ExitStatus::from_raw(0)),
            wall,
            cpu: 0.0,
            stdout: String::new(),
            stderr,
            peak_rss_mib: (f64::NAN, f64::NAN),
            server_seen: Vec::new(),
        }
    }

    #[test]
    fn a_flow_begins_at_its_connected_event() {
        let connected = r#"{"event":"connected","transport":"QUIC to 10.77.0.2:42546"}"#;
        assert!(is_event(connected, "connected"));
        assert!(!is_event(r#"{"event":"verified","bytes":1048576}"#, "connected"));
        // A warning that names the event is not the event.
        assert!(!is_event("soku: \"event\":\"connected\" was expected", "connected"));
    }

    #[test]
    fn a_flow_that_went_quiet_but_ran_through_the_window_is_measured() {
        let (warm, window) = (Duration::from_secs(2), Duration::from_secs(10));
        let rate = |out: &Outcome| goodput(Flow::SokuBackground, out, Duration::ZERO, warm, window);
        // Reports for 8 s, then none, stopped at 20 s: 6 MiB over the 10 s from 2 s on.
        let quiet = soku_outcome(8, Duration::from_secs(20), true);
        let mbit = rate(&quiet).expect("measured");
        assert!((mbit - 6.0 * 8.0 * 1.048_576 / 10.0).abs() < 1e-9, "{mbit}");
        // The same reports from a copy that finished at 9 s: it did not run through.
        assert!(rate(&soku_outcome(8, Duration::from_secs(9), false)).is_err());
        // Stopped before the window closed (a timeout shorter than the case).
        assert!(rate(&soku_outcome(8, Duration::from_secs(11), true)).is_err());
    }
}
