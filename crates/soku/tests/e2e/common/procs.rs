//! Killing a running copy at a chosen point: the client, or one of its descendants
//! (ssh) or of the test's sshd (`soku serve`), found through `/proc`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The `"bytes"` of a JSON line of `event`, if it is one.
pub fn bytes_of(line: &str, event: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    (v["event"] == event).then(|| v["bytes"].as_u64()).flatten()
}

/// (bytes, resumed bytes) of the `finished` event in `stderr` (JSON lines).
pub fn summary(stderr: &str) -> Option<(u64, u64)> {
    let line = stderr.lines().find(|l| bytes_of(l, "finished").is_some())?;
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    Some((v["bytes"].as_u64()?, v["resumed_bytes"].as_u64()?))
}

/// How a killed run ended.
pub struct Killed {
    /// The client exited with success (it recovered by itself).
    pub ok: bool,
    /// Its stderr (JSON lines with `--json`).
    pub stderr: String,
    /// The last verified byte count the client reported before the kill.
    pub verified_at_kill: u64,
}

/// Starts `cmd` (a `soku --json` copy) with its stderr read by a thread: each
/// `verified` count goes to the receiver as it comes, and the thread returns the whole
/// stderr once the client ends.
fn spawn_reading_verified(
    mut cmd: Command,
) -> (std::process::Child, mpsc::Receiver<u64>, std::thread::JoinHandle<String>) {
    let mut child = cmd.stdin(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn soku");
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(bytes) = bytes_of(&line, "verified") {
                let _ = tx.send(bytes);
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    (child, rx, reader)
}

/// Runs `cmd` (a `soku --json` copy) until it reports `at` verified bytes, kills the
/// process `victim` picks (given the client's PID) with SIGKILL, and waits (at most
/// 120 s) for the client to end.
pub fn kill_when_verified(cmd: Command, at: u64, victim: impl FnOnce(u32) -> u32) -> Killed {
    let (killed, _) = signal_when_verified(cmd, at, "-KILL", victim);
    killed
}

/// [`kill_when_verified`] with `signal` (as `kill` takes it: `-INT`); also the client's
/// exit status.
pub fn signal_when_verified(
    cmd: Command,
    at: u64,
    signal: &str,
    victim: impl FnOnce(u32) -> u32,
) -> (Killed, std::process::ExitStatus) {
    let (mut child, rx, reader) = spawn_reading_verified(cmd);
    let mut verified = 0;
    while verified < at {
        match rx.recv_timeout(Duration::from_secs(90)) {
            Ok(bytes) => verified = verified.max(bytes),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "no progress to {at} bytes within 90 s:\n{}",
                    reader.join().unwrap_or_default()
                );
            }
        }
    }
    let pid = victim(child.id()).to_string();
    let sent = Command::new("kill").arg(signal).arg(&pid).status().expect("kill");
    assert!(sent.success(), "kill {signal} {pid}");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the client hung after the kill");
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = reader.join().expect("reader");
    (Killed { ok: status.success(), stderr, verified_at_kill: verified }, status)
}

/// `kill -9 PID`.
pub fn kill9(pid: u32) {
    let status = Command::new("kill").arg("-9").arg(pid.to_string()).status().expect("kill");
    assert!(status.success(), "kill -9 {pid}");
}

/// The direct children of `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(p) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else { continue };
        // The command name is in parentheses and may hold spaces: ppid follows the last ')'.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        if after.split_whitespace().nth(1).and_then(|s| s.parse::<u32>().ok()) == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// The first process below `pid` whose command line satisfies `wanted`.
pub fn descendant(pid: u32, wanted: &dyn Fn(&str) -> bool) -> Option<u32> {
    for child in children(pid) {
        let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if wanted(&cmdline) {
            return Some(child);
        }
        if let Some(found) = descendant(child, wanted) {
            return Some(found);
        }
    }
    None
}

/// The `soku serve` below the test's sshd `sshd_pid`.
pub fn soku_serve(sshd_pid: u32) -> u32 {
    descendant(sshd_pid, &|cmdline| cmdline.contains(" serve")).expect("soku serve is running")
}

/// The ssh below the client `client_pid`.
pub fn ssh_of(client_pid: u32) -> u32 {
    descendant(client_pid, &|cmdline| cmdline.starts_with("ssh ")).expect("ssh is running")
}

