//! Copies that follow each other share one ssh login (`crates/soku/src/client/launch/shared_login.rs`),
//! through a real sshd on loopback: the second copy logs in no more (sshd's own log
//! counts the logins), `--no-share-login` and `-o ControlMaster=no` turn sharing off, a
//! master that does not answer (stopped with SIGSTOP, as one whose network went away)
//! costs a warning and a fresh login, not a hang, and a master that refuses a session
//! (sshd's `MaxSessions`) leaves the copy to log in on its own, without ssh's notes
//! about it. The remote soku stays after a copy through a shared login
//! (`crates/soku/src/server/serve/kept.rs`): the next copies reach it over QUIC with no ssh
//! started at all, and one that finds it gone opens an ssh session instead.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use soku_testkit::Sshd;

use crate::common::procs::{descendant, signal_when_verified, summary};
use crate::common::{self, assert_same_file, data, write, Env};

/// The masters' sockets of one test: each is told to exit when the test ends, however
/// it ends (a master outlives the copy that made it by a minute).
struct Masters {
    dir: PathBuf,
}

impl Masters {
    fn new(env: &Env) -> Masters {
        Masters { dir: env.path("run") }
    }

    /// Where soku puts the sockets, under this test's `XDG_RUNTIME_DIR`.
    fn sockets(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.dir.join("soku/ssh")) {
            Ok(entries) => entries.map(|e| e.expect("entry").path()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The PID of the master listening at `socket` (`ssh -O check`).
    fn pid(socket: &Path) -> u32 {
        let out = control(socket, "check").output().expect("ssh -O check");
        let text = String::from_utf8_lossy(&out.stderr);
        let pid = text.split("pid=").nth(1).and_then(|rest| rest.split(')').next());
        pid.and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("no master pid in {text:?}"))
    }
}

impl Drop for Masters {
    fn drop(&mut self) {
        for socket in self.sockets() {
            let _ = control(&socket, "exit").stderr(Stdio::null()).status();
        }
    }
}

/// `ssh -o ControlPath=SOCKET -O CMD`: talks to the master only, never to a host.
fn control(socket: &Path, what: &str) -> Command {
    let mut cmd = Command::new("ssh");
    cmd.arg(format!("-oControlPath={}", socket.display()));
    cmd.args(["-O", what, "unused-host"]).stdin(Stdio::null());
    cmd
}

/// Forgets the servers kept from earlier copies (`crate::kept`'s records), so that the
/// next copy opens a session on the master.
fn forget_kept_servers(env: &Env) {
    let _ = std::fs::remove_dir_all(env.path("run").join("soku/kept"));
}

/// How many times sshd let a client in so far.
fn logins(env: &Env) -> usize {
    env.sshd.log().matches("Accepted publickey").count()
}

/// An upload of `name` (1 MiB) with `extra` options; the copy's own output.
fn upload(env: &Env, name: &str, extra: &[&str]) -> std::process::Output {
    let src = env.src().join(name);
    write(&src, &data(1 << 20, name.len() as u64));
    let mut cmd = env.soku();
    cmd.env("XDG_RUNTIME_DIR", env.path("run")).args(extra);
    cmd.arg(&src).arg(env.remote(&env.dst()));
    let out = env.ok(cmd.stdin(Stdio::null()));
    assert_same_file(&src, &env.dst().join(name));
    out
}

#[test]
fn the_next_copy_to_the_host_does_not_log_in_again() {
    let env = Env::new();
    std::fs::create_dir_all(env.path("run")).expect("run dir");
    let masters = Masters::new(&env);
    let out = upload(&env, "first.bin", &["-v"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("this ssh stays a minute after the copy"), "{stderr}");
    assert_eq!(logins(&env), 1);
    assert_eq!(masters.sockets().len(), 1, "the first copy's ssh stays as the master");
    forget_kept_servers(&env);
    let out = upload(&env, "second.bin", &["-v"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("opening a session on the ssh login shared with"), "{stderr}");
    forget_kept_servers(&env);
    upload(&env, "third.bin", &["-r"]);
    assert_eq!(
        logins(&env),
        1,
        "later copies open sessions on the first login\n{}",
        env.sshd.log()
    );
}

/// An ssh that notes each start in `log` before it runs the real one.
fn counting_ssh(env: &Env, log: &Path) -> PathBuf {
    let wrapper = env.path("counting-ssh");
    let script = format!("#!/bin/sh\necho \"$*\" >> '{}'\nexec ssh \"$@\"\n", log.display());
    std::fs::write(&wrapper, script).expect("wrapper");
    let status = Command::new("chmod").arg("755").arg(&wrapper).status().expect("chmod");
    assert!(status.success());
    wrapper
}

/// How many times ssh was started for a session (not `ssh -G`, which only reads the
/// configuration, nor `ssh -O`, which talks to the local master).
fn ssh_sessions(log: &Path) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter(|l| !l.split(' ').any(|w| w == "-G" || w == "-O")).count()
}

/// [`after_a_first_copy`] with an ssh that counts its starts: the setup, the count's
/// log and the ssh to pass with `-S`.
fn after_a_first_counted_copy() -> (Env, Masters, PathBuf, String) {
    let env = Env::new();
    std::fs::create_dir_all(env.path("run")).expect("run dir");
    let masters = Masters::new(&env);
    let log = env.path("ssh-starts.log");
    let ssh = counting_ssh(&env, &log).to_str().expect("utf-8 path").to_string();
    upload(&env, "first.bin", &["-S", &ssh]);
    (env, masters, log, ssh)
}

#[test]
fn the_next_copies_reach_the_kept_server_with_no_ssh() {
    let (env, _masters, log, ssh) = after_a_first_counted_copy();
    let ssh = ssh.as_str();
    assert_eq!(ssh_sessions(&log), 1);

    let out = upload(&env, "second.bin", &["-v", "-S", ssh]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reaching the remote soku kept from the last copy"), "{stderr}");
    assert!(!stderr.contains("opening a session on the ssh login"), "{stderr}");
    assert_eq!(ssh_sessions(&log), 1, "no ssh for the second copy\n{stderr}");
    // A download through it too, and a recursive upload.
    let back = env.path("back");
    std::fs::create_dir_all(&back).expect("back dir");
    let mut cmd = env.soku();
    cmd.env("XDG_RUNTIME_DIR", env.path("run")).args(["-S", ssh]);
    cmd.arg(env.remote(&env.dst().join("second.bin"))).arg(&back);
    env.ok(cmd.stdin(Stdio::null()));
    assert_same_file(&env.src().join("second.bin"), &back.join("second.bin"));
    upload(&env, "third.bin", &["-r", "-S", ssh]);
    assert_eq!(ssh_sessions(&log), 1, "no ssh for the download and the third upload");
    assert_eq!(logins(&env), 1);

    // Gone (killed): the next copy waits a few round trips for it, then opens an ssh
    // session, and the server that session starts stays in its place.
    let kept = descendant(env.sshd.pid(), &|c| c.contains(" serve")).expect("the kept server");
    let status = Command::new("kill").arg("-9").arg(kept.to_string()).status();
    assert!(status.expect("kill").success());
    let out = upload(&env, "fourth.bin", &["-v", "-S", ssh]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("did not answer"), "{stderr}");
    assert!(stderr.contains("opening an ssh session"), "{stderr}");
    assert_eq!(ssh_sessions(&log), 2, "one ssh session for the fourth copy\n{stderr}");
    upload(&env, "fifth.bin", &["-S", ssh]);
    assert_eq!(ssh_sessions(&log), 2, "the fourth copy's server stayed");
}

/// Copies in a row, as a script runs them, all go through the kept server: no job holds
/// one of its 8 places past its copy (a job waits up to 10 s for a close it did not
/// get). On loopback a finished copy's close left even before `soku_transport::close`;
/// the close under a full window is `transport_e2e.rs`'s policed tests' to prove.
#[test]
fn copies_in_a_row_all_reach_the_kept_server() {
    let (env, _masters, log, ssh) = after_a_first_counted_copy();
    let ssh = ssh.as_str();
    let began = std::time::Instant::now();
    for n in 0..12 {
        upload(&env, &format!("row-{n}.bin"), &["-S", ssh]);
    }
    let took = began.elapsed();
    println!("12 copies in a row through the kept server: {took:.1?}");
    assert_eq!(
        ssh_sessions(&log),
        1,
        "every copy after the first reached the kept server ({took:.1?} for 12)"
    );
}

/// A test's sshd and soku's runtime directory, after a first copy (1 MiB) whose ssh
/// stays as the master and whose remote soku stays as the kept server.
fn after_a_first_copy() -> (Env, Masters) {
    let env = Env::new();
    std::fs::create_dir_all(env.path("run")).expect("run dir");
    let masters = Masters::new(&env);
    upload(&env, "first.bin", &[]);
    (env, masters)
}

/// A kept server takes jobs only while the ssh login that started it lives
/// (`crates/soku/src/server/serve/kept.rs`, "Whose authority"): once the user's key is removed
/// and that login ends (its master exits, as it does by itself a minute after its last
/// ssh session), the next copy must log in again, and is refused there, instead of
/// reaching the kept server as if nothing had happened.
#[test]
fn a_kept_server_ends_with_its_login_and_a_revoked_key_copies_no_more() {
    let (env, masters) = after_a_first_copy();
    let kept = descendant(env.sshd.pid(), &|c| c.contains(" serve")).expect("the kept server");
    std::fs::write(env.sshd.dir().join("authorized_keys"), "").expect("revoke the key");
    for socket in masters.sockets() {
        let status = control(&socket, "exit").stderr(Stdio::null()).status();
        assert!(status.expect("ssh -O exit").success());
    }
    // Bounded: the server looks at its login once a second. Not asserted here: the
    // copy below says whether it took a job after its login had gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    while runs(kept) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let src = env.src().join("after.bin");
    write(&src, &data(100_000, 11));
    let mut cmd = env.soku();
    cmd.env("XDG_RUNTIME_DIR", env.path("run")).arg("-v").stdin(Stdio::null());
    cmd.arg(&src).arg(env.remote(&env.dst()));
    let stderr = common::fails_with(&mut cmd, 255, &["Permission denied"]);
    assert!(!env.dst().join("after.bin").exists(), "no copy after the key was revoked\n{stderr}");
    assert!(!runs(kept), "the kept server ended with its login");
}

/// Whether the process `pid` runs (a zombie has ended).
fn runs(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rfind(')').and_then(|i| stat.get(i + 2..i + 3));
    state.is_some_and(|s| s != "Z" && s != "X")
}

/// A stranger's certificate at the kept server's port is refused in the handshake, and
/// the server goes on serving the client whose certificate it pinned.
#[test]
fn the_kept_server_takes_no_other_certificate() {
    let (env, _masters) = after_a_first_copy();
    let records: Vec<PathBuf> = std::fs::read_dir(env.path("run").join("soku/kept"))
        .expect("the kept server's record")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&records[0]).expect("read")).expect("json");
    let addr: std::net::SocketAddr = record["addr"].as_str().expect("addr").parse().expect("addr");
    let server: soku_transport::Fingerprint =
        record["server"].as_str().expect("server").parse().expect("fingerprint");

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("rt");
    let verdict = runtime.block_on(async {
        let stranger = soku_transport::Identity::generate().expect("identity");
        let opts = soku_transport::TransportOptions::default();
        let (endpoint, _) =
            soku_transport::client_endpoint(addr, &stranger, server, &opts).expect("endpoint");
        // TLS 1.3: the server judges our certificate after our side of the handshake.
        let conn = match soku_transport::connect(&endpoint, addr).await {
            Ok(conn) => conn,
            Err(err) => return err,
        };
        let closed = tokio::time::timeout(Duration::from_secs(10), conn.closed()).await;
        soku_transport::TransportError::from(closed.expect("refused within 10 s"))
    });
    assert!(
        matches!(verdict, soku_transport::TransportError::Handshake(_)),
        "refused in the handshake: {verdict}"
    );

    let out = upload(&env, "second.bin", &["-v"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reaching the remote soku kept from the last copy"), "{stderr}");
    assert!(!stderr.contains("opening an ssh session"), "{stderr}");
    assert_eq!(logins(&env), 1);
}

/// Sends `signal` to the kept server 2 s into a 6 s copy through it (6 MiB at 8
/// Mbit/s, `-v`); the copy's output, after it checked the bytes, and how long it took.
fn signal_the_kept_server_under_a_copy(signal: &str, seed: u64) -> (String, Duration) {
    // The copy must run through the kept server for the signal to mean anything. On a
    // loaded machine the kept server may miss the 300 ms the client gives its handshake,
    // and the copy rightly logs in anew instead: then the scene is set up again (a
    // bounded number of times).
    const ATTEMPTS: usize = 3;
    for attempt in 1..=ATTEMPTS {
        if let Some(done) = signal_once(signal, seed) {
            return done;
        }
        println!("attempt {attempt}: the kept server did not answer in time; setting up again");
    }
    panic!("the kept server never answered a copy's handshake in {ATTEMPTS} attempts");
}

/// One try of [`signal_the_kept_server_under_a_copy`]; `None` if the copy did not reach
/// the kept server.
fn signal_once(signal: &str, seed: u64) -> Option<(String, Duration)> {
    let (env, _masters) = after_a_first_copy();
    let kept = descendant(env.sshd.pid(), &|c| c.contains(" serve")).expect("the kept server");
    let big = env.src().join("big.bin");
    write(&big, &data(6 << 20, seed));
    let mut cmd = env.soku();
    cmd.env("XDG_RUNTIME_DIR", env.path("run")).args(["-v", "-l", "8000"]);
    cmd.arg(&big).arg(env.remote(&env.dst()));
    let copy = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    let started = Instant::now();
    let copy = copy.spawn().expect("copy");
    std::thread::sleep(Duration::from_secs(2));
    let status = Command::new("kill").arg(signal).arg(kept.to_string()).status();
    assert!(status.expect("kill").success());
    let out = copy.wait_with_output().expect("the copy ends");
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    println!("kept server sent {signal} 2 s into the copy: done after {took:.1?}");
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("reaching the remote soku kept from the last copy"), "{stderr}");
    assert_same_file(&big, &env.dst().join("big.bin"));
    if stderr.contains("the remote soku kept from the last copy did not answer") {
        return None;
    }
    Some((stderr, took))
}

/// A kept server stopped (SIGTERM) under a copy closes its connection with a reason: the
/// copy reconnects at once, through ssh, and finishes, resuming; it does not wait out
/// its stall limit (a minute).
#[test]
fn a_kept_server_stopped_under_a_copy_leaves_it_to_resume_through_ssh() {
    let (stderr, took) = signal_the_kept_server_under_a_copy("-TERM", 9);
    assert!(stderr.contains("the remote soku was stopped"), "{stderr}");
    assert!(stderr.contains("reconnecting"), "{stderr}");
    assert!(took < Duration::from_secs(30), "took {took:?}\n{stderr}");
}

/// A kept server killed (SIGKILL) under a copy says nothing: QUIC goes silent while
/// TCP to sshd answers, as when UDP is cut (`crates/soku/src/carrier/tcp_probe.rs`), and the
/// copy moves to TCP through ssh after 8 s of silence and finishes, resuming; it used
/// to wait out QUIC's idle timeout (a minute) first. The line says both suspects.
#[test]
fn a_kept_server_killed_under_a_copy_is_left_for_tcp_within_seconds() {
    let (stderr, took) = signal_the_kept_server_under_a_copy("-KILL", 10);
    assert!(
        stderr.contains("or the remote soku kept from the last copy stopped"),
        "not told why: {stderr}"
    );
    assert!(stderr.contains("moving the copy to TLS/TCP"), "{stderr}");
    assert!(took < Duration::from_secs(30), "took {took:?}\n{stderr}");
}

/// A client killed (SIGKILL) under a copy through the kept server sends no close. The
/// same command, run again at once, reaches the same kept server, whose new job nudges
/// the old one: its client does not answer, so it ends within a second and frees the
/// partial file (it held it until its client had been silent for 15 s), and the copy
/// finishes.
#[test]
fn a_copy_killed_under_a_kept_server_finishes_when_run_again() {
    let (env, _masters) = after_a_first_copy();

    // About 6 s: 6 MiB at 8 Mbit/s.
    let big = env.src().join("big.bin");
    write(&big, &data(6 << 20, 11));
    let copy = |extra: &[&str]| {
        let mut cmd = env.soku();
        cmd.env("XDG_RUNTIME_DIR", env.path("run")).args(extra);
        cmd.arg(&big).arg(env.remote(&env.dst()));
        cmd.stdin(Stdio::null());
        cmd
    };
    let mut first = copy(&["-l", "8000"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
    let first = first.as_mut().expect("copy");
    std::thread::sleep(Duration::from_secs(2));
    // The copy itself, below the time limit's wrapper.
    let client = descendant(first.id(), &|c| c.contains(" -l 8000 ")).expect("the client");
    let status = Command::new("kill").arg("-9").arg(client.to_string()).status();
    assert!(status.expect("kill").success());
    let _ = first.wait();

    let started = Instant::now();
    let out = env.ok(&mut copy(&["-v"]));
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reaching the remote soku kept from the last copy"), "{stderr}");
    assert_same_file(&big, &env.dst().join("big.bin"));
    println!("the same command after the client was killed: {took:.1?}");
    // About a second for the killed job to let go, then 4 MiB or so unthrottled; a
    // job that waited out its client's 15 s of silence would not make it.
    assert!(took < Duration::from_secs(8), "took {took:?}\n{stderr}");
}

/// Ctrl-C (SIGINT) under a tree's upload through the kept server: the client says in
/// one line that the copy was interrupted and that the same command resumes it (exit
/// 130), and closes its connection, so that the kept job ends at once and lets go of
/// its partial files. The same command run again at once, through the same kept server
/// (no ssh started), is not held up (it waited about 14 s for the interrupted job, with
/// "nothing verified for 5 s"), and the files cut short, small ones and a large one
/// whose last chunk shares its block with the partial file's trailer, are not taken
/// for sources that changed (a warning per file said "1 chunk of the interrupted copy
/// differed from the source").
#[test]
fn ctrl_c_under_a_kept_server_lets_the_same_command_resume_at_once() {
    let (env, _masters, log, ssh) = after_a_first_counted_copy();
    let tree = env.src().join("tree");
    write(&tree.join("a.txt"), b"first");
    write(&tree.join("mid.bin"), &data((24 << 20) + 100, 12));
    for n in 0..6 {
        write(&tree.join(format!("sub/z{n}.txt")), format!("small {n}").as_bytes());
    }
    let copy = |limited: bool| {
        let mut cmd = Command::new(common::soku_bin());
        cmd.args(env.sshd.scp_port_args()).args(env.sshd.ssh_args());
        cmd.arg("--remote-soku").arg(common::soku_bin()).args(["--json", "-S", &ssh]);
        cmd.env("XDG_RUNTIME_DIR", env.path("run")).env("XDG_CACHE_HOME", env.path("cache"));
        if limited {
            cmd.args(["-l", "40000"]);
        }
        cmd.arg("-r").arg(&tree).arg(env.remote(&env.dst()));
        cmd
    };
    let (cut, status) = signal_when_verified(copy(true), 12 << 20, "-INT", |client| client);
    let started = Instant::now();
    let out = soku_testkit::cmd::output(copy(false).stdin(Stdio::null()));
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = cut.stderr.lines().filter(|l| l.contains("interrupted")).collect();
    let differed: Vec<&str> = stderr.lines().filter(|l| l.contains("differed")).collect();
    println!(
        "Ctrl-C: exit {:?}, said {said:?}; the same command right after: {took:.1?}, exit \
         {:?}, waited: {}, {} lines of differing chunks: {differed:?}",
        status.code(),
        out.status.code(),
        stderr.contains(r#""event":"waiting""#),
        differed.len()
    );
    assert_eq!(status.code(), Some(130), "interrupted\n{}", cut.stderr);
    assert_eq!(
        said,
        [
            r#"{"event":"error","message":"interrupted: what arrived is kept: run the same command again to resume the copy","exit_status":130}"#
        ],
        "{}",
        cut.stderr
    );
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains(r#""event":"waiting""#), "held up after {took:.1?}: {stderr}");
    assert!(differed.is_empty(), "{stderr}");
    let (bytes, resumed) = summary(&stderr).expect("a summary");
    assert!(resumed >= 6 << 20, "continued: {resumed} of {bytes} held");
    assert!(took < Duration::from_secs(5), "took {took:.1?}: {stderr}");
    common::assert_same_tree(&tree, &env.dst().join("tree"));
    common::assert_no_part_files(&env.dst());
    assert_eq!(ssh_sessions(&log), 1, "both runs went through the kept server");
}

#[test]
fn sharing_is_turned_off_by_the_flag_or_the_users_control_master() {
    for off in [&["--no-share-login"][..], &["-o", "ControlMaster=no"]] {
        let env = Env::new();
        std::fs::create_dir_all(env.path("run")).expect("run dir");
        let masters = Masters::new(&env);
        upload(&env, "first.bin", off);
        upload(&env, "second.bin", off);
        assert_eq!(logins(&env), 2, "{off:?}");
        assert!(masters.sockets().is_empty(), "no master was made with {off:?}");
    }
}

#[test]
fn a_master_that_does_not_answer_costs_a_fresh_login_not_a_hang() {
    let env = Env::new();
    std::fs::create_dir_all(env.path("run")).expect("run dir");
    let masters = Masters::new(&env);
    upload(&env, "first.bin", &[]);
    let sockets = masters.sockets();
    assert_eq!(sockets.len(), 1);
    let master = Masters::pid(&sockets[0]);
    let signal = |sig: &str| {
        let status = Command::new("kill").arg(sig).arg(master.to_string()).status();
        assert!(status.expect("kill").success(), "kill {sig} {master}");
    };
    forget_kept_servers(&env);
    signal("-STOP");
    let started = Instant::now();
    let out = upload(&env, "second.bin", &[]);
    let took = started.elapsed();
    signal("-CONT");
    // Its socket is gone (soku removed it when `ssh -O stop` got no answer), so the
    // master is ended by PID.
    signal("-TERM");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the shared ssh connection did not answer within 5 s; logging in again"),
        "{stderr}"
    );
    assert_eq!(logins(&env), 2, "the second copy logged in afresh");
    // 5 s for the hello, at most 5 s for `ssh -O stop`, then a login on loopback.
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(masters.sockets().is_empty(), "the silent master's socket is gone");
}

#[test]
fn a_master_that_refuses_a_session_leaves_the_copy_to_log_in_alone() {
    // One session per connection: while a copy holds the master's session, sshd
    // refuses the next one there.
    let mut sshd = None;
    for _ in 0..5 {
        let mut cmd = Command::new("/usr/sbin/sshd");
        cmd.args(["-o", "MaxSessions=1"]);
        if let Ok(started) = Sshd::start_at(cmd, Ipv4Addr::LOCALHOST, soku_testkit::free_port()) {
            sshd = Some(started);
            break;
        }
    }
    let env = Env::with_sshd(sshd.expect("sshd with MaxSessions=1"));
    std::fs::create_dir_all(env.path("run")).expect("run dir");
    let masters = Masters::new(&env);

    // The first copy, slowed to about 3 s (8 MiB at 20 Mbit/s), holds the session.
    let slow = env.src().join("slow.bin");
    write(&slow, &data(8 << 20, 5));
    let mut first = env.soku();
    first.env("XDG_RUNTIME_DIR", env.path("run")).args(["-l", "20000"]);
    first.arg(&slow).arg(env.remote(&env.dst()));
    let first = first.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    let first = first.spawn().expect("first copy");
    let deadline = Instant::now() + Duration::from_secs(20);
    while masters.sockets().is_empty() {
        assert!(Instant::now() < deadline, "no master within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }

    let out = upload(&env, "second.bin", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = first.wait_with_output().expect("first copy ends");
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert_same_file(&slow, &env.dst().join("slow.bin"));
    assert_eq!(logins(&env), 2, "the second copy logged in on its own\n{}", env.sshd.log());
    for line in stderr.lines() {
        assert!(!line.contains("mux_client") && !line.contains("ControlSocket"), "{stderr}");
    }
}
