//! Shared helpers for soku's end-to-end tests: a real sshd per test, the built binary
//! with the options that reach it, temp dirs, deterministic data and tree comparison.
//!
//! Every test gets its own [`Env`] (its own sshd and temp dir), so tests run in
//! parallel without sharing state. Remote paths are absolute paths inside the temp
//! dir: sshd runs as the current user (root here), and nothing touches its home.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use soku_testkit::{describe, Sshd};

pub mod emulated;
pub mod hostile;
pub mod mount;
pub mod procs;

/// One test's world: a running sshd and a temp dir holding `src/`, `dst/` and whatever
/// else the test makes.
pub struct Env {
    pub sshd: Sshd,
    pub dir: tempfile::TempDir,
}

impl Env {
    /// Starts sshd and makes the temp dir with empty `src/` and `dst/`.
    pub fn new() -> Env {
        Env::with_sshd(Sshd::start())
    }

    /// The same around an sshd the test started its own way.
    pub fn with_sshd(sshd: Sshd) -> Env {
        let dir = tempfile::Builder::new().prefix("soku-e2e-").tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("src")).expect("mkdir src");
        std::fs::create_dir(dir.path().join("dst")).expect("mkdir dst");
        Env { sshd, dir }
    }

    /// A path inside the temp dir.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `src/` in the temp dir.
    pub fn src(&self) -> PathBuf {
        self.path("src")
    }

    /// `dst/` in the temp dir.
    pub fn dst(&self) -> PathBuf {
        self.path("dst")
    }

    /// `127.0.0.1:/abs/path` for a path in the temp dir.
    pub fn remote(&self, path: &Path) -> String {
        format!("{}:{}", self.sshd.host(), path.display())
    }

    /// `soku` with the options that reach the test sshd: `-P PORT`, the client `-o`
    /// options (key, known_hosts, batch mode) and `--remote-soku` pointing at the
    /// binary under test.
    pub fn soku(&self) -> Command {
        self.soku_within(LIMIT_SECS)
    }

    /// [`Env::soku`] with its own time limit, for the few slow copies.
    pub fn soku_within(&self, secs: u32) -> Command {
        let mut cmd = bounded_soku(secs);
        // This test's own path memory: repeated copies within it learn from each other.
        cmd.env("XDG_CACHE_HOME", self.path("cache"));
        cmd.args(self.sshd.scp_port_args()).args(self.sshd.ssh_args());
        cmd.arg("--remote-soku").arg(soku_bin());
        cmd
    }

    /// [`Env::soku`] for the subcommand `sub` (`soku sync ...`), which comes first.
    pub fn soku_sub(&self, sub: &str) -> Command {
        let mut cmd = bounded_soku(LIMIT_SECS);
        cmd.arg(sub);
        cmd.env("XDG_CACHE_HOME", self.path("cache"));
        cmd.args(self.sshd.scp_port_args()).args(self.sshd.ssh_args());
        cmd.arg("--remote-soku").arg(soku_bin());
        cmd
    }

    /// [`Env::soku`] without `--remote-soku`, for tests that give their own.
    pub fn soku_without_remote_path(&self) -> Command {
        let mut cmd = bounded_soku(LIMIT_SECS);
        cmd.env("XDG_CACHE_HOME", self.path("cache"));
        cmd.args(self.sshd.scp_port_args()).args(self.sshd.ssh_args());
        cmd
    }

    /// Runs `cmd`, expects success; shows the sshd log too when it fails.
    pub fn ok(&self, cmd: &mut Command) -> Output {
        let out = soku_testkit::cmd::output(cmd);
        assert_ne!(out.status.code(), Some(TIMED_OUT), "soku hung\n{}", describe(cmd, &out));
        assert!(
            out.status.success(),
            "command failed\n{}\n--- sshd.log ---\n{}",
            describe(cmd, &out),
            self.sshd.log()
        );
        assert_no_panic(cmd, &out);
        out
    }
}

/// The binary under test, built by cargo for these tests. (Not `soku_testkit::soku_bin`,
/// whose nested `cargo build` uses other features than `cargo test` and so rebuilds the
/// TLS and QUIC crates on every alternation.)
pub fn soku_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_soku"))
}

/// Seconds one soku run may take before the test calls it a hang (loaded 2-core CI).
pub const LIMIT_SECS: u32 = 120;

/// Exit status of coreutils `timeout` when the limit hit.
pub const TIMED_OUT: i32 = 124;

