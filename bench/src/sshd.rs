//! The benchmark's sshd: soku-testkit's real OpenSSH sshd (fresh keys, on any address,
//! inside a namespace when started through `ip netns exec`), plus the server-side CPU
//! accounting the runs need: the sessions an sshd forks are reaped by its listener, so
//! their CPU shows up in the listener's `cutime + cstime` in `/proc`.

use std::net::Ipv4Addr;
use std::process::Command;

pub use soku_testkit::Sshd;

use crate::proc;

/// Starts `cmd` (which must run `/usr/sbin/sshd`) listening on `addr:port`.
pub fn start(cmd: Command, addr: Ipv4Addr, port: u16) -> anyhow::Result<Sshd> {
    Sshd::start_at(cmd, addr, port).map_err(anyhow::Error::msg)
}

/// CPU of the ssh sessions a listener has served.
pub trait ServerCpu {
    /// CPU seconds of the sessions reaped so far (`cutime + cstime`); wait for the
    /// sessions to end first ([`crate::proc::settle_server`]).
    fn reaped_cpu(&self) -> f64;
}

impl ServerCpu for Sshd {
    fn reaped_cpu(&self) -> f64 {
        proc::proc_cpu(&self.pid().to_string()).map(|c| c.1).unwrap_or(f64::NAN)
    }
}
