//! The receiver's files in the making: where each file's chunks are written (with the
//! lock its writers take turns on), and the list of temporary files to clean up when a
//! copy stops.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::fsops::TargetDir;
use crate::lock;
use crate::partial::{self, Trailer};

/// Where one file's chunks are written, and the lock its writers take turns on.
///
/// Writes to one file are serialized here rather than in the kernel: a buffered write
/// holds the inode's lock (tmpfs, ext4), and the kernel's waiters spin on it while the
/// holder copies. With up to 64 chunk writers that spinning took 7-11 % of both cores
/// in a loopback copy (perf), CPU the sender and the decryption needed; waiters on this
/// mutex sleep instead. Decoding and hashing stay parallel.
pub(super) struct TargetFile {
    /// The temporary file; `None` while the held chunks are those of the file at the
    /// final name, which is copied to a temporary file before the first write.
    storage: Mutex<Option<File>>,
    /// How to make the temporary file from the final one.
    from_final: Option<FromFinal>,
    /// The temporary file was created empty now: all-zero chunks need not be written.
    fresh: bool,
    /// Start the disk writes of each chunk at once (the file is flushed before its
    /// rename).
    write_back_early: bool,
}

struct FromFinal {
    local: PathBuf,
    trailer: Trailer,
    mode: u32,
}

impl TargetFile {
    /// Chunks go to `file`; `fresh` if it was created empty for this copy.
    pub(super) fn new(file: File, fresh: bool) -> Self {
        TargetFile {
            storage: Mutex::new(Some(file)),
            from_final: None,
            fresh,
            write_back_early: false,
        }
    }

    /// The held chunks are in the file at the final name `local`.
    pub(super) fn in_final(local: &Path, trailer: Trailer, mode: u32) -> Self {
        let from_final = FromFinal { local: local.to_path_buf(), trailer, mode };
        TargetFile {
            storage: Mutex::new(None),
            from_final: Some(from_final),
            fresh: false,
            write_back_early: false,
        }
    }

    /// Starts the disk writes of each chunk as soon as it is written (when the file is
    /// flushed before its rename).
    pub(super) fn writing_back_early(mut self, on: bool) -> Self {
        self.write_back_early = on;
        self
    }

    /// Writes a chunk's verified plain bytes at `offset`.
    pub(super) fn write_chunk(
        &self,
        plain: &[u8],
        offset: u64,
        temps: &TempFiles,
    ) -> std::io::Result<()> {
        // A fresh file, sized with `set_len`, reads as zeros wherever nothing is written:
        // skipping all-zero chunks keeps sparse files sparse and saves the disk writes.
        // A held file must be overwritten: its bytes there differ.
        if self.fresh && plain.iter().all(|&b| b == 0) {
            return Ok(());
        }
        let mut storage = lock(&self.storage);
        if storage.is_none() {
            if let Some(f) = &self.from_final {
                let file = temps.track(&f.local, || {
                    partial::copy_final_to_temp(&temps.dir, &f.local, f.trailer, f.mode)
                })?;
                *storage = Some(file);
            }
        }
        match storage.as_ref() {
            Some(file) => {
                file.write_all_at(plain, offset)?;
                if self.write_back_early {
                    // Starts writing these pages to disk now (and lets the kernel drop
                    // them once clean), so the flush before the rename finds little
                    // left to do: 1 GiB to ext4, fsync without this 2.2 s, with it
                    // 1.4 s, no fsync 1.35 s (docs/durability.md). Advice only: a
                    // refusal changes nothing.
                    let len = std::num::NonZeroU64::new(plain.len() as u64);
                    let _ = rustix::fs::fadvise(file, offset, len, rustix::fs::Advice::DontNeed);
                }
                Ok(())
            }
            None => Err(std::io::Error::other("no file to write into")),
        }
    }

    /// The temporary file, if there is one (none when the file at the final name held
    /// everything and nothing was written).
    pub(super) fn take_file(&self) -> Option<File> {
        lock(&self.storage).take()
    }
}

/// The temporary files that exist right now, by final path. When the copy stops (fails
/// or is dropped), [`Self::stop`] removes them, or, with resume, keeps them for the next
/// run; either way a file created late by a blocking task is handled the same.
#[derive(Debug)]
pub(super) struct TempFiles {
    /// The target directory they are in.
    pub(super) dir: Arc<TargetDir>,
    state: Mutex<TempState>,
    /// Signalled whenever a file being made is done (see [`TempFiles::stop`]).
    made: Condvar,
    /// Keep unfinished temporary files when the copy stops (resume).
    keep: bool,
}

/// A temporary file not made, or let go, because the receiver stopped: not that file's
/// failure (the reason the copy stopped is told once, on its own).
#[derive(Debug, thiserror::Error)]
#[error("the copy was stopped")]
pub(crate) struct CopyStopped;

