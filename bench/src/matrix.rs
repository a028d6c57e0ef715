//! The scenario matrix: for each link rate x RTT x loss, one emulated path, one sshd
//! in namespace B, and every selected tool on it, one after the other.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use soku_netem::{PathSpec, PathStats};

use crate::proc;
use crate::sshd;
use crate::tools::{self, Endpoint, Measured, SourceFile, Status, Tool};

/// Which directions carry the configured loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossDir {
    /// Only A->B, the data direction of every run (ACKs are never lost).
    Data,
    /// Both directions.
    Both,
}

impl LossDir {
    /// As written in the output.
    pub fn name(self) -> &'static str {
        match self {
            LossDir::Data => "a>b",
            LossDir::Both => "both",
        }
    }
}

/// One emulated path.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Link rate, bit/s, each way.
    pub rate_bps: u64,
    /// Round-trip propagation delay.
    pub rtt: Duration,
    /// Random loss probability (0..1).
    pub loss: f64,
    /// Where the loss applies.
    pub loss_dir: LossDir,
}

/// `loss` (0..1) in percent, as given: 0.07 shows as 7, not 7.000000000000001.
pub fn percent(loss: f64) -> f64 {
    (loss * 1e8).round() / 1e6
}

impl Scenario {
    /// The random loss in percent.
    pub fn loss_pct(&self) -> f64 {
        percent(self.loss)
    }

    /// The most of the link's rate, in percent, that can arrive: soku-netem spends
    /// link time on the packets it then loses (`soku_netem::LinkSpec`), and the data
    /// direction loses in either [`LossDir`]. Headers come off it too: a 1500-byte
    /// packet carries 1440 bytes of a file over QUIC, 1448 over TCP.
    pub fn ceiling_pct(&self) -> f64 {
        100.0 * (1.0 - self.loss)
    }

    /// The netem spec: symmetric rate and delay, drop-tail queue of 1 BDP (netem's
    /// default), loss per [`LossDir`].
    pub fn spec(&self) -> PathSpec {
        let mut spec = PathSpec::symmetric(self.rtt, 0.0, Some(self.rate_bps));
        spec.a_to_b.loss = self.loss;
        if self.loss_dir == LossDir::Both {
            spec.b_to_a.loss = self.loss;
        }
        spec
    }
}

/// One row of results.
#[derive(Debug)]
pub struct Row {
    /// Local date and time of the run (UTC, RFC 3339 seconds).
    pub date: String,
    /// The path.
    pub scenario: Scenario,
    /// Tool label (may include options, e.g. `scp -c aes128-ctr`).
    pub tool: String,
    /// Which of the scenario's rounds (1-based; see `--repeat`).
    pub run: u32,
    /// What was measured.
    pub m: Measured,
    /// Load average (1 min) before and after the run.
    pub load: (f64, f64),
    /// Netem counters A->B during the run: packets in, loss drops, queue drops.
    pub netem: Option<(u64, u64, u64)>,
    /// For a copy over ssh: the path's ssh login (the median of `ssh HOST true`, timed
    /// before the runs), which every ssh tool pays and iperf3 does not; none for
    /// soku-next, whose login was made by the copy before it.
    pub login: Option<Duration>,
    /// The exact command.
    pub command: String,
}

impl Row {
    /// Goodput in Mbit/s.
    pub fn mbit(&self) -> f64 {
        if self.m.seconds > 0.0 {
            self.m.bytes as f64 * 8.0 / self.m.seconds / 1e6
        } else {
            0.0
        }
    }

    /// Goodput as percent of the link rate.
    pub fn pct(&self) -> f64 {
        self.mbit() * 1e6 / self.scenario.rate_bps as f64 * 100.0
    }