/// When [`kill_at`] kills.
#[derive(Clone, Copy, Debug)]
pub enum KillPoint {
    /// Once the client's `--json` output reports at least this many bytes verified.
    Verified(u64),
    /// This long after the client started (during the login, the handshake, the copy
    /// or its end, wherever that falls).
    After(Duration),
}

/// How a run killed by [`kill_at`] went.
pub struct KillRun {
    /// A process was killed; false when the copy ended (or the victim was gone) first.
    pub killed: bool,
    /// The client exited with success.
    pub ok: bool,
    /// Its stderr (JSON lines with `--json`).
    pub stderr: String,
    /// The last verified byte count the client reported before the kill.
    pub verified_at_kill: u64,
    /// The length of the file `log` just before the kill: what was written to it before.
    pub log_len_at_kill: u64,
    /// From the kill (or, without one, from the start) to the client's exit.
    pub kill_to_exit: Duration,
}

/// Runs `cmd` (a `soku --json` copy) until `point`, then sends SIGKILL to the process
/// `victim` names (given the client's PID; `None` while it does not exist, as `soku
/// serve` before the login, and then the kill waits for it), noting first, with the
/// victim stopped, how long the file `log` is. Then waits (at most 120 s) for the client to end.
pub fn kill_at(
    cmd: Command,
    point: KillPoint,
    victim: impl Fn(u32) -> Option<u32>,
    log: &std::path::Path,
) -> KillRun {
    let started = Instant::now();
    let (mut child, rx, reader) = spawn_reading_verified(cmd);
    let mut verified = 0;
    let drain = |verified: &mut u64| {
        while let Ok(bytes) = rx.try_recv() {
            *verified = (*verified).max(bytes);
        }
    };
    let mut killed_at = None;
    let mut victim_pid = None;
    let mut log_len = 0;
    let give_up = started + Duration::from_secs(90);
    loop {
        drain(&mut verified);
        let due = match point {
            KillPoint::Verified(at) => verified >= at,
            KillPoint::After(delay) => started.elapsed() >= delay,
        };
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if due {
            if let Some(pid) = victim(child.id()) {
                drain(&mut verified);
                // Stopped first, so that the log's length is read with the victim
                // writing no more: between that read and a SIGKILL sent by a `kill`
                // process of its own, a sender handed over one more chunk.
                stop(pid);
                log_len = std::fs::metadata(log).map_or(0, |m| m.len());
                // The victim may have exited since it was found (ssh at the copy's end):
                // then nothing is killed. A zombie takes the signal without effect.
                let status = (!is_zombie(pid)).then(|| {
                    Command::new("kill")
                        .arg("-9")
                        .arg(pid.to_string())
                        .stderr(Stdio::null())
                        .status()
                        .expect("kill")
                });
                if status.is_some_and(|s| s.success()) {
                    killed_at = Some(Instant::now());
                    victim_pid = Some(pid);
                }
                break;
            }
        }
        if Instant::now() > give_up {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no kill point {point:?} within 90 s:\n{}", reader.join().unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the client hung after the kill");
        std::thread::sleep(Duration::from_millis(5));
    };
    let ended = Instant::now();
    let stderr = reader.join().expect("reader");
    // The client killed counts only if it died of it (it may have been exiting).
    use std::os::unix::process::ExitStatusExt;
    let killed = match victim_pid {
        Some(pid) if pid == child.id() => status.signal() == Some(9),
        Some(_) => true,
        None => false,
    };
    KillRun {
        killed,
        ok: status.success(),
        stderr,
        verified_at_kill: verified,
        log_len_at_kill: log_len,
        kill_to_exit: ended.saturating_duration_since(killed_at.unwrap_or(started)),
    }
}

/// Sends SIGSTOP to `pid` and waits (at most 2 s) until every thread of it is stopped,
/// or it has exited: `kill` returns once the signal is queued, before the threads stop.
fn stop(pid: u32) {
    let _ = Command::new("kill").arg("-STOP").arg(pid.to_string()).stderr(Stdio::null()).status();
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until && !all_threads_stopped(pid) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether every thread of `pid` is stopped, or the process has exited.
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return true };
    tasks.flatten().all(|task| {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { return true };
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
        matches!(state, Some("T" | "t" | "Z" | "X") | None)
    })
}

/// Whether `pid` has exited and waits to be reaped (or is gone).
fn is_zombie(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return true };
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()) == Some("Z")
}
