//! The receiver's files in the making: each temporary file with the lock its writers
//! take turns on, and the list of temporary files that must not outlive a failed or
//! cancelled copy.

use std::collections::HashSet;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::{fsops, lock};

/// A temporary file being filled, and the lock its writers take turns on.
///
/// Writes to one file are serialized here rather than in the kernel: a buffered write
/// holds the inode's lock (tmpfs, ext4), and the kernel's waiters spin on it while the
/// holder copies. With up to 64 chunk writers that spinning took 7-11 % of both cores
/// in a loopback copy (perf), CPU the sender and the decryption needed; waiters on this
/// mutex sleep instead. Decoding and hashing stay parallel.
pub(super) struct TargetFile {
    pub(super) file: std::fs::File,
    writing: Mutex<()>,
}

impl TargetFile {
    pub(super) fn new(file: std::fs::File) -> Self {
        TargetFile { file, writing: Mutex::new(()) }
    }

    pub(super) fn write_all_at(&self, data: &[u8], offset: u64) -> std::io::Result<()> {
        let _turn = lock(&self.writing);
        self.file.write_all_at(data, offset)
    }
}

/// The temporary files that exist right now, by final path. Once [`Self::discard_all`]
/// has run (the copy failed or was dropped), a file created late is removed at once,
/// so a blocking task finishing after the cancel cannot leave one behind.
#[derive(Debug, Default)]
pub(super) struct TempFiles(Mutex<TempState>);

#[derive(Debug, Default)]
struct TempState {
    closed: bool,
    paths: HashSet<PathBuf>,
}

impl TempFiles {
    /// Creates the temporary file for `local` (on the blocking pool's thread).
    pub(super) fn create(
        &self,
        root: &Path,
        local: &Path,
        size: u64,
        mode: u32,
    ) -> std::io::Result<std::fs::File> {
        let file = fsops::create_temp(root, local, size, mode)?;
        let mut state = lock(&self.0);
        if state.closed {
            fsops::discard(local);
            return Err(std::io::Error::other("the copy was stopped"));
        }
        state.paths.insert(local.to_path_buf());
        Ok(file)
    }

    /// The temporary file of `local` is gone: renamed into place or discarded.
    pub(super) fn settled(&self, local: &Path) {
        lock(&self.0).paths.remove(local);
    }

    /// Discards the temporary file of `local`.
    pub(super) fn discard(&self, local: &Path) {
        fsops::discard(local);
        self.settled(local);
    }

    /// Discards every temporary file, now and any created later.
    pub(super) fn discard_all(&self) {
        let mut state = lock(&self.0);
        state.closed = true;
        for local in state.paths.drain() {
            fsops::discard(&local);
        }
    }
}
