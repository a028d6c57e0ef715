//! Many copies at once against one server, over an emulated 100 Mbit/s x 20 ms path
//! (see `common/emulated.rs`): four uploads and four downloads started together, each
//! its own `soku` with its own ssh login, `soku serve` and QUIC connection. All must
//! arrive intact, and the copies sharing a direction must share it within 20 % of each
//! other: each one's rate over the time all of them were running (from the last one's
//! first verified bytes to the first one's end), the fastest against the slowest. Copies
//! that shared only their min RTT (`soku_cc::shared`) were 9-28 % apart (26 of 30
//! figures within 20 %); holding each window near the others' mean share
//! (`soku_cc::ensemble`) brought them to a few per cent (see
//! `lab/2026-11-25-many-at-once`). Every copy must stay on QUIC: a full shared
//! queue is not a UDP rate limit.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::emulated::EmulatedHost;
use crate::common::{assert_no_part_files, assert_same_file, data, write};

/// 64 MiB each: four of them fill one direction of the link for about 22 s, long enough
/// for the flows to converge to their shares.
const SIZE: usize = 64 << 20;
const EACH_WAY: usize = 4;

/// (seconds since the start, verified bytes) of one copy.
type Samples = Vec<(f64, u64)>;

/// What a copy's stderr said: its progress, and every transport it connected over.
struct Said {
    samples: Samples,
    transports: Vec<String>,
}

