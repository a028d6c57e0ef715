//! The session bootstrap under hostile conditions that real users meet: login scripts
//! printing to stdout before soku starts, and UDP blocked between the hosts.
//!
//! Both use `-e` (rsync-style remote shell) with a small wrapper script, so the server is
//! the real `soku serve` and only the way it is reached changes.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;

fn wrapper(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    // `-e CMD` runs `CMD host 'remote command'`: drop the host, run the command locally.
    std::fs::write(&path, format!("#!/bin/sh\nshift\n{body}\n")).expect("write wrapper");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn payload(dir: &Path) -> (PathBuf, Vec<u8>) {
    let data = common::data(3_000_000, 7);
    let path = dir.join("payload.bin");
    std::fs::write(&path, &data).expect("write payload");
    (path, data)
}

fn copy_with(rsh: &Path, extra: &[&str], source: &Path, target: &Path) -> std::process::Output {
    let mut cmd = Command::new(PathBuf::from(env!("CARGO_BIN_EXE_soku")));
    cmd.arg("-e")
        .arg(rsh)
        .arg("--remote-soku")
        .arg(PathBuf::from(env!("CARGO_BIN_EXE_soku")))
        .args(extra)
        .arg(source)
        .arg(format!("localhost:{}", target.display()));
    soku_testkit::run(&mut cmd)
}

#[test]
fn login_noise_before_the_hello_does_not_break_the_session() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let noisy = wrapper(
        tmp.path(),
        "noisy-rsh",
        "echo 'Welcome to the cluster!'; printf 'motd line\\n\\0binary junk\\n'; exec sh -c \"$*\"",
    );
    let (source, data) = payload(tmp.path());
    let target = tmp.path().join("out.bin");
    let out = copy_with(&noisy, &[], &source, &target);
    assert_eq!(std::fs::read(&target).expect("copied"), data);
    assert!(out.stderr.is_empty() || !String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

#[test]
fn blocked_udp_falls_back_to_the_ssh_channel_and_says_so() {
    if !Command::new("unshare").args(["-n", "true"]).status().is_ok_and(|s| s.success()) {
        panic!("this test needs `unshare -n` (root): it runs the server in a network namespace with no route for UDP");
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    // The server runs in its own empty network namespace: its UDP port is unreachable,
    // while its stdin/stdout (the "ssh channel") still work.
    let isolated = wrapper(tmp.path(), "isolated-rsh", "exec unshare -n sh -c \"$*\"");
    let (source, data) = payload(tmp.path());
    let target = tmp.path().join("out.bin");
    let out = copy_with(&isolated, &["--quic-timeout", "1"], &source, &target);
    assert_eq!(std::fs::read(&target).expect("copied"), data);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no QUIC handshake"), "the fallback must be announced: {stderr}");
    assert!(stderr.contains("ssh channel"), "{stderr}");
}
