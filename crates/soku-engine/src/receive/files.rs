//! The receiver's files in the making: where each file's chunks are written (with the
//! lock its writers take turns on), and the list of temporary files to clean up when a
//! copy stops.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use soku_proto::chunk::{chunk_hash, ChunkPlan};
use soku_proto::message::HeldChunk;

use crate::direct_io::{self, open_direct, Access};
use crate::failure::HeldChanged;
use crate::fsops::TargetDir;
use crate::mutex::lock;
use crate::page_buf::direct_writable;
use crate::partial::{self, Trailer};
use crate::read_at::read_exact_at;

/// Where one file's chunks are written, and the lock its writers take turns on.
///
/// Writes to one file are serialized here rather than in the kernel: a buffered write
/// holds the inode's lock (tmpfs, ext4), and the kernel's waiters spin on it while the
/// holder copies. With up to 64 chunk writers that spinning took 7-11 % of both cores
/// in a loopback copy (perf), CPU the sender and the decryption needed; waiters on this
/// mutex sleep instead. Decoding and hashing stay parallel.
pub(super) struct TargetFile {
    storage: Mutex<Storage>,
    /// How to make the temporary file from the final one.
    from_final: Option<FromFinal>,
    /// The temporary file was created empty now: all-zero chunks need not be written.
    fresh: bool,
    /// The file is flushed before its rename: start the disk writes of each chunk at
    /// once, straight from the chunk's memory where it can ([`Direct`]).
    write_back_early: bool,
    /// Its chunks are written in place, not on the blocking pool ([`crate::small_steps`]).
    writes_in_place: bool,
    /// The chunks held from an earlier copy and not written since, by offset: their
    /// length and the hash the sender was told. They are read and hashed again just
    /// before the rename ([`Self::check_kept`]).
    kept: Mutex<BTreeMap<u64, (u32, [u8; 32])>>,
}

/// The file being written, and its second descriptor for direct writes.
struct Storage {
    /// The temporary file; `None` while the held chunks are those of the file at the
    /// final name, which is copied to a temporary file before the first write.
    file: Option<File>,
    direct: Direct,
}

