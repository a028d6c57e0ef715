//! The side of [`super`] every Unix system has alike.

use std::fs::{File, Metadata, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};

/// This process's effective user id, mixed into the names of per-user files.
pub(crate) fn user_id() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// OpenSSH shares one login between sessions here (`ControlMaster`, over a Unix
/// socket).
pub(crate) const SSH_SHARES_LOGINS: bool = true;

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Where soku keeps what lasts between copies: `$XDG_CACHE_HOME`, else `~/.cache`.
pub(crate) fn cache_base() -> Option<PathBuf> {
    env_dir("XDG_CACHE_HOME").or_else(|| env_dir("HOME").map(|home| home.join(".cache")))
}

/// Where soku keeps what lives while copies run: `$XDG_RUNTIME_DIR`, else the cache's
/// place.
pub(crate) fn runtime_base() -> Option<PathBuf> {
    env_dir("XDG_RUNTIME_DIR").or_else(cache_base)
}

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Makes `dir` and its parents, private to this user (0700).
pub(crate) fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Whether `md` is of this user's and nobody else may write to it.
pub(crate) fn only_mine(md: &Metadata) -> bool {
    md.uid() == user_id() && md.mode() & 0o022 == 0
}

/// Options that make a file only this user may read (0600) and refuse a symlink at its
/// name.
pub(crate) fn private_file() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    options
}

/// This process's network namespace (the inode of its `/proc` link; 0 where there is
/// none): addresses mean different hosts in different namespaces.
pub(crate) fn netns_id() -> u64 {
    std::fs::metadata("/proc/self/ns/net").map(|md| md.ino()).unwrap_or(0)
}

/// The system's monotonic clock (`CLOCK_MONOTONIC`, which `std::time::Instant` reads
/// on Linux), the same for every process of one boot.
pub(crate) fn shared_clock() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Duration::new(u64::try_from(now.tv_sec).unwrap_or(0), u32::try_from(now.tv_nsec).unwrap_or(0))
}

/// CPU time (user and system, all threads) this process has used since it started.
///
/// `CLOCK_PROCESS_CPUTIME_ID` is the sum `getrusage(RUSAGE_SELF)` reports as
/// `ru_utime + ru_stime`, read without unsafe code (the workspace denies it); ssh, a
/// child process, is not counted, as in the bench's CPU figures (`bench/src/cpu.rs`).
pub(crate) fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), u32::try_from(t.tv_nsec).unwrap_or(0))
}

/// Opens a config file to read without waiting: a FIFO is then refused rather than
/// waited on for a writer.
pub(crate) fn open_without_waiting(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)
}

/// What a file of this type is, where it is not a regular file or a directory.
pub(crate) fn special_kind(kind: std::fs::FileType) -> Option<&'static str> {
    if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

/// The user's Ctrl-C (SIGINT), taken in place of its default action.
pub(crate) struct Interrupts(Signal);

impl Interrupts {
    /// Takes SIGINT from now on.
    pub(crate) fn listen() -> std::io::Result<Interrupts> {
        signal(SignalKind::interrupt()).map(Interrupts)
    }

    /// The next Ctrl-C; `None` once none can come.
    pub(crate) async fn recv(&mut self) -> Option<()> {
        self.0.recv().await
    }
}