    /// The copy's own time, from soku's first `connected` event to its `finished`
    /// one (`--json`): the data moving, with the login and the session's set-up left
    /// out, and a move to another transport kept in. `None` for a tool that prints
    /// no such events, or a run that did not finish.
    pub fn copy_seconds(&self) -> Option<f64> {
        let (mut start, mut end) = (None, None);
        for (t, v) in tools::json_events(&self.m.stderr) {
            match v["event"].as_str() {
                Some("connected") if start.is_none() => start = Some(t),
                Some("finished") => end = Some(t),
                _ => {}
            }
        }
        let seconds = end?.checked_sub(start?)?.as_secs_f64();
        (seconds > 0.0).then_some(seconds)
    }

    /// Goodput as percent of the link rate over `seconds` of copy
    /// ([`Row::copy_seconds`]).
    pub fn pct_over(&self, seconds: f64) -> f64 {
        self.m.bytes as f64 * 8.0 / seconds / self.scenario.rate_bps as f64 * 100.0
    }

    /// Goodput as percent of the link rate over [`Row::copy_seconds`]; NaN without it.
    pub fn pct_copy(&self) -> f64 {
        self.copy_seconds().map_or(f64::NAN, |seconds| self.pct_over(seconds))
    }

    /// Goodput as percent of the link rate over the run's time less the ssh login
    /// (as [`Row::pct`] for iperf3, which has none): what the tool does once logged in,
    /// to set beside iperf3's figure, which leaves out its set-up.
    pub fn pct_after_login(&self) -> f64 {
        let login = self.login.map_or(0.0, |l| l.as_secs_f64());
        let seconds = self.m.seconds - login;
        if seconds > 0.0 {
            self.m.bytes as f64 * 8.0 / seconds / self.scenario.rate_bps as f64 * 100.0
        } else {
            0.0
        }
    }
}

/// Netem samples taken during a run: (time since start, counters).
pub type Samples = Vec<(Duration, PathStats)>;

/// Settings of a matrix run.
pub struct MatrixOpts<'a> {
    /// The soku binary.
    pub soku: &'a Path,
    /// Tools to run in each scenario.
    pub tools: &'a [Tool],
    /// Target duration of a copy (sets the file size) and iperf3's `-t`.
    pub duration: Duration,
    /// Prefix of the namespace names.
    pub name: &'a str,
    /// Scratch dir for source and target files.
    pub work: &'a Path,
    /// Rounds per scenario: every tool once per round, in order, so repeated runs of
    /// one tool are spread over the scenario's time like the others'.
    pub repeat: u32,
    /// The qcp binary, or why its rows are skipped.
    pub qcp: &'a Result<crate::qcp::Qcp, String>,
    /// UDP policed to this rate per direction on every path (`soku-netem --udp-rate`).
    pub udp_rate_bps: Option<u64>,
}

/// Result of one scenario: rows, the soku runs' netem samples, and sanity problems.
pub struct ScenarioResult {
    /// One row per tool run.
    pub rows: Vec<Row>,
    /// Netem samples of the first round's run of each tool with a time series
    /// ([`has_series`]), with the index of its row in `rows`.
    pub series: Vec<(usize, Samples)>,
    /// Everything that went wrong with the harness itself.
    pub problems: Vec<String>,
}

/// The samples from the timed command's start on, their times counted from it (the
/// run's stderr events are): untimed copies before it are left out.
fn from_start(samples: Samples, start: Option<Duration>) -> Samples {
    let Some(start) = start else { return samples };
    samples.into_iter().filter_map(|(t, s)| t.checked_sub(start).map(|t| (t, s))).collect()
}

/// Whether a tool's runs get a time series: soku's QUIC copies, with or without a
/// path memory or a login before them (`soku-tcp` has no `path_sample` events).
pub fn has_series(tool: Tool) -> bool {
    matches!(tool, Tool::Soku | Tool::SokuAgain | Tool::SokuNext)
}

