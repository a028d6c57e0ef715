//! A remote host on an emulated path: the project's own emulator between two network
//! namespaces, sshd in the far one (B), soku run in the near one (A). Needs root.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use soku_netem::{Path as NetPath, PathSpec};
use soku_testkit::Sshd;

use super::soku_bin;

/// The path, the sshd behind it and a temp dir (`src/`, `dst/`) both ends see.
pub struct EmulatedHost {
    pub sshd: Sshd,
    pub path: NetPath,
    pub dir: tempfile::TempDir,
}

/// Whether this process runs as root (network namespaces need it).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(str::to_owned))
        .is_some_and(|l| l.split_whitespace().nth(2) == Some("0"))
}

impl EmulatedHost {
    /// A symmetric path of `rtt` and `rate_bps`, named after `tag` (unique per test).
    pub fn up(tag: &str, rtt: Duration, rate_bps: u64) -> EmulatedHost {
        EmulatedHost::up_with(tag, PathSpec::symmetric(rtt, 0.0, Some(rate_bps)))
    }

    /// A path as `spec` says (loss, queues, asymmetry), named after `tag`.
    pub fn up_with(tag: &str, spec: PathSpec) -> EmulatedHost {
        assert!(is_root(), "this test needs root (network namespaces)");
        static N: AtomicU32 = AtomicU32::new(0);
        let name =
            format!("so{}{tag}{}", std::process::id() % 100_000, N.fetch_add(1, Ordering::Relaxed));
        let path = NetPath::up(&name, spec).expect("emulated path");
        let sshd = Sshd::start_at(path.command_b("/usr/sbin/sshd"), path.addr_b(), 22)
            .expect("sshd in the far namespace");
        let dir = tempfile::Builder::new().prefix("soku-emu-").tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("src")).expect("mkdir");
        std::fs::create_dir(dir.path().join("dst")).expect("mkdir");
        EmulatedHost { sshd, path, dir }
    }

    pub fn src(&self) -> PathBuf {
        self.dir.path().join("src")
    }

    pub fn dst(&self) -> PathBuf {
        self.dir.path().join("dst")
    }

    /// `HOST:/abs/path` for a path in the temp dir, as seen through the path.
    pub fn remote(&self, path: &Path) -> String {
        format!("{}:{}", self.sshd.host(), path.display())
    }

    /// `soku --json` in namespace A, reaching the sshd across the path.
    pub fn soku_json(&self) -> Command {
        let mut cmd = self.path.command_a(soku_bin().to_str().expect("utf-8 path"));
        cmd.args(self.sshd.scp_port_args()).args(self.sshd.ssh_args());
        cmd.arg("--remote-soku").arg(soku_bin()).arg("--json");
        // This test's own path memory (see `common::bounded_soku`).
        let home = self.dir.path().join("cache");
        cmd.env("XDG_CACHE_HOME", &home).env("XDG_CONFIG_HOME", &home);
        cmd
    }
}