/// `timeout -k 5 SECS soku`: a hung copy fails its test instead of blocking the suite.
/// Its path memory (`XDG_CACHE_HOME/soku/paths`) is a fresh directory of its own, so
/// what one test's copies learned never changes how another test's start, and so is
/// its config directory.
pub fn bounded_soku(secs: u32) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", &secs.to_string()]).arg(soku_bin());
    let home = fresh_cache_dir();
    // No config file of whoever runs the tests (`~/.config/soku/config.toml`) changes
    // what soku does here; tests of the config files set their own.
    cmd.env("XDG_CACHE_HOME", &home).env("XDG_CONFIG_HOME", &home);
    cmd
}

/// A directory under the system temp dir that no other command of this run uses
/// (left for the OS to clean: it holds at most one small file).
pub fn fresh_cache_dir() -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("soku-test-cache-{}-{n}", std::process::id()))
}

/// Runs `cmd` (stdin closed) and expects exit status `code`, no panic, and a stderr
/// that contains every one of `needles`. Returns stderr.
pub fn fails_with(cmd: &mut Command, code: i32, needles: &[&str]) -> String {
    let out = soku_testkit::cmd::output(cmd);
    assert_ne!(out.status.code(), Some(TIMED_OUT), "soku hung\n{}", describe(cmd, &out));
    assert_eq!(out.status.code(), Some(code), "wrong exit status\n{}", describe(cmd, &out));
    assert_no_panic(cmd, &out);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    for needle in needles {
        assert!(stderr.contains(needle), "stderr lacks {needle:?}\n{}", describe(cmd, &out));
    }
    stderr
}

/// A panic in soku is a bug whatever the exit status.
pub fn assert_no_panic(cmd: &Command, out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "soku panicked\n{}", describe(cmd, out));
}

/// The `soku: ...` error lines of a stderr (the final error is one line).
pub fn error_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("soku: ")).collect()
}

/// `len` deterministic pseudo-random bytes (xorshift64*, seeded): incompressible, and
/// different for different seeds, so a swapped or shifted chunk shows.
pub fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Writes `bytes` to `path`, creating parent dirs.
pub fn write(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create parent dirs");
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Sets the permission bits of `path`.
pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// The permission bits of `path`.
pub fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("metadata").permissions().mode() & 0o7777
}

/// Sets atime and mtime of `path` to `secs` seconds (and `nsec`) after the epoch.
pub fn set_mtime(path: &Path, secs: u64, nsec: u32) {
    let t = std::time::UNIX_EPOCH + std::time::Duration::new(secs, nsec);
    let times = std::fs::FileTimes::new().set_accessed(t).set_modified(t);
    std::fs::File::open(path).expect("open").set_times(times).expect("set_times");
}

/// Modification time of `path` as (seconds, nanoseconds) since the epoch.
pub fn mtime(path: &Path) -> (u64, u32) {
    let t = std::fs::metadata(path).expect("metadata").modified().expect("mtime");
    let d = t.duration_since(std::time::UNIX_EPOCH).expect("after epoch");
    (d.as_secs(), d.subsec_nanos())
}

/// Everything below `root` (relative paths, sorted), with `/` appended to directories.
pub fn listing(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    collect(root, root, &mut out);
    out.sort();
    out
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("dir entry").path();
        let rel = path.strip_prefix(root).expect("below root").display().to_string();
        let md = std::fs::symlink_metadata(&path).expect("metadata");
        if md.is_dir() {
            out.push(format!("{rel}/"));
            collect(root, &path, out);
        } else {
            out.push(rel);
        }
    }
}

/// Asserts that the trees at `a` and `b` hold the same names, kinds and file bytes.
pub fn assert_same_tree(a: &Path, b: &Path) {
    let (la, lb) = (listing(a), listing(b));
    assert_eq!(la, lb, "trees differ: {} vs {}", a.display(), b.display());
    for rel in la.iter().filter(|r| !r.ends_with('/')) {
        assert_same_file(&a.join(rel), &b.join(rel));
    }
}

pub use soku_testkit::assert_same_file;

/// Asserts no temporary file (`.NAME.soku-part`, `.NAME.soku-part-UID`) is left anywhere below `root`.
pub fn assert_no_part_files(root: &Path) {
    let left: Vec<String> =
        listing(root).into_iter().filter(|p| p.contains(".soku-part")).collect();
    assert!(left.is_empty(), "temporary files left below {}: {left:?}", root.display());
}
