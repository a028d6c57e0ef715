//! The benchmark's sshd: soku-testkit's real OpenSSH sshd (fresh keys, on any address,
//! inside a namespace when started through `ip netns exec`), plus the server-side CPU
//! accounting the runs need: the sessions an sshd forks are reaped by its listener, so
//! their CPU shows up in the listener's `cutime + cstime` in `/proc`.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

pub use soku_testkit::Sshd;

use crate::proc;

/// Starts `cmd` (which must run `/usr/sbin/sshd`) listening on `addr:port`.
pub fn start(cmd: Command, addr: Ipv4Addr, port: u16) -> anyhow::Result<Sshd> {
    Sshd::start_at(cmd, addr, port).map_err(anyhow::Error::msg)
}

/// CPU of the ssh sessions a listener has served.
pub trait ServerCpu {
    /// CPU seconds of the sessions reaped so far (`cutime + cstime`).
    fn reaped_cpu(&self) -> f64;
    /// Waits (at most `limit`) until no session is left, so that
    /// [`ServerCpu::reaped_cpu`] includes the last one. False if some remain.
    fn wait_idle(&self, limit: Duration) -> bool;
}

impl ServerCpu for Sshd {
    fn reaped_cpu(&self) -> f64 {
        proc::proc_cpu(&self.pid().to_string()).map(|c| c.1).unwrap_or(f64::NAN)
    }

    fn wait_idle(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !proc::children(self.pid()).is_empty() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }
}
