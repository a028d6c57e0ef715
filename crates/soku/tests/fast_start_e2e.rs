//! The data sender's controller as the user configures it, through a real sshd over the
//! project's emulator (see `common/emulated.rs`, 100 Mbit/s x 200 ms): careful resume (a
//! copy notes what the path delivered, the next copy in the same direction starts its
//! controller from it, and a memory the path no longer matches is retreated from) and
//! `--background`. Every copy is verified byte for byte.

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use common::emulated::EmulatedHost;
use common::{assert_same_file, data, write};

/// 24 MiB: about 2 s of the link.
const SIZE: usize = 24 << 20;

/// The last `path` JSON event of a copy's stderr.
fn path_event(stderr: &str) -> serde_json::Value {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.contains(r#""event":"path""#))
        .unwrap_or_else(|| panic!("no path event:\n{stderr}"));
    serde_json::from_str(line).expect("json")
}

fn upload(host: &EmulatedHost, name: &str) -> serde_json::Value {
    upload_with(host, name, &[])
}

fn upload_with(host: &EmulatedHost, name: &str, args: &[&str]) -> serde_json::Value {
    let src = host.src().join(name);
    write(&src, &data(SIZE, name.len() as u64));
    let out = host
        .soku_json()
        .args(args)
        .arg(&src)
        .arg(host.remote(&host.dst()))
        .stdin(Stdio::null())
        .output()
        .expect("run soku");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: the copy failed:\n{stderr}");
    assert_same_file(&src, &host.dst().join(name));
    let path = path_event(&stderr);
    println!("{name}: resume {} jump {} B", path["resume"], path["resume_jump"]);
    path
}

/// Downloads `src/NAME` (left there by an upload) to `dst/LOCAL` with `args`, verified.
fn download(host: &EmulatedHost, name: &str, local: &str, args: &[&str]) {
    let remote_src = host.src().join(name);
    let local = host.dst().join(local);
    let out = host
        .soku_json()
        .args(args)
        .arg(host.remote(&remote_src))
        .arg(&local)
        .stdin(Stdio::null())
        .output()
        .expect("run soku");
    assert!(out.status.success(), "download failed:\n{}", String::from_utf8_lossy(&out.stderr));
    assert_same_file(&remote_src, &local);
}

fn memory_file(host: &EmulatedHost) -> PathBuf {
    host.dst().parent().expect("test dir").join("cache").join("soku").join("paths")
}

/// The entry for `flow` (`up`, `down`): (bits/s, min RTT in microseconds).
fn entry(host: &EmulatedHost, flow: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(memory_file(host)).ok()?;
    let line = text.lines().find(|l| l.starts_with(&format!("{} {flow} ", host.sshd.host())))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    Some((words[2].parse().ok()?, words[3].parse().ok()?))
}

#[test]
fn a_second_copy_starts_from_what_the_first_learned() {
    let host = EmulatedHost::up("fast", Duration::from_millis(200), 100_000_000);

    let first = upload(&host, "first.bin");
    assert_eq!(first["resume_jump"], 0, "nothing remembered yet: {first}");
    let (bps, rtt_us) = entry(&host, "up").expect("the first upload left a memory");
    println!("remembered: {:.1} Mbit/s, {:.1} ms", bps as f64 / 1e6, rtt_us as f64 / 1e3);
    assert!((20_000_000..=105_000_000).contains(&bps), "delivered rate {bps} bit/s");
    assert!((195_000..=260_000).contains(&rtt_us), "min RTT {rtt_us} us");

    let second = upload(&host, "second.bin");
    let jump = bps / 8 * rtt_us / 1_000_000 / 2;
    assert_eq!(second["resume_jump"].as_u64(), Some(jump), "half the remembered BDP: {second}");
    assert_eq!(second["resume"], "normal", "the path carried the jump: {second}");

    // A download learns its own direction (the server's controller sends that data).
    download(&host, "first.bin", "down.bin", &[]);
    let (down_bps, _) = entry(&host, "down").expect("the download left a memory");
    assert!((20_000_000..=105_000_000).contains(&down_bps), "delivered rate {down_bps} bit/s");
    assert!(entry(&host, "up").is_some(), "the upload's entry stays");
}

/// A memory ten times the path's rate (as after moving from a fast network to a slow
/// one under the same host name): the jump is not carried, the controller retreats,
/// and the copy completes.
#[test]
fn a_memory_the_path_no_longer_matches_is_retreated_from() {
    let host = EmulatedHost::up("stale", Duration::from_millis(200), 100_000_000);
    let file = memory_file(&host);
    std::fs::create_dir_all(file.parent().expect("dir")).expect("mkdir");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    std::fs::write(&file, format!("{} up 1000000000 200000 {now}\n", host.sshd.host()))
        .expect("write memory");
    let path = upload(&host, "stale.bin");
    assert_eq!(path["resume_jump"], 12_500_000, "{path}");
    assert_eq!(path["resume"], "safe_retreat", "{path}");
    let (bps, _) = entry(&host, "up").expect("memory rewritten");
    assert!(bps <= 105_000_000, "the new memory is what the path delivered: {bps}");
}

/// `--background` reaches the controller that sends the data: ours on an upload (its
/// path event says so, and a background controller never jumps), the server's on a
/// download (through the hello; that copy must complete as well).
#[test]
fn background_copies_run_a_yielding_controller() {
    let host = EmulatedHost::up("bg", Duration::from_millis(50), 100_000_000);
    let first = upload_with(&host, "bg1.bin", &["--background"]);
    assert_eq!(first["background"], true, "{first}");
    let normal = upload(&host, "normal.bin");
    assert_eq!(normal["background"], false, "{normal}");
    let second = upload_with(&host, "bg2.bin", &["--background"]);
    assert_eq!(second["resume_jump"], 0, "background mode never jumps: {second}");

    download(&host, "bg1.bin", "bg-down.bin", &["--background"]);
}
