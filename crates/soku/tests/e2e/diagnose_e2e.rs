//! `soku diagnose` through a real sshd over the project's emulator (see
//! `common/emulated.rs`), on paths whose bottleneck the test made: the verdict must
//! name it. Each path lives in network namespaces of its own, and whatever a test
//! changes (a namespace's `net.core.rmem_max`, a blkio cgroup) it made itself and
//! removes. Needs root; skipped without it.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use soku_netem::PathSpec;

use crate::common::emulated::{is_root, EmulatedHost};
use crate::common::soku_bin;

const MBIT: u64 = 1_000_000;

/// Runs `soku diagnose --json` in namespace A against the host; the JSON object.
fn diagnose(host: &EmulatedHost, remote_soku: &Path, remote_path: &Path) -> serde_json::Value {
    let mut cmd = host.path.command_a("timeout");
    cmd.args(["-k", "5", "60"]).arg(soku_bin()).arg("diagnose");
    cmd.args(host.sshd.scp_port_args()).args(host.sshd.ssh_args());
    cmd.arg("--remote-soku").arg(remote_soku);
    cmd.arg("--remote-path").arg(remote_path);
    cmd.arg("--local-path").arg(host.src());
    cmd.arg("--json").arg(host.sshd.host());
    let out = cmd.stdin(Stdio::null()).output().expect("run soku diagnose");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "soku diagnose failed ({}):\n{stderr}\n{stdout}", out.status);
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    println!("{}", summary(&v));
    // The whole object, for the table of lab/2026-11-24-diagnose.
    println!("json: {v}");
    v
}

/// One line for the log: rates, loss, and the verdict.
fn summary(v: &serde_json::Value) -> String {
    let f = &v["facts"];
    let findings: Vec<String> = v["verdict"]["findings"]
        .as_array()
        .map(|a| a.iter().map(|x| format!("[{}] {}", x["kind"], x["text"])).collect())
        .unwrap_or_default();
    format!(
        "{:.1} s; up {} bit/s loss {} ({}), down {} bit/s; rtt ssh {} quic {}; limit {}\n  up sent {}\n  up received {}\n  {}",
        v["seconds"].as_f64().unwrap_or(0.0),
        f["upload"]["rate_bps"],
        f["upload"]["loss"],
        f["upload"]["loss_pattern"],
        f["download"]["rate_bps"],
        f["ssh_rtt_ms"],
        f["quic_rtt_ms"],
        v["verdict"]["limit"],
        f["upload"]["sent"],
        f["upload"]["received"],
        findings.join("\n  ")
    )
}

fn limit(v: &serde_json::Value) -> &str {
    v["verdict"]["limit"].as_str().unwrap_or("none")
}

fn has_finding(v: &serde_json::Value, kind: &str) -> bool {
    v["verdict"]["findings"]
        .as_array()
        .is_some_and(|a| a.iter().any(|f| f["kind"].as_str() == Some(kind)))
}

fn upload_rate(v: &serde_json::Value) -> u64 {
    v["facts"]["upload"]["rate_bps"].as_u64().unwrap_or(0)
}

/// 20 Mbit/s x 50 ms, nothing else slow: the link is the limit, at about its rate.
#[test]
fn a_slow_link_is_named_as_the_limit() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let host = EmulatedHost::up("dgslow", Duration::from_millis(50), 20 * MBIT);
    let v = diagnose(&host, &soku_bin(), &host.dst());
    assert_eq!(limit(&v), "link", "{}", summary(&v));
    let rate = upload_rate(&v);
    assert!((14 * MBIT..=21 * MBIT).contains(&rate), "upload rate {rate}");
    let rtt = v["facts"]["quic_rtt_ms"].as_f64().expect("quic rtt");
    assert!((45.0..80.0).contains(&rtt), "quic rtt {rtt}");
    assert!(v["facts"]["ssh_rtt_ms"].as_f64().is_some_and(|ms| ms >= 45.0), "ssh rtt");
    assert!(v["facts"]["mtu"].as_u64().is_some_and(|m| m >= 1200), "mtu");
    assert_eq!(v["facts"]["udp"], true);
    assert_eq!(v["facts"]["tcp"], true);
    let text = v["verdict"]["findings"][0]["text"].as_str().unwrap_or("");
    assert!(text.starts_with("the link is the limit"), "{text}");
    // A path that keeps order: the tags say so.
    for dir in ["upload", "download"] {
        let share = v["facts"][dir]["reordering"].as_f64();
        assert!(share.is_some_and(|r| r < 0.002), "{dir} reordering {share:?}");
    }
    assert!(!has_finding(&v, "reordering"), "{}", summary(&v));
}

