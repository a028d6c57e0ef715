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
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "port {port} still open");
}