impl CopyStopped {
    /// Whether `err` is this.
    pub(crate) fn is(err: &std::io::Error) -> bool {
        err.get_ref().is_some_and(|inner| inner.is::<CopyStopped>())
    }
}

#[derive(Debug, Default)]
struct TempState {
    stopped: bool,
    /// Discard even what `keep` would keep.
    discard_all: bool,
    paths: HashSet<PathBuf>,
    /// Temporary files being made right now (on the blocking pool).
    making: usize,
}

/// How long a stopping copy waits for temporary files being made to be listed (a file
/// system that takes longer leaves the copy to end anyway).
const MAKING_WAIT: Duration = Duration::from_secs(10);

impl TempFiles {
    /// Temporary files in `dir`; with `keep`, unfinished ones outlive a stopped copy.
    pub(super) fn new(dir: Arc<TargetDir>, keep: bool) -> Self {
        TempFiles { dir, state: Mutex::default(), made: Condvar::new(), keep }
    }

    /// Runs `make`, which creates or opens the temporary file of `local` (on the
    /// blocking pool's thread), and lists it; makes nothing once the copy stopped.
    pub(super) fn track<T>(
        &self,
        local: &Path,
        make: impl FnOnce() -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        {
            let mut state = lock(&self.state);
            if state.stopped {
                return Err(std::io::Error::other(CopyStopped));
            }
            state.making += 1;
        }
        let made = make();
        let mut state = lock(&self.state);
        state.making -= 1;
        self.made.notify_all();
        let file = made?;
        if state.stopped {
            if state.discard_all || !self.keep {
                self.dir.discard(local);
            }
            return Err(std::io::Error::other(CopyStopped));
        }
        state.paths.insert(local.to_path_buf());
        Ok(file)
    }

    /// The temporary file of `local` is gone: renamed into place or discarded.
    pub(super) fn settled(&self, local: &Path) {
        lock(&self.state).paths.remove(local);
    }

    /// Discards the temporary file of `local` (its data is wrong or unwanted).
    pub(super) fn discard(&self, local: &Path) {
        self.dir.discard(local);
        self.settled(local);
    }

    /// Marks the copy stopped and waits until no temporary file is being made, so that
    /// every one is listed (or already discarded by `track`) when the caller clears
    /// them. Without the wait, a file whose making was under way when a hostile peer's
    /// error ended the copy was created after the clean-up and outlived the process
    /// (seen once under a loaded test run: `.file.txt.soku-part` left).
    /// With `discard_all`, a file whose making ends meanwhile is discarded even when
    /// unfinished files are kept.
    fn stopped(&self, discard_all: bool) -> MutexGuard<'_, TempState> {
        let mut state = lock(&self.state);
        state.stopped = true;
        state.discard_all |= discard_all;
        let (state, _timed_out) = self
            .made
            .wait_timeout_while(state, MAKING_WAIT, |s| s.making > 0)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        state
    }

    /// The copy stopped: discards every temporary file, now and any created later,
    /// unless they are kept for a resume.
    pub(super) fn stop(&self) {
        let mut state = self.stopped(false);
        for local in state.paths.drain() {
            if !self.keep {
                self.dir.discard(&local);
            }
        }
    }

    /// The copy failed in a way that makes its files not worth resuming (the peer broke
    /// the protocol): discards them even when they would be kept.
    pub(super) fn stop_discarding(&self) {
        let mut state = self.stopped(true);
        for local in state.paths.drain() {
            self.dir.discard(&local);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn a_stopped_copy_waits_for_a_temporary_file_being_made_and_discards_it() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = Arc::new(TargetDir::open(root.path()).expect("target dir"));
        let temps = Arc::new(TempFiles::new(dir.clone(), true));
        let local = PathBuf::from("file.txt");
        let done = Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let maker = {
            let (temps, dir, local, done) =
                (temps.clone(), dir.clone(), local.clone(), done.clone());
            std::thread::spawn(move || {
                temps.track(&local, || {
                    started_tx.send(()).expect("send");
                    // A slow file system: the copy stops while this is under way.
                    std::thread::sleep(Duration::from_millis(300));
                    let file = dir.create_temp(&local, 3, 0o644, None);
                    done.store(true, Ordering::SeqCst);
                    file
                })
            })
        };
        started_rx.recv().expect("the making started");
        temps.stop_discarding();
        assert!(done.load(Ordering::SeqCst), "the stop returned while a file was being made");
        assert!(maker.join().expect("join").is_err(), "a file made after the stop is refused");
        let left: Vec<_> = std::fs::read_dir(root.path()).expect("ls").flatten().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        assert!(
            temps.track(&local, || dir.create_temp(&local, 3, 0o644, None)).is_err(),
            "nothing is made once stopped"
        );
        assert_eq!(std::fs::read_dir(root.path()).expect("ls").count(), 0);
    }
}
