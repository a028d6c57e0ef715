//! What both hostile-client suites (`hostile_client.rs` on the ssh channel,
//! `hostile_client_quic.rs` over QUIC) stand on: a target directory with a canary
//! beside it, the real `soku serve` started directly with its pipes ours, and the peak
//! memory it reached.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::{listing, soku_bin, write};

/// A temp dir holding the target `dst/` and, beside it, `outside/canary.txt`, which no
/// attack may change.
pub struct Scene {
    pub dir: tempfile::TempDir,
}

impl Scene {
    pub fn new() -> Scene {
        let dir = tempfile::Builder::new().prefix("soku-hc-").tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("dst")).expect("mkdir");
        write(&dir.path().join("outside/canary.txt"), b"canary");
        Scene { dir }
    }

    pub fn dst(&self) -> PathBuf {
        self.dir.path().join("dst")
    }

    /// `soku serve` in the scene's directory, taking a client for stalled after
    /// `stall_secs` of silence, its stdin, stdout and stderr piped to the test.
    pub fn spawn_serve(&self, stall_secs: u64) -> Child {
        Command::new(soku_bin())
            .args(["serve", "--bind", "127.0.0.1", "--stall-timeout", &stall_secs.to_string()])
            .current_dir(self.dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn soku serve")
    }

    /// Nothing outside the target changed and nothing took a final name in it (but
    /// `allowed`).
    pub fn assert_untouched(&self, allowed: &[&str]) {
        assert_eq!(listing(&self.dir.path().join("outside")), ["canary.txt"]);
        let named: Vec<String> = listing(&self.dst())
            .into_iter()
            .filter(|n| !n.ends_with(".soku-part") && !allowed.contains(&n.as_str()))
            .collect();
        assert!(named.is_empty(), "a final name appeared: {named:?}");
    }
}

/// The peak resident memory of `pid` so far, in kB (0 once it is gone).
pub fn vm_hwm_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
