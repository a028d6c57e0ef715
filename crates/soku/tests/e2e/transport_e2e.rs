//! The data transports through a real sshd over the project's emulator (see
//! `common/emulated.rs`): TLS over TCP when asked for, and when UDP is blocked,
//! policed or shaped, chosen by `--transport auto` on its own, also by a copy that
//! reaches the remote soku kept from the copy before. Each copy is verified byte for
//! byte; each prints how long the choice took and what carried the data.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::emulated::EmulatedHost;
use crate::common::{assert_no_part_files, assert_same_file, data, write};

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

/// Forced TCP, with the server's ports held to a range (as a firewall would open).
#[test]
fn tcp_when_asked_carries_a_verified_copy_on_a_port_in_the_range() {
    let host = EmulatedHost::up("tcp", Duration::from_millis(20), 100_000_000);
    let args = ["--transport", "tcp", "--remote-ports", "47000-47010"];
    let (out, took) = upload(&host, "forced.bin", &args);
    let (transport, reason) = connected(&String::from_utf8_lossy(&out.stderr));
    println!("--transport tcp: {took:.1?} for {} MiB over {transport}", SIZE >> 20);
    assert!(transport.starts_with("TLS/TCP to "), "{transport}");
    assert_eq!(reason, None, "asked for, so no reason to give");
    let port: u16 = transport
        .split_whitespace()
        .nth(2)
        .and_then(|addr| addr.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {transport}"));
    assert!((47000..=47010).contains(&port), "port {port} outside --remote-ports");
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

/// A middlebox that polices UDP to 5 % of the link: QUIC's handshake gets through and
/// the copy starts on it; the data sender sees the policer's signature (heavy loss, no
/// queue) and the copy moves to TCP, keeping what arrived. Both directions, since
/// either side may be the one that sends. The time staying on QUIC would take is the
/// file at the policer's rate (printed beside the time taken).
#[test]
fn udp_throttled_moves_to_tcp_in_both_directions() {
    const RATE: u64 = 100_000_000;
    let host = EmulatedHost::up("slowudp", Duration::from_millis(50), RATE);
    host.path.faults().set_udp_rate(Some(RATE / 20));
    let on_quic = SIZE as f64 * 8.0 / (RATE / 20) as f64;
    let (out, took) = upload(&host, "throttled-up.bin", &[]);
    report_switch("policed", "upload", &String::from_utf8_lossy(&out.stderr), took, on_quic);
    let (stderr, took) = download(&host, "throttled-down.bin", &[]);
    report_switch("policed", "download", &stderr, took, on_quic);
}

/// A middlebox that shapes UDP to 5 % of the link (a queue of its own, nothing lost):
/// no policer's signature, but QUIC's packets stand in a queue that round trips over
/// ssh do not see (`crates/soku/src/carrier/shaping.rs`), and the copy moves to TCP. Both
/// directions: the client watches, and its RTT carries the queue either way.
#[test]
fn udp_shaped_moves_to_tcp_in_both_directions() {
    const RATE: u64 = 100_000_000;
    let host = EmulatedHost::up("shapeudp", Duration::from_millis(50), RATE);
    host.path.faults().set_udp_shape(Some(RATE / 20));
    let on_quic = SIZE as f64 * 8.0 / (RATE / 20) as f64;
    let (out, took) = upload(&host, "shaped-up.bin", &[]);
    report_switch("shaped", "upload", &String::from_utf8_lossy(&out.stderr), took, on_quic);
    let (stderr, took) = download(&host, "shaped-down.bin", &[]);
    report_switch("shaped", "download", &stderr, took, on_quic);
}

/// A policer that comes between two copies, in both directions: the second copy
/// resumes from what the first learned of the path (careful resume's jump,
/// `crates/soku-cc/src/resume.rs`) and reaches the remote soku kept from the first
/// (`crates/soku/src/server/serve/kept.rs`); its jump is lost with no queue, which is the
/// policer's signature, and the copy moves straight to TCP whichever side sends the
/// data (the client watches an upload, the kept server a download). After the jump's retreat
/// the controller runs at the policer's rate and loses too little for the signature
/// on its own: a watch that left the jump's losses out kept such a copy on QUIC.
#[test]
fn udp_policed_after_a_copy_learned_the_path_moves_to_tcp_in_both_directions() {
    const RATE: u64 = 100_000_000;
    let host = EmulatedHost::up("keptudp", Duration::from_millis(50), RATE);
    let on_quic = SIZE as f64 * 8.0 / (RATE / 20) as f64;
    for what in ["upload", "download"] {
        host.path.faults().set_udp_rate(None);
        match what {
            "upload" => drop(upload(&host, "before-upload.bin", &[])),
            _ => drop(download(&host, "before-download.bin", &[])),
        }
        let memory = std::fs::read_to_string(host.dir.path().join("cache/soku/paths"));
        let flow = if what == "upload" { " up " } else { " down " };
        assert!(
            memory.as_deref().is_ok_and(|m| m.contains(flow)),
            "{what}: the first copy left no memory of the path: {memory:?}"
        );
        host.path.faults().set_udp_rate(Some(RATE / 20));
        let (stderr, took) = match what {
            "upload" => {
                let (out, took) = upload(&host, "policed-up.bin", &[]);
                (String::from_utf8_lossy(&out.stderr).into_owned(), took)
            }
            _ => download(&host, "policed-down.bin", &[]),
        };
        let transports: Vec<String> = stderr
            .lines()
            .filter(|l| l.contains(r#""event":"connected""#))
            .map(|l| connected(l).0)
            .collect();
        println!("UDP policed to 5 %, {what} from a kept server: {took:.1?} via {transports:?}");
        let first = transports.first().expect("a connection");
        assert!(first.contains("the remote soku kept from the last copy"), "{what}: {first}");
        let last = transports.last().expect("a connection");
        assert!(last.starts_with("TLS/TCP"), "{what}: ended on {last}:\n{stderr}");
        assert!(stderr.contains("UDP looks rate-limited"), "{what}: not told why:\n{stderr}");
        // Straight from the kept server to TCP, whichever side closed QUIC: each close
        // leaves with its window open (`soku_transport::close`). Held behind the full
        // window, a download's never reached the client, which heard a reset seconds
        // later and went through a fresh ssh session first, and an upload's never
        // reached the kept job, which held the file until its client had been silent
        // for 15 s (the TCP session waited for it).
        assert_eq!(transports.len(), 2, "{what}: {transports:?}");
        assert!(
            !stderr.contains(r#""event":"waiting""#),
            "{what}: the TCP session waited for a file the kept job still held:\n{stderr}"
        );
        assert!(took.as_secs_f64() < on_quic, "{what}: {took:.1?}, slower than staying");
    }
}

/// UDP dropped under a running copy while TCP goes on (a firewall's UDP state gone, a
/// VPN that carries TCP only): QUIC hears nothing while ssh's round trips go on
/// (`crates/soku/src/carrier/udp_block.rs`), and the copy moves to TCP and finishes, keeping
/// what arrived, in well under QUIC's idle timeout (a minute) that it used to wait out
/// before logging in again. Both directions: the client watches either way.
#[test]
fn udp_blocked_under_a_copy_moves_to_tcp_in_both_directions() {
    let host = EmulatedHost::up("cutudp", Duration::from_millis(50), 100_000_000);
    for what in ["upload", "download"] {
        cut_udp_under_a_copy(&host, what, false);
    }
}

/// The same through the remote soku kept from the copy before, which has no ssh
/// channel to ping on: TCP handshakes with sshd's port, made once QUIC has been silent
/// longer than a live connection is (`crates/soku/src/carrier/tcp_probe.rs`), stand in.
#[test]
fn udp_blocked_under_a_kept_server_copy_moves_to_tcp_in_both_directions() {
    let host = EmulatedHost::up("cutkept", Duration::from_millis(50), 100_000_000);
    for what in ["upload", "download"] {
        cut_udp_under_a_copy(&host, what, true);
    }
}

/// Copies 96 MiB (`what`: "upload" or "download") over `host`, dropping UDP once 16
/// progress events have come, and checks that the copy moved to TCP, was told why and
/// finished in time, with the same bytes. Through a kept server if `kept`: a small
/// copy first leaves one, with UDP open.
fn cut_udp_under_a_copy(host: &EmulatedHost, what: &str, kept: bool) {
    use std::io::{BufRead, BufReader};
    const BIG: usize = 96 << 20;
    let remote = host.dir.path().join(format!("remote-cut-{what}"));
    std::fs::create_dir(&remote).expect("mkdir");
    let local = host.dir.path().join(format!("local-cut-{what}"));
    std::fs::create_dir(&local).expect("mkdir");
    host.path.faults().set_drop_udp(false);
    if kept {
        match what {
            "upload" => drop(upload(host, &format!("before-{what}.bin"), &[])),
            _ => drop(download(host, &format!("before-{what}.bin"), &[])),
        }
    }
    let name = format!("cut-{what}.bin");
    let (src, dst) = match what {
        "upload" => (host.src().join(&name), remote.join(&name)),
        _ => (remote.join(&name), local.join(&name)),
    };
    write(&src, &data(BIG, 34));
    let mut cmd = host.soku_json();
    if !kept {
        // No kept server: the copy runs over an ssh session, and pings on it.
        cmd.arg("--no-share-login");
    }
    match what {
        "upload" => cmd.arg(&src).arg(host.remote(&dst)),
        _ => cmd.arg(host.remote(&src)).arg(&dst),
    };
    let began = Instant::now();
    let mut child = cmd.stdin(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn");
    let stderr = child.stderr.take().expect("piped");
    let mut lines = Vec::new();
    let (mut cut_at, mut told_at) = (None, None);
    // When the copy moved to TCP, and when the receiver there verified its first chunk.
    let (mut moved_at, mut flowing_at) = (None, None);
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        if told_at.is_none() && line.contains("UDP stopped getting through") {
            told_at = Some(began.elapsed());
        }
        if line.contains(r#""event":"connected""#) && line.contains("TLS/TCP") {
            moved_at = Some(began.elapsed());
        }
        if moved_at.is_some() && flowing_at.is_none() && line.contains(r#""event":"verified""#) {
            flowing_at = Some(began.elapsed());
        }
        let verified = line.contains(r#""event":"verified""#);
        if cut_at.is_none()
            && verified
            && lines.iter().filter(|l: &&String| l.contains(r#""event":"verified""#)).count() >= 16
        {
            host.path.faults().set_drop_udp(true);
            cut_at = Some(began.elapsed());
        }
        lines.push(line);
    }
    let status = child.wait().expect("wait");
    let took = began.elapsed();
    host.path.faults().set_drop_udp(false);
    let stderr = lines.join("\n");
    assert!(status.success(), "{what}: the copy failed:\n{stderr}");
    assert_same_file(&src, &dst);
    let cut_at = cut_at.expect("UDP was cut under the copy");
    let transports: Vec<String> = lines
        .iter()
        .filter(|l| l.contains(r#""event":"connected""#))
        .map(|l| connected(l).0)
        .collect();
    let through = if kept { " through a kept server" } else { "" };
    println!(
        "UDP dropped {cut_at:.1?} into a {} MiB {what}{through}: told at {told_at:.1?}, on TCP \
         at {moved_at:.1?}, first chunk verified there at {flowing_at:.1?}, done after \
         {took:.1?} via {transports:?}",
        BIG >> 20
    );
    assert_eq!(transports.len(), 2, "{what}: {transports:?}\n{stderr}");
    assert!(transports[0].starts_with("QUIC"), "{what}: {transports:?}");
    assert_eq!(
        transports[0].contains("the remote soku kept from the last copy"),
        kept,
        "{what}: {transports:?}"
    );
    assert!(transports[1].starts_with("TLS/TCP"), "{what}: {transports:?}");
    assert!(stderr.contains("UDP stopped getting through"), "{what}: not told why:\n{stderr}");
    // 8 s of QUIC silence (`udp_block::QUIC_SILENCE`), and a margin for a busy host.
    let told_at = told_at.expect("told");
    assert!(
        told_at < cut_at + Duration::from_secs(15),
        "{what}: told {told_at:.1?} into the copy, UDP cut at {cut_at:.1?}"
    );
    // A kept job would hold an upload's partial file until its client had been silent
    // for 15 s, 7 s after the move (`serve/silent_client.rs`): the TCP session's server nudges it
    // instead, and the data flows there within a second or two (0.6 s here; 7.7 s
    // without the nudge).
    let moved_at = moved_at.expect("moved to TCP");
    let flowing_at = flowing_at.expect("a chunk verified over TCP");
    assert!(
        flowing_at < moved_at + Duration::from_secs(4),
        "{what}: on TCP at {moved_at:.1?}, first chunk verified there at {flowing_at:.1?}"
    );
    assert!(
        took < cut_at + Duration::from_secs(30),
        "{what}: {took:.1?}, UDP cut at {cut_at:.1?}: waited as for an outage"
    );
}

/// Downloads `SIZE` bytes with `args` over `host` into a fresh local directory; the
/// stderr and the wall time.
fn download(host: &EmulatedHost, name: &str, args: &[&str]) -> (String, Duration) {
    let remote = host.dir.path().join(format!("remote-{name}"));
    std::fs::create_dir(&remote).expect("mkdir");
    let src = remote.join(name);
    write(&src, &data(SIZE, 32));
    let local = host.dir.path().join(format!("local-{name}"));
    std::fs::create_dir(&local).expect("mkdir");
    let mut cmd = host.soku_json();
    cmd.args(args).arg(host.remote(&src)).arg(&local);
    let began = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().expect("run soku");
    let took = began.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{name}: the download failed:\n{stderr}");
    assert_same_file(&src, &local.join(name));
    assert_no_part_files(&local);
    (stderr, took)
}

/// Checks that a copy started on QUIC, was told why it moved, and ended on TCP.
fn report_switch(how: &str, what: &str, stderr: &str, took: Duration, on_quic: f64) {
    let transports: Vec<String> = stderr
        .lines()
        .filter(|l| l.contains(r#""event":"connected""#))
        .map(|l| connected(l).0)
        .collect();
    let said = if how == "policed" { "rate-limited" } else { "throttled" };
    let moved = stderr.lines().find(|l| l.contains(said)).unwrap_or_default();
    println!(
        "UDP {how} to 5 %, {what}: {took:.1?} (staying on QUIC: ~{on_quic:.0} s) via {transports:?}\n  {moved}"
    );
    assert!(transports.len() == 2, "{what}: expected QUIC then TCP:\n{stderr}");
    assert!(transports[0].starts_with("QUIC"), "{what}: {transports:?}");
    assert!(transports[1].starts_with("TLS/TCP"), "{what}: {transports:?}");
    assert!(!moved.is_empty(), "{what}: the move was not explained:\n{stderr}");
}

/// The figures behind the issue's targets, on demand (they take minutes):
/// `cargo test --release -p soku --test e2e transport_e2e:: -- --ignored --nocapture`.
/// UDP policed and UDP shaped to 5 % of a 100 Mbit/s x 50 ms path: the same upload and
/// download with `auto` and held on QUIC (`--transport quic`); UDP dropped at 50, 100
/// and 200 ms: the time from the start to the first verified bytes, beside the same
/// with UDP open.
#[test]
#[ignore = "minutes; prints the figures of lab/2026-11-25-transport"]
fn transport_figures() {
    const RATE: u64 = 100_000_000;
    for how in ["policed", "shaped"] {
        let host = EmulatedHost::up("figs", Duration::from_millis(50), RATE);
        if how == "policed" {
            host.path.faults().set_udp_rate(Some(RATE / 20));
        } else {
            host.path.faults().set_udp_shape(Some(RATE / 20));
        }
        let (_, up_auto) = upload(&host, "auto-up.bin", &[]);
        let (_, up_quic) = upload(&host, "quic-up.bin", &["--transport", "quic"]);
        let (_, down_auto) = download(&host, "auto-down.bin", &[]);
        let (_, down_quic) = download(&host, "quic-down.bin", &["--transport", "quic"]);
        for (way, auto, quic) in [("upload", up_auto, up_quic), ("download", down_auto, down_quic)]
        {
            println!(
                "UDP {how} to 5 %, {way} of {} MiB: auto {:.1} s, quic {:.1} s, {:.1}x",
                SIZE >> 20,
                auto.as_secs_f64(),
                quic.as_secs_f64(),
                quic.as_secs_f64() / auto.as_secs_f64()
            );
        }
    }
    for rtt in [50, 100, 200] {
        let host = EmulatedHost::up("figs", Duration::from_millis(rtt), RATE);
        let open = first_bytes(&host, "open.bin");
        host.path.faults().set_drop_udp(true);
        let blocked = first_bytes(&host, "blocked.bin");
        println!(
            "rtt {rtt} ms: first verified bytes after {:.2} s with UDP open, {:.2} s with \
             UDP dropped: {:.2} s lost to the switch",
            open.as_secs_f64(),
            blocked.as_secs_f64(),
            (blocked.saturating_sub(open)).as_secs_f64()
        );
    }
}

/// Time from starting an upload to its first `verified` event.
fn first_bytes(host: &EmulatedHost, name: &str) -> Duration {
    use std::io::{BufRead, BufReader};
    let src = host.src().join(name);
    write(&src, &data(SIZE, 33));
    let mut cmd = host.soku_json();
    cmd.arg(&src).arg(host.remote(&host.dst()));
    let began = Instant::now();
    let mut child = cmd.stdin(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn");
    let stderr = child.stderr.take().expect("piped");
    let mut first = None;
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        if first.is_none() && line.contains(r#""event":"verified""#) {
            first = Some(began.elapsed());
        }
    }
    assert!(child.wait().expect("wait").success(), "{name} failed");
    assert_same_file(&src, &host.dst().join(name));
    first.expect("verified bytes")
}