/// The namespaces' TCP autotuning ceiling (`tcp_rmem`/`tcp_wmem` max), as a host
/// tuned for long fat networks has it (ESnet's fasterdata guidance): with Debian's
/// default 4 MiB send-buffer maximum a TCP sender cannot keep more than ~3 MB in
/// flight, so iperf3 stopped being the path's TCP ceiling from 1 Gbit/s x 50 ms on.
/// 128 MiB covers twice the largest BDP of the matrix (1 Gbit/s x 300 ms = 37.5 MB)
/// with Linux's buffer overhead. The ssh-based tools are capped by ssh's 2 MiB channel
/// window well before this, so the setting changes the TCP ceiling, not them.
pub const TCP_BUFFER_MAX: u64 = 128 << 20;

pub(crate) fn tune_tcp_buffers(path: &soku_netem::Path) -> anyhow::Result<()> {
    let rmem = format!("net.ipv4.tcp_rmem=4096 131072 {TCP_BUFFER_MAX}");
    let wmem = format!("net.ipv4.tcp_wmem=4096 16384 {TCP_BUFFER_MAX}");
    for mut cmd in [path.command_a("sysctl"), path.command_b("sysctl")] {
        proc::capture(cmd.args(["-q", "-w", &rmem, &wmem]))?;
    }
    Ok(())
}

/// File size for a rate: rate x duration, capped at 2 GiB.
pub fn file_size(rate_bps: u64, duration: Duration, fixed: Option<u64>) -> u64 {
    fixed.unwrap_or_else(|| ((rate_bps as f64 / 8.0 * duration.as_secs_f64()) as u64).min(2 << 30))
}

