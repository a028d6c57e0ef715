//! Running one measured process: wall time, a timeout that kills the whole process
//! group, stderr lines stamped as they arrive, and CPU time read from `/proc`.
//!
//! CPU accounting needs no `unsafe`: `/proc/self/stat` carries `cutime`/`cstime`, the
//! CPU of children this process has waited for (and of their waited-for descendants),
//! so the delta around one `wait` is the CPU of that child's whole tree. The same
//! fields of the sshd listener give the server side once it has reaped the session.
//! A server-side process that outlives its ssh session (`soku serve` finishing after
//! its client closed the connection) is reaped by init instead, so its CPU never reaches
//! the listener: [`settle_server`] watches for such processes and counts them itself.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::Context;

/// What a finished (or killed) run left behind.
#[derive(Debug)]
pub struct Outcome {
    /// Exit status; `None` if it was killed by the timeout.
    pub status: Option<ExitStatus>,
    /// Wall time from spawn to exit (or to the kill).
    pub wall: Duration,
    /// CPU seconds (user + system) of the process tree, from `cutime + cstime`.
    pub cpu: f64,
    /// Everything on stdout.
    pub stdout: String,
    /// stderr lines with the time since spawn at which each was read.
    pub stderr: Vec<(Duration, String)>,
    /// Peak resident memory (MiB) of the largest process of the client's tree, and of
    /// the server side's (see [`PeakRss`]); NaN where none was seen.
    pub peak_rss_mib: (f64, f64),
    /// The processes seen under the server's root during the run.
    pub server_seen: Vec<Seen>,
}

/// A process seen during a run: its pid and its start time (clock ticks since boot),
/// which tell it from a later process given the same pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Seen {
    pid: u32,
    start: u64,
}

/// How often [`run`] looks at the processes' peak resident memory.
const RSS_EVERY: Duration = Duration::from_millis(100);

/// Peak resident memory of the processes of a run, per side: the largest `VmHWM` (the
/// kernel's own high-water mark, so a peak between two looks is not missed) of any one
/// process in the client's tree, and in the trees under the server's root (the sshd
/// listener: the sessions it forks and what they run, e.g. `soku serve`). A process
/// that ends between two looks loses at most its last [`RSS_EVERY`] of growth.
#[derive(Debug, Default)]
struct PeakRss {
    client_kib: Option<u64>,
    server_kib: Option<u64>,
    /// Every process seen under the server's root.
    server_seen: HashSet<Seen>,
}

impl PeakRss {
    fn look(&mut self, client: u32, server_root: Option<u32>) {
        let biggest = |pids: &[u32]| pids.iter().copied().filter_map(vm_hwm_kib).max();
        let mut tree = vec![client];
        tree.extend(descendants(client));
        self.client_kib = self.client_kib.max(biggest(&tree));
        if let Some(root) = server_root {
            let server = descendants(root);
            self.server_kib = self.server_kib.max(biggest(&server));
            let seen = server
                .into_iter()
                .filter_map(|pid| stat_of(pid).map(|stat| Seen { pid, start: stat.start }));
            self.server_seen.extend(seen);
        }
    }

    fn mib(&self) -> (f64, f64) {
        let mib = |k: Option<u64>| k.map_or(f64::NAN, |k| k as f64 / 1024.0);
        (mib(self.client_kib), mib(self.server_kib))
    }
}

/// What `/proc/PID/stat` says of a process.
struct Stat {
    /// Start time, clock ticks since boot.
    start: u64,
    parent: u32,
    /// Exited and not yet reaped.
    zombie: bool,
    /// CPU seconds of the process itself, and of the children it reaped.
    own_cpu: f64,
    reaped_cpu: f64,
}

impl Stat {
    /// The process's and its reaped children's CPU seconds.
    fn cpu(&self) -> f64 {
        self.own_cpu + self.reaped_cpu
    }
}

fn stat_of(pid: u32) -> Option<Stat> {
    stat_at(&pid.to_string())
}

/// `/proc/ID/stat` read, for a pid or "self".
fn stat_at(id: &str) -> Option<Stat> {
    let stat = std::fs::read_to_string(format!("/proc/{id}/stat")).ok()?;
    parse_stat(&stat).map(|(_, stat)| stat)
}

