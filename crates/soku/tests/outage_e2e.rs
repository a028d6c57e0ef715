//! Outages on an emulated path (see `common/emulated.rs`): a copy over 100 Mbit/s x 50 ms
//! survives a 10 s outage on its own connection, and a 60 s one by reconnecting and
//! resuming; one past the idle timeout (70 s) reconnects for sure, and its summary
//! counts what the first connection sent as sent, not as already at the target. Each
//! prints its figures (time, reconnects, bytes already there and sent).

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::emulated::EmulatedHost;
use common::procs::{bytes_of, summary};
use common::{assert_no_part_files, assert_same_file, data, write};

/// 40 MiB: about 4 s of the link.
const SIZE: usize = 40 << 20;

/// An upload of `SIZE` bytes with the whole path dropped from `start` for `length` after
/// the copy began. Returns the copy's stderr (JSON lines) and how long it took.
fn upload_through_outage(tag: &str, start: Duration, length: Duration) -> (String, Duration) {
    let host = EmulatedHost::up(tag, Duration::from_millis(50), 100_000_000);
    let src = host.src().join("src.bin");
    write(&src, &data(SIZE, 21));
    let mut cmd = host.soku_json();
    cmd.arg(&src).arg(host.remote(&host.dst()));
    let began = Instant::now();
    let mut child = cmd.stdin(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn soku");
    let stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            all.push_str(&format!("{:.1} {line}\n", began.elapsed().as_secs_f64()));
        }
        all
    });
    let faults = host.path.faults();
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
            panic!("no end within 120 s after the outage:\n{}", reader.join().unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = began.elapsed();
    let stderr = reader.join().expect("reader");
    assert!(status.success(), "the copy failed ({status}):\n{stderr}");
    assert_same_file(&src, &host.dst().join("src.bin"));
    assert_no_part_files(&host.dst());
    (stderr, took)
}

/// The JSON of each line, without the time stamp `upload_through_outage` puts first.
fn json_lines(stderr: &str) -> String {
    stderr
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(_, json)| json))
        .collect::<Vec<_>>()
        .join("\n")
}

fn report(what: &str, stderr: &str, took: Duration, outage_end: Duration) {
    let reconnects: Vec<&str> =
        stderr.lines().filter(|l| l.contains(r#""event":"reconnecting""#)).collect();
    let (bytes, resumed) = summary(&json_lines(stderr)).expect("a summary");
    eprintln!(
        "{what}: done in {:.1} s, {:.1} s after the path came back; {} reconnect(s); {:.1} MiB \
         already at the target, {:.1} MiB sent",
        took.as_secs_f64(),
        (took - outage_end).as_secs_f64(),
        reconnects.len(),
        resumed as f64 / 1048576.0,
        (bytes - resumed) as f64 / 1048576.0
    );
    for line in reconnects {
        eprintln!("  {line}");
    }
}

#[test]
fn a_ten_second_outage_mid_copy_is_ridden_out() {
    let (start, length) = (Duration::from_secs(2), Duration::from_secs(10));
    let (stderr, took) = upload_through_outage("ten", start, length);
    report("10 s outage", &stderr, took, start + length);
    assert!(!stderr.contains("reconnecting"), "no reconnect needed:\n{stderr}");
}

#[test]
fn a_sixty_second_outage_mid_copy_is_survived_by_reconnecting() {
    let (start, length) = (Duration::from_secs(2), Duration::from_secs(60));
    let (stderr, took) = upload_through_outage("sixty", start, length);
    report("60 s outage", &stderr, took, start + length);
    // It finished: by riding the outage out or by reconnecting, resuming either way; the
    // target held nothing when the command started, so nothing was already there.
    let (bytes, resumed) = summary(&json_lines(&stderr)).expect("a summary");
    assert!(resumed == 0 && bytes == SIZE as u64, "the whole file sent:\n{stderr}");
}

/// The bytes the receiver had verified when the copy first reconnected.
fn verified_before_reconnecting(stderr: &str) -> Option<u64> {
    let mut verified = 0;
    for line in json_lines(stderr).lines() {
        if line.contains(r#""event":"reconnecting""#) {
            return Some(verified);
        }
        verified = bytes_of(line, "verified").unwrap_or(verified);
    }
    None
}

/// Past QUIC's idle timeout (60 s) the connection is lost: the copy logs in again and
/// resumes from what the first connection left verified. The summary is the command's:
/// nothing was at the target when it started, so `resumed_bytes` is 0 and the whole
/// file counts as sent (the last connection's own figure called the first one's bytes
/// "resumed").
#[test]
fn a_reconnected_copy_counts_what_it_sent_before_as_sent() {
    let (start, length) = (Duration::from_secs(2), Duration::from_secs(70));
    let (stderr, took) = upload_through_outage("resent", start, length);
    report("70 s outage", &stderr, took, start + length);
    let before = verified_before_reconnecting(&stderr).expect("a reconnect");
    assert!(before > 0, "the first connection verified nothing:\n{stderr}");
    let (bytes, resumed) = summary(&json_lines(&stderr)).expect("a summary");
    eprintln!("verified before the reconnect {before}; finished: {bytes} bytes, {resumed} resumed");
    assert_eq!(bytes, SIZE as u64);
    assert_eq!(resumed, 0, "nothing was at the target when the command started:\n{stderr}");
}