/// Runs every tool on one scenario. `src` must be sized for this rate.
pub fn run_scenario(
    sc: &Scenario,
    opts: &MatrixOpts<'_>,
    src: &SourceFile,
    log: &dyn Fn(&str),
) -> anyhow::Result<ScenarioResult> {
    let name = opts.name;
    let _ = soku_netem::Path::cleanup(name);
    let path = soku_netem::Path::up(name, sc.spec()).context("bringing the path up")?;
    path.faults().set_udp_rate(opts.udp_rate_bps);
    let mut problems = Vec::new();
    tune_tcp_buffers(&path).context("raising the namespaces' TCP buffer limits")?;
    let sshd = sshd::start(path.command_b("/usr/sbin/sshd"), path.addr_b(), 22)?;
    let cc_a =
        proc::capture(path.command_a("sysctl").args(["-n", "net.ipv4.tcp_congestion_control"]))
            .unwrap_or_else(|_| "unknown".into());
    let iperf = if opts.tools.iter().any(|t| t.is_iperf3()) {
        Some(IperfServer::start(&path)?)
    } else {
        None
    };
    let client = |p: &str| path.command_a(p);
    let memory = tempfile::Builder::new().prefix("soku-bench-memory-").tempdir()?;
    let ep = Endpoint {
        client: &client,
        sshd: &sshd,
        soku: opts.soku,
        tcp_cc: &cc_a,
        qcp: opts.qcp,
        memory: memory.path(),
    };
    let login = if opts.tools.iter().any(|t| t.is_copy()) {
        let login = ssh_login(&client, &sshd).context("timing the ssh login")?;
        log(&format!("  ssh login (median of {LOGIN_RUNS}): {:.2} s", login.as_secs_f64()));
        Some(login)
    } else {
        None
    };
    let qcp_tuned = crate::qcp::tuning(Some((sc.rate_bps, sc.rtt)));
    let expected = src.size as f64 * 8.0 / sc.rate_bps as f64;
    let timeout = Duration::from_secs_f64(expected * 3.0 + 30.0);
    let mut rows = Vec::new();
    let mut series = Vec::new();
    let rounds = (1..=opts.repeat.max(1)).flat_map(|run| opts.tools.iter().map(move |&t| (run, t)));
    for (run, tool) in rounds {
        path.flush_tcp_metrics().context("flushing tcp metrics")?;
        let load0 = proc::loadavg();
        let date = now_utc();
        let before = path.stats();
        let stop = AtomicBool::new(false);
        let samples = Mutex::new(Vec::new());
        let t0 = Instant::now();
        let result = std::thread::scope(|s| {
            s.spawn(|| {
                // Bounded by the run: the run below sets `stop` when it ends.
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(mut v) = samples.lock() {
                        v.push((t0.elapsed(), path.stats()));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
            let r = match tool {
                Tool::Iperf3Cubic | Tool::Iperf3Bbr => {
                    let cc = if tool == Tool::Iperf3Cubic { "cubic" } else { "bbr" };
                    // The server's CPU over the run: it serves one test at a time.
                    let cpu0 = iperf.as_ref().map_or(f64::NAN, IperfServer::cpu_seconds);
                    let run =
                        tools::run_iperf3(&client, &path.addr_b().to_string(), cc, opts.duration);
                    run.map(|(mut m, shown)| {
                        m.server_cpu =
                            iperf.as_ref().map_or(f64::NAN, IperfServer::cpu_seconds) - cpu0;
                        (m, shown)
                    })
                }
                Tool::QuinnFloor => {
                    crate::floor_path::run(&path, src, &opts.work.join("dst"), timeout)
                }
                Tool::QcpTuned => {
                    tools::run_copy(tool, &ep, src, &opts.work.join("dst"), &qcp_tuned, timeout)
                }
                _ => tools::run_copy(tool, &ep, src, &opts.work.join("dst"), &[], timeout),
            };
            stop.store(true, Ordering::Relaxed);
            r
        });
        let (m, command) = result?;
        let after = path.stats();
        let netem = Some((
            after.a_to_b.packets_in - before.a_to_b.packets_in,
            after.a_to_b.dropped_loss - before.a_to_b.dropped_loss,
            after.a_to_b.dropped_queue - before.a_to_b.dropped_queue,
        ));
        // `soku-again` and `soku-next` run untimed copies first: their series starts
        // with the timed command, as their events do.
        if run == 1 && has_series(tool) {
            let all = samples.into_inner().unwrap_or_default();
            let start = m.started.map(|at| at.saturating_duration_since(t0));
            series.push((rows.len(), from_start(all, start)));
        }
        let row = Row {
            date,
            scenario: *sc,
            tool: tool.name().to_string(),
            run,
            m,
            load: (load0, proc::loadavg()),
            netem,
            // soku-next opens a session on a login made before it: none to take out.
            login: if tool.is_copy() && tool != Tool::SokuNext { login } else { None },
            command,
        };
        log(&format!(
            "  {:<13} {:>7.1} Mbit/s {:>5.1} % of link  {:>6.2} s  cc {:<8} {}",
            row.tool,
            row.mbit(),
            row.pct(),
            row.m.seconds,
            row.m.cc,
            row.m.status
        ));
        match &row.m.status {
            Status::Ok => {}
            Status::Skipped(_) => log(&format!("    {}", row.m.status)),
            _ => {
                log(&format!("    command: {}", row.command));
                if has_series(tool) || tool.is_qcp() {
                    log(&format!("    {tool} stderr (tail): {}", stderr_tail(&row.m, 8)));
                }
            }
        }
        if tool.is_qcp() && row.m.status == Status::Ok {
            // qcp's `-s` summary: congestion events, losses, flow-control blocking.
            log(&format!("    {tool}: {}", stderr_tail(&row.m, 8)));
        }
        rows.push(row);
        if !path.is_running() {
            problems.push(format!("{sc:?}: emulator threads stopped during {tool}"));
        }
    }
    drop(iperf);
    drop(sshd);
    let names = [path.ns_a().to_string(), path.ns_b().to_string()];
    if let Err(e) = path.down() {
        problems.push(format!("{sc:?}: path teardown: {e}"));
    }
    let left = proc::capture(Command::new("ip").args(["netns", "list"])).unwrap_or_default();
    for n in names {
        if left.split_whitespace().any(|w| w == n) {
            problems.push(format!("namespace {n} still exists after teardown"));
        }
    }
    Ok(ScenarioResult { rows, series, problems })
}

/// Logins timed per path.
const LOGIN_RUNS: usize = 3;

/// The median wall time of `ssh HOST true` from namespace A: the login every ssh-based
/// copy pays before its own work (key exchange, authentication, session, exec).
fn ssh_login(client: &dyn Fn(&str) -> Command, sshd: &sshd::Sshd) -> anyhow::Result<Duration> {
    let mut times = Vec::new();
    for _ in 0..LOGIN_RUNS {
        let mut c = client("ssh");
        c.args(sshd.ssh_port_args()).args(sshd.ssh_args()).arg(sshd.destination()).arg("true");
        let t0 = Instant::now();
        let out = c.output().context("running ssh")?;
        if !out.status.success() {
            anyhow::bail!(
                "ssh HOST true failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        times.push(t0.elapsed().as_secs_f64());
    }
    Ok(Duration::from_secs_f64(crate::proc::median(&times)))
}

fn stderr_tail(m: &Measured, n: usize) -> String {
    let lines: Vec<&str> =
        m.stderr.iter().map(|(_, l)| l.trim()).filter(|l| !l.is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// `iperf3 -s` in namespace B for the life of a scenario; killed on drop.
pub(crate) struct IperfServer {
    child: std::process::Child,
}

impl IperfServer {
    pub(crate) fn start(path: &soku_netem::Path) -> anyhow::Result<IperfServer> {
        let child = path
            .command_b("iperf3")
            .args(["-s", "-B", &path.addr_b().to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("starting iperf3 -s")?;
        let server = IperfServer { child };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ss = proc::capture(path.command_b("ss").args(["-Hltn", "sport = :5201"]))?;
            if !ss.is_empty() {
                return Ok(server);
            }
            anyhow::ensure!(Instant::now() < deadline, "iperf3 -s did not listen in 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The CPU seconds `iperf3 -s` has used so far (`ip netns exec` execs it: same
    /// PID); NaN if it cannot be read.
    fn cpu_seconds(&self) -> f64 {
        proc::proc_cpu(&self.child.id().to_string()).map_or(f64::NAN, |(own, _)| own)
    }
}

impl Drop for IperfServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Now in UTC as `YYYY-MM-DDTHH:MM:SSZ` (from `date`, no time crate needed).
pub fn now_utc() -> String {
    proc::capture(Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])).unwrap_or_default()
}

/// Scratch files of a run: the source per size, the target dir.
pub fn source_for(work: &Path, size: u64) -> anyhow::Result<SourceFile> {
    let p: PathBuf = work.join(format!("src-{size}"));
    SourceFile::create(&p, size, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_shows_in_percent_as_given() {
        assert_eq!(percent(0.07).to_string(), "7");
        assert_eq!(percent(0.001).to_string(), "0.1");
        assert_eq!(percent(0.0).to_string(), "0");
    }

    #[test]
    fn every_quic_soku_run_has_a_time_series_and_no_other_tool() {
        for tool in [Tool::Soku, Tool::SokuAgain, Tool::SokuNext] {
            assert!(has_series(tool), "{tool}");
        }
        for tool in [Tool::SokuTcp, Tool::Scp, Tool::Rsync, Tool::Qcp, Tool::Iperf3Bbr] {
            assert!(!has_series(tool), "{tool}");
        }
    }

    #[test]
    fn samples_before_the_timed_command_are_left_out_and_the_rest_shifted() {
        let ms = Duration::from_millis;
        let at = |t| (ms(t), soku_netem::PathStats::default());
        let samples = vec![at(0), at(100), at(2600), at(2700)];
        let kept: Vec<_> =
            from_start(samples.clone(), Some(ms(2550))).into_iter().map(|s| s.0).collect();
        assert_eq!(kept, [ms(50), ms(150)]);
        assert_eq!(from_start(samples.clone(), None), samples);
    }
}