/// A `/proc/.../stat` line (proc(5)): the process's or thread's name, and its fields.
fn parse_stat(line: &str) -> Option<(&str, Stat)> {
    // The name sits in parentheses and may hold spaces and parentheses itself, so the
    // fields after it are counted from the last ')': they start at field 3 (state).
    let (open, close) = (line.find('(')?, line.rfind(')')?);
    let rest: Vec<&str> = line.get(close + 2..)?.split(' ').collect();
    let num = |i: usize| rest.get(i).and_then(|x| x.parse::<u64>().ok());
    // utime, stime, cutime, cstime: fields 14-17 -> indexes 11-14; starttime 22 -> 19.
    let t = clk_tck();
    let stat = Stat {
        start: num(19)?,
        parent: u32::try_from(num(1)?).ok()?,
        zombie: rest.first() == Some(&"Z"),
        own_cpu: (num(11)? + num(12)?) as f64 / t,
        reaped_cpu: (num(13)? + num(14)?) as f64 / t,
    };
    Some((line.get(open + 1..close)?, stat))
}

/// CPU seconds (user + system) of this process's threads named `name` so far.
pub fn thread_cpu(name: &str) -> std::io::Result<f64> {
    let mut cpu = 0.0;
    for task in std::fs::read_dir("/proc/self/task")? {
        let line = std::fs::read_to_string(task?.path().join("stat"))?;
        match parse_stat(&line) {
            Some((comm, stat)) if comm == name => cpu += stat.own_cpu,
            _ => {}
        }
    }
    Ok(cpu)
}

/// How often [`settle_server`] looks.
const SETTLE_EVERY: Duration = Duration::from_millis(5);

/// Waits (at most `limit`) until the server's side of a run is over: `root` (the sshd
/// listener) has no child left, and no process of `seen` outlives its session. Returns
/// whether that happened in time, and the CPU seconds of the processes that outlived
/// their session: reaped by init, their CPU never reaches `root`'s counters. Each is
/// counted as last seen, so up to [`SETTLE_EVERY`] of its CPU may be missed.
pub fn settle_server(root: u32, seen: &[Seen], limit: Duration) -> (bool, f64) {
    let deadline = Instant::now() + limit;
    let mut outlived: HashMap<Seen, f64> = HashMap::new();
    loop {
        let mut tree: HashSet<u32> = descendants(root).into_iter().collect();
        tree.insert(root);
        let mut running = false;
        for s in seen {
            let Some(stat) = stat_of(s.pid).filter(|stat| stat.start == s.start) else {
                continue;
            };
            if !tree.contains(&stat.parent) || outlived.contains_key(s) {
                outlived.insert(*s, stat.cpu());
                running |= !stat.zombie;
            }
        }
        let cpu = outlived.values().sum();
        if !running && children(root).is_empty() {
            return (true, cpu);
        }
        if Instant::now() > deadline {
            return (false, cpu);
        }
        std::thread::sleep(SETTLE_EVERY);
    }
}

/// `VmHWM` of `pid` in KiB (`/proc/PID/status`).
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    peak_rss_kib(&pid.to_string())
}

/// The peak resident memory (`VmHWM`) in KiB of a pid, or of "self".
pub fn peak_rss_kib(id: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{id}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Ends the remote soku servers below `root` that stay for the next copies
/// (`crates/soku/src/server/serve/kept.rs`, named `soku-kept`), and waits up to two seconds
/// for them to go (after up to three for servers still ending their job). Before the shared logins end: sshd's session waits for its command,
/// so a kept server is below `root` (and reaped by it) only while its login stands. A
/// run's server side must end for its CPU to be counted (sshd reaps it) and for
/// [`settle_server`] to see it gone; a copy's next run must not find one.
pub fn end_kept_servers(root: u32) {
    let named = |pid: &u32, name: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == name)
    };
    // A server still ending its job (the client does not wait for that) becomes one
    // that stays, or exits, within its close: waited for, up to three seconds.
    let deadline = Instant::now() + Duration::from_secs(3);
    while descendants(root).iter().any(|pid| named(pid, "soku")) && Instant::now() < deadline {
        std::thread::sleep(SETTLE_EVERY);
    }
    let kept: Vec<u32> =
        descendants(root).into_iter().filter(|pid| named(pid, "soku-kept")).collect();
    for pid in &kept {
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while kept.iter().any(|pid| stat_of(*pid).is_some_and(|s| !s.zombie))
        && Instant::now() < deadline
    {
        std::thread::sleep(SETTLE_EVERY);
    }
}

