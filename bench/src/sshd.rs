//! A real OpenSSH `sshd` for the runs: fresh host and user keys in a temp dir, listening
//! on one address (namespace B's, or loopback), killed on drop.
//!
//! The same approach as `soku-testkit`'s loopback harness and `relay-bench.sh`, with two
//! additions the benchmark needs: the listener may live in a namespace (the caller
//! passes a `Command` already prefixed with `ip netns exec`), and the listener's PID is
//! known, so the CPU its reaped sessions used (server side) can be read from `/proc`.

use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::proc;

/// A running sshd; the session processes it forks are reaped by it.
pub struct Sshd {
    child: Child,
    pid: u32,
    port: u16,
    addr: Ipv4Addr,
    dir: tempfile::TempDir,
}

impl Sshd {
    /// Starts `cmd` (which must run `/usr/sbin/sshd`) listening on `addr:port` and
    /// waits (bounded) for its pid file, which sshd writes after binding.
    pub fn start(mut cmd: Command, addr: Ipv4Addr, port: u16) -> anyhow::Result<Sshd> {
        let _ = std::fs::create_dir_all("/run/sshd");
        let dir = tempfile::Builder::new().prefix("soku-bench-sshd-").tempdir()?;
        let d = dir.path();
        for key in ["host_key", "user_key"] {
            proc::capture(
                Command::new("ssh-keygen")
                    .args(["-q", "-t", "ed25519", "-N", "", "-C", "soku-bench", "-f"])
                    .arg(d.join(key)),
            )?;
        }
        std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys"))?;
        let host_pub = std::fs::read_to_string(d.join("host_key.pub"))?;
        let key: Vec<&str> = host_pub.split_whitespace().take(2).collect();
        let name = if port == 22 { addr.to_string() } else { format!("[{addr}]:{port}") };
        std::fs::write(d.join("known_hosts"), format!("{name} {}\n", key.join(" ")))?;
        let p = |f: &str| d.join(f).display().to_string();
        let config = [
            format!("ListenAddress {addr}"),
            format!("Port {port}"),
            format!("HostKey {}", p("host_key")),
            format!("AuthorizedKeysFile {}", p("authorized_keys")),
            format!("PidFile {}", p("sshd.pid")),
            "PubkeyAuthentication yes".into(),
            "PasswordAuthentication no".into(),
            "KbdInteractiveAuthentication no".into(),
            "UsePAM no".into(),
            "PermitRootLogin prohibit-password".into(),
            "StrictModes no".into(),
            "MaxStartups 100".into(),
            "Subsystem sftp internal-sftp".into(),
        ]
        .join("\n");
        std::fs::write(d.join("sshd_config"), config + "\n")?;
        let log = std::fs::File::create(d.join("sshd.log"))?;
        let child = cmd
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting sshd")?;
        let mut sshd = Sshd { pid: child.id(), child, port, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(st)) = sshd.child.try_wait() {
                bail!("sshd exited ({st}): {}", sshd.log());
            }
            if let Ok(s) = std::fs::read_to_string(sshd.dir.path().join("sshd.pid")) {
                if let Ok(pid) = s.trim().parse() {
                    sshd.pid = pid;
                    return Ok(sshd);
                }
            }
            if Instant::now() > deadline {
                bail!("sshd did not write its pid file in 10 s: {}", sshd.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `root@ADDR` (the bench runs as root).
    pub fn destination(&self) -> String {
        format!("root@{}", self.addr)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// ssh options in `-o` form: key, known_hosts, strict checking, batch mode.
    pub fn ssh_options(&self) -> Vec<String> {
        vec![
            format!("IdentityFile={}", self.dir.path().join("user_key").display()),
            format!("UserKnownHostsFile={}", self.dir.path().join("known_hosts").display()),
            "GlobalKnownHostsFile=/dev/null".into(),
            "StrictHostKeyChecking=yes".into(),
            "BatchMode=yes".into(),
            "IdentitiesOnly=yes".into(),
            "LogLevel=ERROR".into(),
        ]
    }

    /// `["-o", opt, "-o", opt, ...]`.
    pub fn ssh_args(&self) -> Vec<String> {
        self.ssh_options().into_iter().flat_map(|o| ["-o".to_string(), o]).collect()
    }

    /// CPU seconds of the sessions this sshd has reaped so far (`cutime + cstime`).
    pub fn reaped_cpu(&self) -> f64 {
        proc::proc_cpu(&self.pid.to_string()).map(|c| c.1).unwrap_or(f64::NAN)
    }

    /// Waits (at most `limit`) until sshd has no session children left, so that
    /// [`Sshd::reaped_cpu`] includes the last session. False if some remain.
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !proc::children(self.pid).is_empty() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    /// The sshd log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // Our own child, by PID (Child::kill); its sessions end with their clients.
        if self.pid != self.child.id() {
            // `ip netns exec` forked: the daemon is the pid-file PID, also ours.
            let _ = Command::new("kill").arg(self.pid.to_string()).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
