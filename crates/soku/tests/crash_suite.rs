//! The crash suite: kill -9 of the client, of `soku serve` or of ssh at random points of
//! an upload or a download through a real sshd, many times, then check that the copy
//! completes (by itself after a reconnect, or by running it again) with identical
//! bytes, and that what is sent again is only what was not yet verified at the kill (on
//! a rerun; a copy that recovered alone reports its whole command, which started with
//! nothing at the target: nothing resumed).
//!
//! Ignored by default (it takes minutes); run it with
//! `cargo test --release -p soku --test crash_suite -- --ignored --nocapture`
//! (`SOKU_CRASH_TRIALS`, default 20 per victim; `SOKU_CRASH_CSV` writes the figures).
//! `resume_e2e.rs` runs one trial of each kind in every test run.

mod common;

use std::fmt::Write as _;
use std::process::{Command, Stdio};

use common::procs::{kill_when_verified, soku_serve, ssh_of, summary};
use common::{assert_same_file, data, soku_bin, write, Env};

/// 32 MiB at 80 Mbit/s: about 3.5 s per copy.
const SIZE: u64 = 32 << 20;
const LIMIT_KBPS: &str = "80000";
/// The sender's chunks in flight at most (QUIC: 48 MiB of window, 64 chunks of 1 MiB).
const CHUNK: u64 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Victim {
    Client,
    Serve,
    Ssh,
}

/// splitmix64: reproducible kill points per seed.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Trial {
    victim: Victim,
    download: bool,
    kill_at: u64,
    verified: u64,
    recovered_alone: bool,
    resumed: u64,
    sent_after: u64,
}

fn soku_json(env: &Env) -> Command {
    let mut cmd = Command::new(soku_bin());
    cmd.args(env.sshd.scp_port_args()).args(env.sshd.ssh_args());
    cmd.arg("--remote-soku").arg(soku_bin()).arg("--json");
    cmd.env("XDG_CACHE_HOME", env.path("cache"));
    cmd
}

fn trial(victim: Victim, download: bool, seed: u64) -> Trial {
    let env = Env::new();
    let src = env.src().join("big.bin");
    write(&src, &data(SIZE as usize, seed));
    let copy = |limited: bool| {
        let mut cmd = soku_json(&env);
        if limited {
            cmd.args(["-l", LIMIT_KBPS]);
        }
        if download {
            cmd.arg(env.remote(&src)).arg(env.dst());
        } else {
            cmd.arg(&src).arg(env.remote(&env.dst()));
        }
        cmd
    };
    // Anywhere from 5 % to 95 % of the file.
    let kill_at = SIZE / 20 + mix(seed) % (SIZE * 9 / 10);
    let sshd = env.sshd.pid();
    let killed = kill_when_verified(copy(true), kill_at, |client| match victim {
        Victim::Client => client,
        Victim::Serve => soku_serve(sshd),
        Victim::Ssh => ssh_of(client),
    });
    let (bytes, resumed) = if killed.ok {
        summary(&killed.stderr).expect("a summary")
    } else {
        let out = env.ok(copy(false).stdin(Stdio::null()));
        summary(&String::from_utf8_lossy(&out.stderr)).expect("a summary")
    };
    let target = env.dst().join("big.bin");
    assert_same_file(&src, &target);
    assert_eq!(bytes, SIZE);
    Trial {
        victim,
        download,
        kill_at,
        verified: killed.verified_at_kill,
        recovered_alone: killed.ok,
        resumed,
        sent_after: bytes - resumed,
    }
}

#[test]
#[ignore = "minutes long: run with --ignored (see the module doc)"]
fn kill_nine_at_random_points() {
    let trials: u64 =
        std::env::var("SOKU_CRASH_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let mut csv = String::from(
        "victim,direction,kill_at_bytes,verified_at_kill,recovered_alone,resumed_bytes,sent_after_kill,sent_again_of_verified\n",
    );
    let mut results = Vec::new();
    for (v, victim) in [Victim::Client, Victim::Serve, Victim::Ssh].into_iter().enumerate() {
        for n in 0..trials {
            // The client is killed in uploads and downloads alike; ssh and serve in
            // uploads and downloads in turn.
            let download = n % 2 == 1;
            let t = trial(victim, download, 1000 * (v as u64 + 1) + n);
            // A copy that recovered alone reports its whole command: what it sent after
            // the kill is not told apart (the columns are left empty).
            let (after, again) = if t.recovered_alone {
                (String::new(), String::new())
            } else {
                (t.sent_after.to_string(), t.verified.saturating_sub(t.resumed).to_string())
            };
            let _ = writeln!(
                csv,
                "{:?},{},{},{},{},{},{after},{again}",
                t.victim,
                if t.download { "download" } else { "upload" },
                t.kill_at,
                t.verified,
                t.recovered_alone,
                t.resumed,
            );
            results.push(t);
        }
    }
    if let Ok(path) = std::env::var("SOKU_CRASH_CSV") {
        std::fs::write(path, &csv).expect("write csv");
    }
    eprintln!("{csv}");
    for victim in [Victim::Client, Victim::Serve, Victim::Ssh] {
        let of: Vec<&Trial> = results.iter().filter(|t| t.victim == victim).collect();
        let alone = of.iter().filter(|t| t.recovered_alone).count();
        let reruns: Vec<&&Trial> = of.iter().filter(|t| !t.recovered_alone).collect();
        let worst = reruns.iter().map(|t| t.verified.saturating_sub(t.resumed)).max().unwrap_or(0);
        let unverified: u64 = reruns.iter().map(|t| SIZE - t.verified).sum();
        let sent: u64 = reruns.iter().map(|t| t.sent_after).sum();
        eprintln!(
            "{victim:?}: {} trials, {alone} recovered without a rerun, identical bytes in all; \
             reruns sent {:.1} MiB of {:.1} MiB unverified at the kill; worst \
             verified-but-sent-again {worst} bytes",
            of.len(),
            sent as f64 / CHUNK as f64,
            unverified as f64 / CHUNK as f64,
        );
    }
    for t in &results {
        if t.recovered_alone {
            // One command from start to end: all of it sent during it.
            assert_eq!(t.resumed, 0, "{:?}: a fresh copy reported resumed bytes", t.victim);
            continue;
        }
        // What was verified before the kill is held by the next run.
        assert!(
            t.resumed >= t.verified,
            "{:?}: held {} < verified {}",
            t.victim,
            t.resumed,
            t.verified
        );
    }
}