/// Every descendant of `pid` (bounded: process trees here are a few levels deep).
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut level = vec![pid];
    for _ in 0..8 {
        level = level.into_iter().flat_map(children).collect();
        if level.is_empty() {
            break;
        }
        out.extend(&level);
    }
    out
}

impl Outcome {
    /// The stderr lines, each after the seconds since spawn at which it was read.
    pub fn timed_stderr(&self) -> String {
        self.stderr.iter().map(|(t, l)| format!("{:.3} {l}\n", t.as_secs_f64())).collect()
    }

    /// True if the process exited with status 0 within the timeout.
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// True if the timeout killed it.
    pub fn timed_out(&self) -> bool {
        self.status.is_none()
    }

    /// The last `n` stderr lines, joined, for reports.
    pub fn stderr_tail(&self, n: usize) -> String {
        let skip = self.stderr.len().saturating_sub(n);
        let lines: Vec<&str> = self.stderr[skip..].iter().map(|(_, l)| l.as_str()).collect();
        lines.join(" | ")
    }
}

/// Clock ticks per second for `/proc` times (`getconf CLK_TCK`, 100 if unknown).
fn clk_tck() -> f64 {
    static TCK: OnceLock<f64> = OnceLock::new();
    *TCK.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// `(own, children)` CPU seconds of `pid` from `/proc/PID/stat` (utime+stime,
/// cutime+cstime); `pid` "self" is this process.
pub fn proc_cpu(pid: &str) -> Option<(f64, f64)> {
    stat_at(pid).map(|stat| (stat.own_cpu, stat.reaped_cpu))
}

/// PIDs of the direct children of `pid` (all threads).
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
    }
    out
}

/// Spawns `cmd` in its own process group with stdin closed and waits at most
/// `timeout`; on timeout the whole group gets SIGKILL (scp's ssh, rsync's ssh too).
pub fn run(cmd: Command, timeout: Duration) -> anyhow::Result<Outcome> {
    run_with(cmd, timeout, None, None)
}

/// [`run`], calling `on_line` with each stderr line as it is read: for a step that must
/// wait until the process has said something (soku's `connected` event, say).
pub fn run_noting(
    cmd: Command,
    timeout: Duration,
    on_line: impl FnMut(&str) + Send + 'static,
) -> anyhow::Result<Outcome> {
    run_with(cmd, timeout, None, Some(Box::new(on_line)))
}

/// [`run`], also watching the peak memory of the processes under `server_root` (the
/// server side of the run, e.g. the sshd listener) besides the client's.
pub fn run_watched(
    cmd: Command,
    timeout: Duration,
    server_root: Option<u32>,
) -> anyhow::Result<Outcome> {
    run_with(cmd, timeout, server_root, None)
}

type OnLine = Box<dyn FnMut(&str) + Send>;

fn run_with(
    mut cmd: Command,
    timeout: Duration,
    server_root: Option<u32>,
    mut on_line: Option<OnLine>,
) -> anyhow::Result<Outcome> {
    let cpu0 = proc_cpu("self").map(|c| c.1).unwrap_or(0.0);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("spawning {:?}", cmd.get_program()))?;
    let pid = child.id();
    let mut out = child.stdout.take().context("stdout pipe")?;
    let err = child.stderr.take().context("stderr pipe")?;
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            if let Some(f) = on_line.as_mut() {
                f(&line);
            }
            lines.push((start.elapsed(), line));
        }
        lines
    });
    let deadline = start + timeout;
    let mut rss = PeakRss::default();
    let mut next_look = start;
    let status = loop {
        if Instant::now() >= next_look {
            rss.look(pid, server_root);
            next_look += RSS_EVERY;
        }
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if Instant::now() >= deadline {
            kill_group(pid);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall = start.elapsed();
    // A killed group may leave a grandchild holding the pipes for a moment; the
    // SIGKILL went to the whole group, so the readers end.
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    let cpu = proc_cpu("self").map(|c| c.1).unwrap_or(0.0) - cpu0;
    let server_seen = rss.server_seen.iter().copied().collect();
    Ok(Outcome { status, wall, cpu, stdout, stderr, peak_rss_mib: rss.mib(), server_seen })
}

/// Clock ticks since boot now (`/proc/uptime`), comparable with a process's start
/// time in `/proc/PID/stat`; 0 if unknown.
pub fn ticks_since_boot() -> u64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse::<f64>().ok()))
        .map(|secs| (secs * clk_tck()) as u64)
        .unwrap_or(0)
}

