//! Outages on an emulated path (the project's own TUN emulator between two network
//! namespaces, sshd in the far one): a copy over 100 Mbit/s x 50 ms survives a 10 s
//! outage on its own connection, and a 60 s one by reconnecting and resuming. Needs
//! root for the namespaces; the test says so and fails without it.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::{assert_no_part_files, assert_same_file, data, soku_bin, write};
use soku_netem::{Path, PathSpec};
use soku_testkit::Sshd;

/// 100 Mbit/s: about 11 MB/s of payload.
const RATE_BPS: u64 = 100_000_000;

fn root() -> bool {
    // SAFETY-free check: the effective user is in /proc/self/status.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(str::to_owned))
        .is_some_and(|l| l.split_whitespace().nth(2) == Some("0"))
}

/// A unique namespace name per test in this process.
fn path_name(tag: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("so{}{tag}{}", std::process::id() % 100_000, N.fetch_add(1, Ordering::Relaxed))
}

/// One outage trial: an upload of `size` bytes over the path, the path dropped entirely
/// from `start` for `length` after the copy began. Returns the copy's stderr (JSON
/// lines) and how long it took.
fn upload_through_outage(
    tag: &str,
    size: usize,
    start: Duration,
    length: Duration,
) -> (String, Duration) {
    assert!(root(), "this test needs root (network namespaces)");
    let spec = PathSpec::symmetric(Duration::from_millis(50), 0.0, Some(RATE_BPS));
    let path = Path::up(&path_name(tag), spec).expect("emulated path");
    let sshd = Sshd::start_at(path.command_b("/usr/sbin/sshd"), path.addr_b(), 22)
        .expect("sshd in the far namespace");
    let dir = tempfile::Builder::new().prefix("soku-outage-").tempdir().expect("temp dir");
    let (src, dst) = (dir.path().join("src.bin"), dir.path().join("dst"));
    std::fs::create_dir(&dst).expect("mkdir");
    write(&src, &data(size, 21));

    let mut cmd = path.command_a(soku_bin().to_str().expect("utf-8 path"));
    cmd.args(sshd.scp_port_args()).args(sshd.ssh_args());
    cmd.arg("--remote-soku").arg(soku_bin()).arg("--json");
    cmd.arg(&src).arg(format!("{}:{}", sshd.host(), dst.display()));
    let began = Instant::now();
    let mut child = cmd.stdin(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn soku");
    let stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let faults = path.faults();
    std::thread::sleep(start);
    faults.set_blackout(true);
    std::thread::sleep(length);
    faults.set_blackout(false);
    let deadline = began + start + length + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the copy did not finish within 120 s after the outage:\n{}",
                reader.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = began.elapsed();
    let stderr = reader.join().expect("reader");
    assert!(status.success(), "the copy failed ({status}):\n{stderr}");
    assert_same_file(&src, &dst.join("src.bin"));
    assert_no_part_files(&dst);
    drop(sshd);
    path.down().expect("path down");
    (stderr, took)
}

#[test]
fn a_ten_second_outage_mid_copy_is_ridden_out() {
    // 40 MB: about 4 s of the link; the outage starts 2 s in.
    let (stderr, took) =
        upload_through_outage("ten", 40 << 20, Duration::from_secs(2), Duration::from_secs(10));
    eprintln!("10 s outage: done in {took:?}");
    assert!(!stderr.contains("reconnect"), "no reconnect needed:\n{stderr}");
}

#[test]
fn a_sixty_second_outage_mid_copy_is_survived_by_reconnecting() {
    let (stderr, took) =
        upload_through_outage("sixty", 40 << 20, Duration::from_secs(2), Duration::from_secs(60));
    eprintln!("60 s outage: done in {took:?}\n{stderr}");
}
