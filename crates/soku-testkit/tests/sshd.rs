//! The testkit's own check: ssh logs in through the started sshd, both ways of addressing it.

use std::process::Command;

use soku_testkit::{run, Sshd};

#[test]
fn ssh_true_through_started_sshd() {
    let sshd = Sshd::start();
    let mut ssh = Command::new("ssh");
    ssh.args(sshd.ssh_args()).args(sshd.ssh_port_args()).arg(sshd.destination()).arg("echo ok");
    let out = run(&mut ssh);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok", "sshd log:\n{}", sshd.log());

    let mut ssh = Command::new("ssh");
    ssh.arg("-F").arg(sshd.ssh_config_file()).arg(soku_testkit::sshd::TEST_HOST).arg("true");
    run(&mut ssh);
}

#[test]
fn drop_stops_sshd() {
    let sshd = Sshd::start();
    let port = sshd.port();
    let dir = sshd.dir().to_path_buf();
    drop(sshd);
    assert!(!dir.exists(), "temp dir {} left behind", dir.display());
    // A port from the ephemeral range can connect to itself (TCP simultaneous open,
    // RFC 9293 3.5): a stream whose two ends are one address reached no sshd.
    let reached = std::net::TcpStream::connect(("127.0.0.1", port))
        .is_ok_and(|s| s.local_addr().ok() != s.peer_addr().ok());
    assert!(!reached, "port {port} still open");
}
