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

/// Runs `cmd` (a `soku --json` copy) until it reports `at` verified bytes, kills the
/// process `victim` picks (given the client's PID) with SIGKILL, and waits (at most
/// 120 s) for the client to end.
pub fn kill_when_verified(mut cmd: Command, at: u64, victim: impl FnOnce(u32) -> u32) -> Killed {
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
    kill9(victim(child.id()));
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the client hung after the kill");
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = reader.join().expect("reader");
    Killed { ok: status.success(), stderr, verified_at_kill: verified }
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
