//! The data transports through a real sshd over the project's emulator (see
//! `common/emulated.rs`): TLS over TCP when asked for, and when UDP is blocked or
//! throttled, chosen by `--transport auto` on its own. Each copy is verified byte for
//! byte; each prints how long the choice took and what carried the data.

mod common;

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::emulated::EmulatedHost;
use common::{assert_no_part_files, assert_same_file, data, write};

/// 24 MiB: about 2 s of a 100 Mbit/s link.
const SIZE: usize = 24 << 20;

/// The `connected` JSON event of a copy's stderr: (transport, reason).
fn connected(stderr: &str) -> (String, Option<String>) {
    let line = stderr
        .lines()
        .find(|l| l.contains(r#""event":"connected""#))
        .unwrap_or_else(|| panic!("no connected event:\n{stderr}"));
    let v: serde_json::Value = serde_json::from_str(line).expect("json");
    let transport = v["transport"].as_str().expect("transport").to_string();
    (transport, v["reason"].as_str().map(str::to_string))
}

/// Uploads `SIZE` bytes with `args` over `host`; the output and the wall time.
fn upload(host: &EmulatedHost, name: &str, args: &[&str]) -> (Output, Duration) {
    let src = host.src().join(name);
    write(&src, &data(SIZE, 31));
    let mut cmd = host.soku_json();
    cmd.args(args).arg(&src).arg(host.remote(&host.dst()));
    let began = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().expect("run soku");
    let took = began.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: the copy failed:\n{stderr}");
    assert_same_file(&src, &host.dst().join(name));
    assert_no_part_files(&host.dst());
    (out, took)
}

#[test]
fn tcp_when_asked_carries_a_verified_copy() {
    let host = EmulatedHost::up("tcp", Duration::from_millis(20), 100_000_000);
    let (out, took) = upload(&host, "forced.bin", &["--transport", "tcp"]);
    let (transport, reason) = connected(&String::from_utf8_lossy(&out.stderr));
    println!("--transport tcp: {took:.1?} for {} MiB over {transport}", SIZE >> 20);
    assert!(transport.starts_with("TLS/TCP to "), "{transport}");
    assert_eq!(reason, None, "asked for, so no reason to give");
}

/// A firewall that drops all UDP: the copy moves to TCP by itself and says why.
#[test]
fn udp_blocked_moves_to_tcp_and_says_so() {
    let host = EmulatedHost::up("noudp", Duration::from_millis(100), 100_000_000);
    host.path.faults().set_drop_udp(true);
    let (out, took) = upload(&host, "blocked.bin", &[]);
    let (transport, reason) = connected(&String::from_utf8_lossy(&out.stderr));
    let reason = reason.expect("a reason for not using QUIC");
    println!("UDP blocked: {took:.1?} for {} MiB over {transport}; {reason}", SIZE >> 20);
    assert!(transport.starts_with("TLS/TCP to "), "{transport}");
    assert!(reason.contains("no QUIC handshake"), "{reason}");
    let stats = host.path.stats();
    assert!(stats.a_to_b.dropped_fault > 0, "no UDP was dropped: {stats:?}");
}
