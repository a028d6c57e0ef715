//! Resume end to end, through a real sshd on loopback. A copy whose client is killed
//! with SIGKILL midway and is run again completes with identical bytes, the second run
//! sending only what the first did not leave verified at the target. When `soku serve`
//! or ssh is killed instead, the client notices at once, logs in again by itself and
//! resumes the same way.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{assert_no_part_files, assert_same_file, data, soku_bin, write, Env};

/// 24 MiB at `-l 40000` (40 Mbit/s, 5 MB/s): about five seconds, long enough to stop
/// at half way on a loaded machine.
const SIZE: usize = 24 << 20;
const LIMIT_KBPS: &str = "40000";

/// `soku` reaching the test sshd, unbounded (the test bounds it and kills it itself).
fn soku_json(env: &Env) -> Command {
    let mut cmd = Command::new(soku_bin());
    cmd.args(env.sshd.scp_port_args()).args(env.sshd.ssh_args());
    cmd.arg("--remote-soku").arg(soku_bin()).arg("--json");
    cmd
}

/// The `"bytes"` of a JSON line of `event`, if it is one.
fn bytes_of(line: &str, event: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    (v["event"] == event).then(|| v["bytes"].as_u64()).flatten()
}

/// Runs `cmd` until the receiver has verified half of `SIZE`, then kills the process
/// `victim` picks (given the client's PID) with SIGKILL, and waits for the client to end.
/// Returns whether the client succeeded, and its stderr.
fn kill_at_half(mut cmd: Command, victim: impl FnOnce(u32) -> u32) -> (bool, String) {
    let mut child = cmd.stdin(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn soku");
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if bytes_of(&line, "verified").is_some_and(|b| b >= SIZE as u64 / 2) {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    rx.recv_timeout(Duration::from_secs(90)).expect("half way within 90 s");
    let pid = victim(child.id());
    kill9(pid);
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the client hung after the kill");
        std::thread::sleep(Duration::from_millis(50));
    };
    (status.success(), reader.join().expect("reader"))
}

fn kill9(pid: u32) {
    let status = Command::new("kill").arg("-9").arg(pid.to_string()).status().expect("kill");
    assert!(status.success(), "kill -9 {pid}");
}

/// The direct children of `pid`.
fn children(pid: u32) -> Vec<u32> {
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
fn descendant(pid: u32, wanted: &dyn Fn(&str) -> bool) -> Option<u32> {
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

/// Runs the copy again to completion; returns (bytes, resumed bytes) of its summary.
fn finish(env: &Env, mut cmd: Command) -> (u64, u64) {
    let out = env.ok(cmd.stdin(Stdio::null()));
    summary(&String::from_utf8_lossy(&out.stderr))
}

/// (bytes, resumed bytes) of the summary in `stderr`.
fn summary(stderr: &str) -> (u64, u64) {
    let finished = stderr.lines().find(|l| bytes_of(l, "finished").is_some()).expect("summary");
    let v: serde_json::Value = serde_json::from_str(finished).expect("json");
    (v["bytes"].as_u64().expect("bytes"), v["resumed_bytes"].as_u64().expect("resumed"))
}

fn check_resumed(bytes: u64, resumed: u64) {
    assert_eq!(bytes, SIZE as u64);
    let sent = bytes - resumed;
    // Killed at half verified: the rest, plus nothing held back.
    assert!(sent <= SIZE as u64 / 2, "sent {sent} of {bytes} again (resumed {resumed})");
}

fn upload(env: &Env, src: &Path) -> Command {
    let mut cmd = soku_json(env);
    cmd.args(["-l", LIMIT_KBPS]).arg(src).arg(env.remote(&env.dst()));
    cmd
}

#[test]
fn an_upload_killed_at_the_client_resumes_where_it_stopped() {
    let env = Env::new();
    let src = env.src().join("big.bin");
    write(&src, &data(SIZE, 11));
    let (ok, _) = kill_at_half(upload(&env, &src), |client| client);
    assert!(!ok, "killed");
    assert!(!env.dst().join("big.bin").exists(), "nothing at the final name");
    let mut again = soku_json(&env);
    again.arg(&src).arg(env.remote(&env.dst()));
    let (bytes, resumed) = finish(&env, again);
    check_resumed(bytes, resumed);
    assert_same_file(&src, &env.dst().join("big.bin"));
    assert_no_part_files(&env.dst());
}

#[test]
fn a_download_killed_at_the_client_resumes_where_it_stopped() {
    let env = Env::new();
    let src = env.src().join("big.bin");
    write(&src, &data(SIZE, 12));
    let mut first = soku_json(&env);
    first.args(["-l", LIMIT_KBPS]).arg(env.remote(&src)).arg(env.dst());
    let (ok, _) = kill_at_half(first, |client| client);
    assert!(!ok, "killed");
    let mut again = soku_json(&env);
    again.arg(env.remote(&src)).arg(env.dst());
    let (bytes, resumed) = finish(&env, again);
    check_resumed(bytes, resumed);
    assert_same_file(&src, &env.dst().join("big.bin"));
    assert_no_part_files(&env.dst());
}

/// Kills the process `victim` picks in an upload at half way: the client reconnects by
/// itself and completes, sending after the reconnect only what was missing.
fn survives_the_loss_of(env: &Env, src: &Path, victim: impl FnOnce(u32) -> u32) {
    let (ok, stderr) = kill_at_half(upload(env, src), victim);
    assert!(ok, "the copy did not survive:\n{stderr}");
    assert!(stderr.contains(r#""event":"reconnecting""#), "no reconnect:\n{stderr}");
    let (bytes, resumed) = summary(&stderr);
    check_resumed(bytes, resumed);
    assert_same_file(src, &env.dst().join("big.bin"));
    assert_no_part_files(&env.dst());
}

#[test]
fn an_upload_whose_server_was_killed_reconnects_and_resumes() {
    let env = Env::new();
    let src = env.src().join("big.bin");
    write(&src, &data(SIZE, 13));
    let sshd = env.sshd.pid();
    survives_the_loss_of(&env, &src, |_| {
        descendant(sshd, &|cmdline| cmdline.contains(" serve")).expect("soku serve is running")
    });
}

#[test]
fn an_upload_whose_ssh_was_killed_reconnects_and_resumes() {
    let env = Env::new();
    let src = env.src().join("big.bin");
    write(&src, &data(SIZE, 14));
    survives_the_loss_of(&env, &src, |client| {
        descendant(client, &|cmdline| cmdline.starts_with("ssh ")).expect("ssh is running")
    });
}
