//! Resume end to end, through a real sshd on loopback. A copy whose client is killed
//! with SIGKILL midway and is run again completes with identical bytes, the second run
//! sending only what the first did not leave verified at the target. When `soku serve`
//! or ssh is killed instead, the client notices at once, logs in again by itself and
//! resumes the same way; its summary, for the whole command, counts what the first
//! connection sent as sent, not as already there. (`crash_suite.rs` repeats this at
//! random points, many times.)

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::procs::{kill_when_verified, signal_when_verified, soku_serve, ssh_of, summary};
use crate::common::{
    assert_no_part_files, assert_same_file, assert_same_tree, data, listing, soku_bin, write, Env,
};

/// 24 MiB at `-l 40000` (40 Mbit/s, 5 MB/s): about five seconds, long enough to stop
/// at half way on a loaded machine.
const SIZE: usize = 24 << 20;
const LIMIT_KBPS: &str = "40000";
const HALF: u64 = SIZE as u64 / 2;

/// `soku --json` reaching the test sshd, unbounded (the test bounds and kills it).
fn soku_json(env: &Env) -> Command {
    let mut cmd = Command::new(soku_bin());
    cmd.args(env.sshd.scp_port_args()).args(env.sshd.ssh_args());
    cmd.arg("--remote-soku").arg(soku_bin()).arg("--json");
    cmd.env("XDG_CACHE_HOME", env.path("cache"));
    cmd
}

fn upload(env: &Env, src: &Path, limited: bool) -> Command {
    let mut cmd = soku_json(env);
    if limited {
        cmd.args(["-l", LIMIT_KBPS]);
    }
    cmd.arg(src).arg(env.remote(&env.dst()));
    cmd
}

/// Runs the copy again to completion; returns (bytes, resumed bytes) of its summary.
fn finish(env: &Env, mut cmd: Command) -> (u64, u64) {
    let out = env.ok(cmd.stdin(Stdio::null()));
    summary(&String::from_utf8_lossy(&out.stderr)).expect("a summary")
}

/// Killed at `verified` bytes: the rest is sent, and nothing verified is sent again.
fn check_resumed(verified: u64, (bytes, resumed): (u64, u64)) {
    assert_eq!(bytes, SIZE as u64);
    assert!(resumed >= verified, "held {resumed} of the {verified} verified before the kill");
    assert!(bytes - resumed <= bytes - verified, "sent again beyond what was unverified");
}

#[test]
fn an_upload_killed_at_the_client_resumes_where_it_stopped() {
    let env = Env::new();
    let src = env.src().join("big.bin");
    write(&src, &data(SIZE, 11));
    let killed = kill_when_verified(upload(&env, &src, true), HALF, |client| client);
    assert!(!killed.ok, "killed");
    assert!(!env.dst().join("big.bin").exists(), "nothing at the final name");
    check_resumed(killed.verified_at_kill, finish(&env, upload(&env, &src, false)));
    assert_same_file(&src, &env.dst().join("big.bin"));
    assert_no_part_files(&env.dst());
}

#[test]
fn a_download_killed_at_the_client_resumes_where_it_stopped() {
    let env = Env::new();
    let src = env.src().join("big.bin");
    write(&src, &data(SIZE, 12));
    let download = |limited: bool| {
        let mut cmd = soku_json(&env);
        if limited {
            cmd.args(["-l", LIMIT_KBPS]);
        }
        cmd.arg(env.remote(&src)).arg(env.dst());
        cmd
    };
    let killed = kill_when_verified(download(true), HALF, |client| client);
    assert!(!killed.ok, "killed");
    check_resumed(killed.verified_at_kill, finish(&env, download(false)));
    assert_same_file(&src, &env.dst().join("big.bin"));
    assert_no_part_files(&env.dst());
}