/// 100 Mbit/s x 50 ms with 1 % random loss each way: the loss is found, called random,
/// and scp's estimate falls far below soku's.
#[test]
fn random_loss_is_named_as_random() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let spec = PathSpec::symmetric(Duration::from_millis(50), 0.01, Some(100 * MBIT));
    let host = EmulatedHost::up_with("dgloss", spec);
    let v = diagnose(&host, &soku_bin(), &host.dst());
    // The loss while no queue stood: the start-up's queue losses come on top of it.
    let loss = v["facts"]["upload"]["random_loss"].as_f64().expect("loss");
    assert!((0.004..0.02).contains(&loss), "upload random loss {loss}");
    assert!(has_finding(&v, "random_loss"), "{}", summary(&v));
    assert!(!has_finding(&v, "queue_loss"), "{}", summary(&v));
    let soku = v["verdict"]["soku_bps"].as_u64().expect("soku estimate");
    let scp = v["verdict"]["scp_bps"].as_u64().expect("scp estimate");
    assert!(scp * 4 < soku, "scp {scp} vs soku {soku}");
}

/// The UDP buffer caps as each host has them, with the far soku run as `nobody` (root
/// forces its buffers past the cap, `soku-transport/src/socket.rs`): the far side
/// reports its namespace's `net.core.rmem_max` and a socket buffer held to it, the near
/// side (root) the forced 32 MiB. (A small cap cannot be made for this test: on this
/// kernel `net.core.rmem_max` is visible in a network namespace but refuses writes
/// there with EINVAL, and the host's own must not change. The verdict on an
/// overflowing buffer is tested on made-up facts in `src/diagnose/verdict.rs`.)
#[test]
fn udp_buffer_caps_are_reported_per_host() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let host = EmulatedHost::up("dgbuf", Duration::from_millis(20), 100 * MBIT);
    let cap = host.path.command_b("cat").arg("/proc/sys/net/core/rmem_max").output().expect("cat");
    let cap: u64 = String::from_utf8_lossy(&cap.stdout).trim().parse().expect("a number");
    let (dir, wrapper) = unprivileged_soku();
    let v = diagnose(&host, &wrapper, dir.path());
    let remote = &v["facts"]["remote"]["facts"];
    assert_eq!(remote["rmem_max"], cap);
    let got = remote["udp_recv_buffer"].as_u64().expect("remote buffer");
    // Linux reports twice the size it was asked for, the cap included.
    assert!(got <= 2 * cap, "nobody's socket got {got}, above the cap {cap}");
    let local = v["facts"]["local"]["facts"]["udp_recv_buffer"].as_u64().expect("local buffer");
    assert_eq!(local, 64 << 20, "root's forced 32 MiB, reported doubled");
    assert_eq!(limit(&v), "link", "{}", summary(&v));
}

/// A directory `nobody` may write, and a script in it that runs soku as `nobody`.
fn unprivileged_soku() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new().prefix("soku-dg-").tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let wrapper = dir.path().join("soku-as-nobody");
    let script = format!(
        "#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups -- {} \"$@\"\n",
        soku_bin().display()
    );
    std::fs::write(&wrapper, script).expect("write wrapper");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (dir, wrapper)
}

/// The far sshd (and so the far soku) in a blkio cgroup that writes at 5 MB/s to the
/// target's device, on a 100 Mbit/s path: the remote disk is the limit.
#[test]
fn a_slow_remote_disk_is_named_as_the_limit() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let host = EmulatedHost::up("dgdisk", Duration::from_millis(20), 100 * MBIT);
    let Some(cgroup) = ThrottledCgroup::new(&host.dst(), 5_000_000) else {
        eprintln!("skipped: no blkio throttling for the target's device here");
        return;
    };
    cgroup.add(host.sshd.pid());
    let v = diagnose(&host, &soku_bin(), &host.dst());
    assert_eq!(limit(&v), "remote_disk", "{}", summary(&v));
    let speed = v["facts"]["remote"]["facts"]["disk"]["bytes_per_sec"].as_u64().expect("speed");
    assert!((2_000_000..=7_000_000).contains(&speed), "remote write speed {speed}");
    drop(host);
    drop(cgroup);
}

/// A cgroup (v1 blkio) of our own whose members write to one device at a set rate.
/// Writes a task flushes itself (as the disk test and soku's receiver do) are charged
/// to it; removed on drop, its remaining members moved back to the root group.
struct ThrottledCgroup {
    dir: PathBuf,
}