/// Writing a chunk straight to the disk (`O_DIRECT`) instead of copying it into the page
/// cache first. On a 1 GiB loopback copy to ext4 that copy, the page cache's fresh
/// pages and their write-back were a third of the receiver's CPU
/// (`lab/2026-11-24-loopback-disk`); a file flushed before its rename gains
/// nothing from the cache. Only large, aligned chunks go this way ([`direct_io::worth_it`],
/// [`direct_writable`]): the usual 1 MiB chunk, which the link reads into page-aligned
/// memory. A file's unaligned last chunk, compressed chunks, and every chunk on a file
/// system that is not a local block device's or refuses `O_DIRECT` go through the page
/// cache.
enum Direct {
    /// Not opened yet: opened at the first aligned chunk.
    Untried,
    /// A second descriptor of the same file, opened with `O_DIRECT`.
    Open(Arc<File>),
    /// No direct writes: the file system refused them, or the file is done.
    Off,
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
            storage: Mutex::new(Storage { file: Some(file), direct: Direct::Untried }),
            from_final: None,
            fresh,
            write_back_early: false,
            writes_in_place: false,
            kept: Mutex::default(),
        }
    }

    /// The held chunks are in the file at the final name `local`.
    pub(super) fn in_final(local: &Path, trailer: Trailer, mode: u32) -> Self {
        let from_final = FromFinal { local: local.to_path_buf(), trailer, mode };
        TargetFile {
            storage: Mutex::new(Storage { file: None, direct: Direct::Untried }),
            from_final: Some(from_final),
            fresh: false,
            write_back_early: false,
            writes_in_place: false,
            kept: Mutex::default(),
        }
    }

    /// Remembers the chunks `held` (cut by `plan`), which the sender will not send again
    /// if they match, for [`Self::check_kept`].
    pub(super) fn keeping(self, held: &[HeldChunk], plan: ChunkPlan) -> Self {
        let kept = held
            .iter()
            .filter_map(|c| plan.span(c.index).map(|(offset, len)| (offset, (len, c.hash))))
            .collect();
        TargetFile { kept: Mutex::new(kept), ..self }
    }

    /// Reads and hashes again, from `file` (the temporary file, or the final one when
    /// nothing was written), every held chunk that no chunk received since replaced:
    /// the bytes renamed into place are then the bytes whose hashes the sender checked,
    /// even if another program wrote to the file between the first look and now.
    /// [`HeldChanged`] if one differs. A write after this check and before the rename
    /// is not seen: nothing short of a lock every writer honours closes that.
    pub(super) fn check_kept(&self, file: &File) -> std::io::Result<()> {
        let kept = std::mem::take(&mut *lock(&self.kept));
        let mut buf = Vec::new();
        for (offset, (len, hash)) in kept {
            read_exact_at(file, len as usize, offset, &mut buf)?;
            if chunk_hash(&buf) != hash {
                return Err(HeldChanged::io());
            }
        }
        Ok(())
    }

    /// Starts the disk writes of each chunk as soon as it comes (when the file is
    /// flushed before its rename): straight from the chunk's memory where it can
    /// ([`Direct`]), else through the page cache with its write-back started at once.
    pub(super) fn writing_back_early(mut self, on: bool) -> Self {
        self.write_back_early = on;
        self
    }

    /// Writes its chunks in place when `small` (a small file on a file system that
    /// answers at once, [`crate::small_steps`]). Never a file whose held chunks are at
    /// the final name: its first write copies that file, however large, first.
    pub(super) fn writing_in_place(mut self, small: bool) -> Self {
        self.writes_in_place = small && self.from_final.is_none();
        self
    }

    /// Whether its chunks are written in place ([`Self::writing_in_place`]).
    pub(super) fn writes_in_place(&self) -> bool {
        self.writes_in_place
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
        lock(&self.kept).remove(&offset);
        let mut storage = lock(&self.storage);
        if storage.file.is_none() {
            if let Some(f) = &self.from_final {
                let file = temps.track(&f.local, || {
                    partial::copy_final_to_temp(&temps.dir, &f.local, f.trailer, f.mode)
                })?;
                storage.file = Some(file);
            }
        }
        let direct = direct_io::worth_it(plain.len(), offset) && direct_writable(plain, offset);
        if self.write_back_early && direct {
            if let Some(direct) = storage.direct_file() {
                // Direct writes of one file run side by side: a writer waits for the
                // disk, not for another's copy, so nothing spins on the inode's lock.
                drop(storage);
                match crate::sys::write_all_at(&direct, plain, offset) {
                    Ok(()) => return Ok(()),
                    // Alignment the device wants beyond ours, or a file system that
                    // takes the flag at open and refuses the write: the page cache it
                    // is, for this file.
                    Err(e) if direct_io::refused(&e) => {
                        storage = lock(&self.storage);
                        storage.direct = Direct::Off;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        match storage.file.as_ref() {
            Some(file) => {
                crate::sys::write_all_at(file, plain, offset)?;
                if self.write_back_early {
                    // Starts writing these pages to disk now (and lets the kernel drop
                    // them once clean), so the flush before the rename finds little
                    // left to do: 1 GiB to ext4, fsync without this 2.2 s, with it
                    // 1.4 s, no fsync 1.35 s (docs/durability.md). Advice only: a
                    // refusal changes nothing.
                    crate::sys::drop_cached(file, offset, plain.len() as u64);
                }
                Ok(())
            }
            None => Err(std::io::Error::other("no file to write into")),
        }
    }

    /// The temporary file, if there is one (none when the file at the final name held
    /// everything and nothing was written).
    pub(super) fn take_file(&self) -> Option<File> {
        let mut storage = lock(&self.storage);
        // Its direct descriptor closes now too: nothing more is written to this file.
        storage.direct = Direct::Off;
        storage.file.take()
    }
}

impl Storage {
    /// The file's direct descriptor, opened at the first call; `None` if the file
    /// system refuses direct writes.
    fn direct_file(&mut self) -> Option<Arc<File>> {
        if matches!(self.direct, Direct::Untried) {
            self.direct = match self.file.as_ref().map(|file| open_direct(file, Access::Write)) {
                Some(Ok(file)) => Direct::Open(Arc::new(file)),
                _ => Direct::Off,
            };
        }
        match &self.direct {
            Direct::Open(file) => Some(file.clone()),
            _ => None,
        }
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
        // Only a stop waits for this, and it marks the copy stopped first, under the
        // same lock: a notification otherwise is a system call for no one.
        if state.stopped {
            self.made.notify_all();
        }
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
    /// unless they are kept for a resume. Returns the files whose temporary files are
    /// kept (none once stopped before).
    pub(super) fn stop(&self) -> Vec<PathBuf> {
        let mut state = self.stopped(false);
        let unfinished: Vec<PathBuf> = state.paths.drain().collect();
        if self.keep {
            return unfinished;
        }
        for local in &unfinished {
            self.dir.discard(local);
        }
        Vec::new()
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
    use crate::page_buf::{PageBuf, PAGE};

    /// A temporary file of `size` bytes in a fresh target directory.
    fn target(size: u64) -> (tempfile::TempDir, Arc<TempFiles>, File) {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = Arc::new(TargetDir::open(root.path()).expect("target dir"));
        let local = root.path().join("f");
        let file = dir.entry(&local).and_then(|e| e.create_temp(size, 0o644, None)).expect("temp");
        (root, Arc::new(TempFiles::new(dir, false)), file)
    }

    #[test]
    fn aligned_chunks_go_straight_to_the_disk_and_the_rest_through_the_page_cache() {
        let size = 2 * (1 << 20) + 1000;
        let (_root, temps, file) = target(size);
        let refused = open_direct(&file, Access::Write).is_err();
        let mut want = vec![0u8; size as usize];
        want.iter_mut().enumerate().for_each(|(i, b)| *b = (i % 251) as u8 + 1);
        let target = TargetFile::new(file, true).writing_back_early(true);
        let first = PageBuf::copy_of(&want[..1 << 20]);
        target.write_chunk(&first, 0, &temps).expect("first chunk");
        let direct_now = matches!(lock(&target.storage).direct, Direct::Open(_));
        // The file system of the test's temporary directory decides: ext4, XFS, Btrfs
        // and F2FS take direct writes, tmpfs keeps the page cache.
        assert_eq!(direct_now, !refused, "an aligned chunk was not written directly");
        // Memory off the page boundary, and the unaligned last chunk: the page cache.
        let mut second = vec![0u8; (1 << 20) + 1];
        second[1..].copy_from_slice(&want[1 << 20..2 << 20]);
        target.write_chunk(&second[1..], 1 << 20, &temps).expect("second chunk");
        let last = PageBuf::copy_of(&want[2 << 20..]);
        target.write_chunk(&last, 2 << 20, &temps).expect("last chunk");
        let file = target.take_file().expect("the file");
        let mut got = vec![0u8; size as usize];
        crate::sys::read_exact_at(&file, &mut got, 0).expect("read back");
        assert!(got == want, "the file's bytes differ from the chunks written");
    }

    #[test]
    fn without_the_flush_before_the_rename_every_chunk_goes_through_the_page_cache() {
        let (_root, temps, file) = target(1 << 20);
        let target = TargetFile::new(file, true);
        let chunk = PageBuf::copy_of(&[9u8; 1 << 20]);
        assert_eq!(chunk.as_ptr().align_offset(PAGE), 0);
        target.write_chunk(&chunk, 0, &temps).expect("chunk");
        assert!(matches!(lock(&target.storage).direct, Direct::Untried));
        let mut got = vec![0u8; 1 << 20];
        crate::sys::read_exact_at(&target.take_file().expect("file"), &mut got, 0)
            .expect("read back");
        assert!(got.iter().all(|&b| b == 9));
    }

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
                    let file = dir.entry(&local).and_then(|e| e.create_temp(3, 0o644, None));
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
            temps
                .track(&local, || dir.entry(&local).and_then(|e| e.create_temp(3, 0o644, None)))
                .is_err(),
            "nothing is made once stopped"
        );
        assert_eq!(std::fs::read_dir(root.path()).expect("ls").count(), 0);
    }
}
