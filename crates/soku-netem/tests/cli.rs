//! The built binary end to end: `up` in the foreground, `exec`, SIGTERM teardown,
//! `down`. Needs root like tests/netem.rs; `SOKU_SKIP_NETNS=1` skips.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use soku_netem::netns;

const BIN: &str = env!("CARGO_BIN_EXE_soku-netem");

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(10), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn up_exec_sigterm_down() {
    let name = format!("sokucli{}", std::process::id());
    let mut child = Command::new(BIN)
        .args(["up", "--name", &name, "--rtt", "10ms", "--rate", "50mbit"])
        .args(["--stats-every", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn soku-netem");
    let ns_b = format!("{name}-b");
    let t0 = Instant::now();
    let ready = loop {
        // Up when B's device has its address.
        let out = Command::new("ip")
            .args(["-n", &ns_b, "-br", "addr", "show", "soku0"])
            .stderr(Stdio::null())
            .output();
        if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("10.77.0.2")) {
            break true;
        }
        if let Ok(Some(_)) = child.try_wait() {
            break false;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if !ready {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        let _ = Command::new(BIN).args(["down", &name]).status();
        let why = format!(
            "soku-netem up did not come up: status {:?}\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if std::env::var("SOKU_SKIP_NETNS").as_deref() == Ok("1") {
            eprintln!("SKIPPED: {why}");
            return;
        }
        panic!("{why}");
    }
    // exec runs inside the namespace: A sees its own address.
    let out = Command::new(BIN)
        .args(["exec", &name, "a", "--", "ip", "-br", "addr", "show", "soku0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("10.77.0.1"));

    // SIGTERM: tears down and exits 0.
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("down."));
    wait_for("namespaces gone", || !netns::exists(&format!("{name}-a")) && !netns::exists(&ns_b));

    // down on leftovers: make one by hand, remove it.
    netns::create(&format!("{name}-a")).unwrap();
    let st = Command::new(BIN).args(["down", &name]).status().unwrap();
    assert!(st.success());
    assert!(!netns::exists(&format!("{name}-a")));
    // Bad usage exits 2 (clap).
    let st = Command::new(BIN).args(["up", "--loss", "200%"]).status().unwrap();
    assert_eq!(st.code(), Some(2));
}