/// Kills the process `victim` picks in an upload at half way: the client reconnects by
/// itself and completes. The target held nothing when the command started, so its
/// summary says nothing was already there, all sent: the half the first connection
/// sent, found held by the second, is not "resumed" (it was, before the fix).
fn survives_the_loss_of(env: &Env, src: &Path, victim: impl FnOnce(u32) -> u32) {
    let killed = kill_when_verified(upload(env, src, true), HALF, victim);
    assert!(killed.ok, "the copy did not survive:\n{}", killed.stderr);
    assert!(killed.stderr.contains(r#""event":"reconnecting""#), "{}", killed.stderr);
    let (bytes, resumed) = summary(&killed.stderr).expect("a summary");
    eprintln!(
        "reconnected after {} bytes verified: finished with {bytes} bytes, {resumed} resumed",
        killed.verified_at_kill
    );
    assert_eq!(bytes, SIZE as u64);
    assert_eq!(resumed, 0, "a fresh copy: nothing was at the target when it started");
    assert_same_file(src, &env.dst().join("big.bin"));
    assert_no_part_files(&env.dst());
}

#[test]
fn an_upload_whose_server_was_killed_reconnects_and_resumes() {
    let env = Env::new();
    let src = env.src().join("big.bin");
    write(&src, &data(SIZE, 13));
    let sshd = env.sshd.pid();
    survives_the_loss_of(&env, &src, |_| soku_serve(sshd));
}

#[test]
fn an_upload_whose_ssh_was_killed_reconnects_and_resumes() {
    let env = Env::new();
    let src = env.src().join("big.bin");
    write(&src, &data(SIZE, 14));
    survives_the_loss_of(&env, &src, ssh_of);
}

/// The receive preview (`crates/soku/src/client/preview.rs`): a copy into a name where nothing
/// is runs without held reports, and the same copy again, onto the complete file it
/// left, is told that the file is held and sends none of it. Both ways.
#[test]
fn a_copy_again_onto_its_own_result_finds_it_held_both_ways() {
    let env = Env::new();
    let src = env.src().join("f.bin");
    write(&src, &data(SIZE, 15));
    let target = env.dst().join("f.bin");
    let up = || {
        let mut cmd = soku_json(&env);
        cmd.arg(&src).arg(env.remote(&env.dst()));
        cmd
    };
    assert_eq!(finish(&env, up()), (SIZE as u64, 0), "into an empty directory");
    assert_same_file(&src, &target);
    assert_eq!(finish(&env, up()), (SIZE as u64, SIZE as u64), "onto its own result");
    assert_same_file(&src, &target);

    let local = env.path("down");
    std::fs::create_dir_all(&local).expect("mkdir");
    let down = || {
        let mut cmd = soku_json(&env);
        cmd.arg(env.remote(&target)).arg(&local);
        cmd
    };
    assert_eq!(finish(&env, down()), (SIZE as u64, 0), "into an empty directory");
    assert_same_file(&src, &local.join("f.bin"));
    assert_eq!(finish(&env, down()), (SIZE as u64, SIZE as u64), "onto its own result");
    assert_same_file(&src, &local.join("f.bin"));
    assert_no_part_files(&env.dst());
    assert_no_part_files(&local);
}

/// `soku -r src host:rr` with no `rr`, interrupted with Ctrl-C (SIGINT) half way through
/// its large file, then the same command again: the second run continues in `rr`, as
/// the first laid it out (`src`'s entries in `rr`, not in `rr/src`, which scp's rule for
/// a target that now exists would give), from the partial file the first left; once
/// complete, nothing of soku's is left in it (`.soku-part`, the mark of an unfinished
/// copy's directory, included), and the next copy to `rr` goes inside it, by scp's rule.
/// Both ways.
#[test]
fn a_tree_interrupted_into_a_new_name_resumes_there_both_ways() {
    let env = Env::new();
    let src = env.src().join("src");
    write(&src.join("a.txt"), b"first");
    write(&src.join("mid.bin"), &data(SIZE, 16));
    write(&src.join("sub/z.txt"), b"last!!");
    let copy = |from: String, to: String, limited: bool| {
        let mut cmd = soku_json(&env);
        if limited {
            cmd.args(["-l", LIMIT_KBPS]);
        }
        cmd.arg("-r").arg(from).arg(to);
        cmd
    };
    let up = env.dst().join("rr");
    let down = env.path("rr-down");
    let ways = [
        ("upload", src.display().to_string(), env.remote(&up), &up),
        ("download", env.remote(&src), down.display().to_string(), &down),
    ];
    for (way, from, to, rr) in ways {
        let (cut, _) =
            signal_when_verified(copy(from.clone(), to.clone(), true), HALF, "-INT", |c| c);
        assert!(!cut.ok, "{way}: interrupted");
        let (bytes, resumed) = finish(&env, copy(from.clone(), to.clone(), false));
        eprintln!(
            "{way}: interrupted at {} bytes; again: {bytes} bytes, {resumed} resumed",
            cut.verified_at_kill
        );
        assert_eq!(listing(rr), listing(&src), "{way}: the first run's layout");
        assert_same_tree(&src, rr);
        assert_no_part_files(rr);
        assert!(resumed >= HALF / 2, "{way}: the partial file was continued ({resumed} held)");
        // Complete: the next copy to `rr` goes into it, as scp's would.
        finish(&env, copy(from, to, false));
        assert_same_tree(&src, &rr.join("src"));
    }
}