#[test]
fn eight_copies_at_once_in_both_directions_all_arrive_intact() {
    let host = EmulatedHost::up("many", Duration::from_millis(20), 100_000_000);
    let remote_dir = host.dir.path().join("remote");
    std::fs::create_dir(&remote_dir).expect("mkdir");
    let mut copies: Vec<(&str, usize, Child, JoinHandle<Said>)> = Vec::new();
    for n in 0..EACH_WAY {
        let up = host.src().join(format!("up{n}.bin"));
        write(&up, &data(SIZE, 100 + n as u64));
        let down = remote_dir.join(format!("down{n}.bin"));
        write(&down, &data(SIZE, 200 + n as u64));
    }
    let t0 = Instant::now();
    for n in 0..EACH_WAY {
        for way in ["upload", "download"] {
            let mut cmd = host.soku_json();
            if way == "upload" {
                cmd.arg(host.src().join(format!("up{n}.bin"))).arg(host.remote(&host.dst()));
            } else {
                cmd.arg(host.remote(&remote_dir.join(format!("down{n}.bin")))).arg(host.dst());
            }
            let mut child = cmd.stdin(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn");
            let stderr = child.stderr.take().expect("piped");
            // SOKU_MANY_TRACE=DIR keeps each copy's events, stamped, for a look at how
            // the copies' controllers behaved (`DIR/upload-0.jsonl`, ...).
            let keep = std::env::var_os("SOKU_MANY_TRACE")
                .map(|dir| std::path::PathBuf::from(dir).join(format!("{way}-{n}.jsonl")));
            let reader = std::thread::spawn(move || progress(stderr, t0, keep));
            copies.push((way, n, child, reader));
        }
    }
    let mut runs: Vec<(&str, usize, Samples)> = Vec::new();
    for (way, n, mut child, reader) in copies {
        let status = child.wait().expect("wait");
        let said = reader.join().expect("reader");
        assert!(status.success(), "{way} {n} failed");
        // UDP is open and unpoliced here: a full shared queue must not look like a
        // rate limit (see `policing.rs`) and move a copy to TCP.
        assert!(
            said.transports.iter().all(|t| t.starts_with("QUIC")),
            "{way} {n} left QUIC: {:?}",
            said.transports
        );
        runs.push((way, n, said.samples));
    }
    for n in 0..EACH_WAY {
        assert_same_file(
            &host.src().join(format!("up{n}.bin")),
            &host.dst().join(format!("up{n}.bin")),
        );
        let name = format!("down{n}.bin");
        assert_same_file(&remote_dir.join(&name), &host.dst().join(&name));
    }
    assert_no_part_files(&host.dst());
    for way in ["upload", "download"] {
        let of: Vec<&Vec<(f64, u64)>> = runs.iter().filter(|r| r.0 == way).map(|r| &r.2).collect();
        // All running: from the last copy's first verified bytes to the first one's end.
        let start = of.iter().map(|s| s.first().map_or(f64::MAX, |p| p.0)).fold(0.0, f64::max);
        let end = of
            .iter()
            .map(|s| s.iter().find(|p| p.1 >= SIZE as u64).map_or(f64::MAX, |p| p.0))
            .fold(f64::MAX, f64::min);
        for s in &of {
            let first = s.first().map_or(-1.0, |p| p.0);
            let done = s.iter().find(|p| p.1 >= SIZE as u64).map_or(-1.0, |p| p.0);
            eprintln!("  {way}: first verified at {first:.1} s, all at {done:.1} s");
        }
        assert!(end - start >= 2.0, "{way}s overlapped only {:.1} s", end - start);
        let rates: Vec<f64> = of
            .iter()
            .map(|s| (at(s, end) - at(s, start)) as f64 * 8.0 / (end - start) / 1e6)
            .collect();
        let mean = rates.iter().sum::<f64>() / rates.len() as f64;
        eprintln!(
            "{way}s, all running {start:.1}-{end:.1} s: {} Mbit/s (mean {mean:.1}, sum {:.1})",
            rates.iter().map(|r| format!("{r:.1}")).collect::<Vec<_>>().join(", "),
            rates.iter().sum::<f64>()
        );
        let worst = rates.iter().map(|r| (r - mean).abs() / mean).fold(0.0, f64::max);
        eprintln!("  {way}s: the furthest from the mean is {:.0} % off it", worst * 100.0);
        let (fastest, slowest) =
            rates.iter().fold((0.0f64, f64::MAX), |(hi, lo), r| (hi.max(*r), lo.min(*r)));
        eprintln!(
            "  {way}s: the fastest is {:.0} % above the slowest",
            (fastest / slowest - 1.0) * 100.0
        );
        assert!(rates.iter().all(|r| *r > 0.0), "every {way} made progress while all ran");
        assert!(
            fastest <= 1.2 * slowest,
            "the fastest {way} was {:.0} % above the slowest",
            (fastest / slowest - 1.0) * 100.0
        );
    }
}

/// (seconds since `t0`, verified bytes) of each `verified` event of a copy's stderr,
/// and the transport of each `connected` event, with its reason when it has one; every
/// line also to `keep`, stamped, if given.
fn progress(stderr: std::process::ChildStderr, t0: Instant, keep: Option<PathBuf>) -> Said {
    let mut said = Said { samples: Vec::new(), transports: Vec::new() };
    let mut kept = keep.map(|path| std::fs::File::create(path).expect("trace file"));
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        if let Some(file) = kept.as_mut() {
            writeln!(file, "{:.3} {line}", t0.elapsed().as_secs_f64()).expect("trace write");
        }
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        if v["event"] == "verified" {
            if let Some(bytes) = v["bytes"].as_u64() {
                said.samples.push((t0.elapsed().as_secs_f64(), bytes));
            }
        }
        if v["event"] == "connected" {
            let mut transport = v["transport"].as_str().unwrap_or_default().to_string();
            // Why a copy moved (the policing watch's figures), for the failure message.
            if let Some(reason) = v["reason"].as_str() {
                transport = format!("{transport} because {reason}");
            }
            said.transports.push(transport);
        }
    }
    said
}

/// Verified bytes at time `t` (the last sample at or before it).
fn at(samples: &[(f64, u64)], t: f64) -> u64 {
    samples.iter().take_while(|p| p.0 <= t).last().map_or(0, |p| p.1)
}