/// PIDs of the live processes running the executable `exe` that started at or after
/// `since` (clock ticks since boot, [`ticks_since_boot`]): the ones a run of this
/// program started, even after their parent left them to init.
pub fn started_since(exe: &Path, since: u64) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return out };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if std::fs::read_link(e.path().join("exe")).ok().as_deref() != Some(exe) {
            continue;
        }
        if stat_of(pid).is_some_and(|stat| stat.start >= since) {
            out.push(pid);
        }
    }
    out
}

/// SIGKILL to one process by PID (one this program started).
pub fn kill_pid(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// SIGKILL to process group `pgid` (a group this program created with `process_group(0)`).
pub fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Runs a short helper command and returns its stdout (trimmed); errors carry stderr.
pub fn capture(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.stdin(Stdio::null()).output().with_context(|| format!("running {cmd:?}"))?;
    anyhow::ensure!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The 1-minute load average from `/proc/loadavg`.
pub fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// A command line for the record, shell-like.
pub fn show(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| {
        let a = a.to_string_lossy();
        if a.is_empty() || a.contains([' ', '\'', '"']) {
            format!("'{}'", a.replace('\'', r"'\''"))
        } else {
            a.into_owned()
        }
    }));
    parts.join(" ")
}

/// The median (the mean of the middle two for an even count); NaN when empty.
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_name_and_times() {
        // proc(5): pid (comm) state ppid ... utime stime cutime cstime ... starttime.
        let line =
            "4242 (tokio (rt) 1) S 1 4242 4242 0 -1 4194560 120 0 0 0 250 37 4 6 20 0 3 0 777";
        let (name, stat) = parse_stat(line).expect("a whole line");
        assert_eq!(name, "tokio (rt) 1");
        assert_eq!((stat.parent, stat.start, stat.zombie), (1, 777, false));
        let tick = clk_tck();
        assert!((stat.own_cpu - 287.0 / tick).abs() < 1e-9, "{}", stat.own_cpu);
        assert!((stat.reaped_cpu - 10.0 / tick).abs() < 1e-9, "{}", stat.reaped_cpu);
        assert!(parse_stat("4242 (cut) S 1").is_none());
    }

    #[test]
    fn a_server_process_that_outlives_its_session_is_counted() {
        // `root` plays the sshd listener: its "session" starts a busy worker in the
        // background and ends, so init inherits the worker; then `root` waits alone.
        let mut root = Command::new("sh")
            .args(["-c", "sh -c \"$SESSION\"; exec sleep 30"])
            .env("SESSION", "sh -c \"$BUSY\" & sleep 0.3")
            .env("BUSY", "i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done")
            .spawn()
            .expect("spawn");
        let root_pid = root.id();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = HashSet::new();
        while seen.len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            let pids = descendants(root_pid);
            seen.extend(
                pids.into_iter()
                    .filter_map(|pid| stat_of(pid).map(|stat| Seen { pid, start: stat.start })),
            );
        }
        // The session (a shell may exec its last command, the sleep) and the worker.
        assert!(seen.len() >= 2, "the session and the worker: {seen:?}");
        let reaped0 = proc_cpu(&root_pid.to_string()).expect("root").1;
        let seen: Vec<Seen> = seen.into_iter().collect();
        let (settled, outlived) = settle_server(root_pid, &seen, Duration::from_secs(20));
        let reaped = proc_cpu(&root_pid.to_string()).expect("root").1 - reaped0;
        let _ = root.kill();
        let _ = root.wait();
        assert!(settled, "the worker never ended");
        assert!(outlived >= 0.05, "the worker's CPU was not counted: {outlived} s");
        assert!(reaped < outlived, "root reaped the worker after all: {reaped} s");
    }
}