impl ThrottledCgroup {
    fn new(on: &Path, bytes_per_sec: u64) -> Option<ThrottledCgroup> {
        let root = Path::new("/sys/fs/cgroup/blkio");
        if !root.join("blkio.throttle.write_bps_device").exists() {
            return None;
        }
        let dev = std::fs::metadata(on).ok()?.dev();
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        // Only a real block device can be throttled (not tmpfs or overlay).
        if !Path::new(&format!("/sys/dev/block/{major}:{minor}")).exists() {
            return None;
        }
        let dir = root.join(format!("soku-dg-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let group = ThrottledCgroup { dir };
        let rule = format!("{major}:{minor} {bytes_per_sec}");
        std::fs::write(group.dir.join("blkio.throttle.write_bps_device"), rule).ok()?;
        Some(group)
    }

    fn add(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).expect("join cgroup");
    }
}

impl Drop for ThrottledCgroup {
    fn drop(&mut self) {
        let root = Path::new("/sys/fs/cgroup/blkio/cgroup.procs");
        // Bounded: a few tries while the last members exit.
        for _ in 0..50 {
            if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
                for pid in procs.split_whitespace() {
                    let _ = std::fs::write(root, pid);
                }
            }
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("could not remove {}", self.dir.display());
    }
}

/// A firewall that drops all UDP: the verdict says so, and that soku will use TCP.
#[test]
fn blocked_udp_is_named_and_tcp_offered() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let host = EmulatedHost::up("dgnoudp", Duration::from_millis(20), 100 * MBIT);
    host.path.faults().set_drop_udp(true);
    let v = diagnose(&host, &soku_bin(), &host.dst());
    assert_eq!(limit(&v), "udp_blocked", "{}", summary(&v));
    assert_eq!(v["facts"]["udp"], false);
    assert_eq!(v["facts"]["tcp"], true);
    let text = v["verdict"]["findings"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("UDP is blocked") && text.contains("TLS over TCP"), "{text}");
}

/// 100 Mbit/s x 20 ms where 3 % of the packets toward the host are held back 3 ms (so
/// later ones overtake them) and none the other way: the probe's tags find the
/// reordering in the upload's direction only, and the verdict says so.
#[test]
fn reordering_is_found_in_its_direction() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let mut spec = PathSpec::symmetric(Duration::from_millis(20), 0.0, Some(100 * MBIT));
    spec.a_to_b.reorder = 0.03;
    spec.a_to_b.reorder_delay = Duration::from_millis(3);
    let host = EmulatedHost::up_with("dgreorder", spec);
    let v = diagnose(&host, &soku_bin(), &host.dst());
    let share = |dir: &str| v["facts"][dir]["reordering"].as_f64();
    let (up, down) = (share("upload"), share("download"));
    println!("reordered: upload {up:?}, download {down:?}");
    assert!(up.is_some_and(|r| (0.01..0.06).contains(&r)), "upload reordering {up:?}");
    assert!(down.is_some_and(|r| r < 0.002), "download reordering {down:?}");
    let tags = v["facts"]["upload"]["received"]["tags"].as_u64().unwrap_or(0);
    assert!(tags >= 1000, "tags received {tags}");
    assert!(has_finding(&v, "reordering"), "{}", summary(&v));
    let text = v["verdict"]["findings"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["kind"] == "reordering"))
        .and_then(|f| f["text"].as_str())
        .unwrap_or("");
    assert!(text.starts_with("this host →"), "{text}");
    // QUIC takes packets overtaken by three others for lost; the tags, never resent,
    // show they arrived: no loss finding for the direction that reorders and loses
    // nothing. The other direction is not asserted on here: with the whole suite
    // sharing two cores, QUIC once declared 0.4 % of it lost while its tags showed
    // 0.04 % missing (acknowledgements came late), and the verdict named random loss
    // there. That the verdict counts QUIC's declared losses, not the tags, when nothing
    // reorders is a weakness of its own, left open.
    let tag_loss = v["facts"]["upload"]["tag_loss"].as_f64();
    assert!(tag_loss.is_some_and(|t| t < 0.005), "upload tag loss {tag_loss:?}");
    let upload_loss_finding = v["verdict"]["findings"].as_array().is_some_and(|a| {
        a.iter().any(|f| {
            f["kind"] == "random_loss"
                && f["text"].as_str().is_some_and(|t| t.contains("this host →"))
        })
    });
    assert!(!upload_loss_finding, "{}", summary(&v));
    assert_eq!(limit(&v), "link", "{}", summary(&v));
}
