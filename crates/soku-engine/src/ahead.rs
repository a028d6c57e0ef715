//! Hashing ahead: an upload walks its sources and hashes their first chunks while ssh
//! logs in, so the copy itself has less to do.
//!
//! Logging in takes a few hundred milliseconds on a LAN (key exchange, authentication,
//! the remote shell starting `soku serve`) and seconds on a long path, and in that time
//! this machine is mostly idle. Every chunk hashed then is a BLAKE3 pass the sender
//! skips once data flows, when it competes with encryption and the receiver for the
//! CPU: on a 2-core loopback copy the sender's hashing was ~8 % of all CPU.
//!
//! The workers run at the lowest priority (nice 19) so they never slow the login they
//! overlap, and stop as soon as the copy starts. A hash is used only for the very file
//! that was hashed: same device, inode, size, modification time and change time when the
//! sender opens it. Every write moves the change time (which, unlike the modification
//! time, no program can set back), so a file rewritten in the meantime is hashed again
//! as it is sent. Should the bytes change anyway without the kernel noting it, the
//! receiver's check against this hash fails the file instead of storing a mix.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use soku_proto::chunk::{chunk_hash, ChunkPlan};

use crate::fsops::TargetDir;
use crate::mutex::lock;
use crate::read_at::read_exact_at;
use crate::walk::{self, Item};

/// Most hashing threads, whatever the machine: the login they overlap is short, and a
/// copy rarely reads faster than a few cores can hash.
const MAX_WORKERS: usize = 4;

/// The nice value of the hashing threads: they take only CPU nothing else wants.
const WORKER_NICE: i32 = 19;

/// Most bytes hashed ahead. Each is read into the page cache well before it is sent;
/// with little free memory the first could be evicted (and read from disk twice) before
/// the copy gets to them. A login long enough to hash more (seconds) is on a path whose
/// rate, not the CPU, limits the copy anyway.
const MAX_AHEAD_BYTES: u64 = 2 << 30;

/// What a sender needs before it starts: the walked sources and any hashes known.
#[derive(Debug, Default)]
pub struct Walked {
    /// The sources' entries, in sending order.
    pub items: Vec<Item>,
    /// Chunk hashes computed ahead of the copy.
    pub known: KnownHashes,
    /// For a confined server (`soku serve --root`): the directory the walk stayed
    /// beneath, which the sender opens every file beneath too.
    pub beneath: Option<Arc<TargetDir>>,
    /// Whether this is a sync's sender (the receiver may skip files and delete paths).
    pub sync: bool,
}

impl Walked {
    /// Walks `sources` now, hashing nothing ahead (the server's sender, and tests).
    pub async fn walk(sources: Vec<PathBuf>, recursive: bool) -> std::io::Result<Walked> {
        Walked::walk_beneath(sources, recursive, None).await
    }

    /// [`Walked::walk`] for a confined server: every source, and everything in a tree,
    /// is looked at beneath `beneath` and found there or not at all (`walk::walk`).
    ///
    /// Dropping the future ends the walk too (at its next entry): a server whose client
    /// went away while it walked a large tree would otherwise go on walking, and the
    /// runtime waits for its blocking tasks before the process exits.
    pub async fn walk_beneath(
        sources: Vec<PathBuf>,
        recursive: bool,
        beneath: Option<Arc<TargetDir>>,
    ) -> std::io::Result<Walked> {
        let abort = AbortOnDrop(Arc::new(AtomicBool::new(false)));
        let (flag, within) = (abort.0.clone(), beneath.clone());
        let items = tokio::task::spawn_blocking(move || {
            walk_all(&sources, recursive, within.as_deref(), &flag)
        })
        .await
        .map_err(std::io::Error::other)?;
        drop(abort);
        Ok(Walked { items, known: KnownHashes::default(), beneath, sync: false })
    }
}

impl Walked {
    /// A sync's walk of `sources` (see [`crate::sync_walk`]), with `filter` compiled from
    /// `rules`; beneath `beneath` for a confined server, and given up when dropped, as
    /// [`Walked::walk_beneath`]. Nothing is hashed ahead: the receiver's quick check
    /// reads neither side's files, and most of a sync's are skipped.
    pub async fn walk_sync(
        sources: Vec<PathBuf>,
        rules: soku_proto::sync::SyncRules,
        filter: crate::filter::Filter,
        beneath: Option<Arc<TargetDir>>,
    ) -> std::io::Result<Walked> {
        let abort = AbortOnDrop(Arc::new(AtomicBool::new(false)));
        let (flag, within) = (abort.0.clone(), beneath.clone());
        let items = tokio::task::spawn_blocking(move || {
            let mut items = Vec::new();
            crate::sync_walk::walk_sync(
                &sources,
                &rules,
                &filter,
                within.as_deref(),
                &mut |item| {
                    items.push(item);
                    !flag.load(Ordering::Relaxed)
                },
            );
            items
        })
        .await
        .map_err(std::io::Error::other)?;
        drop(abort);
        Ok(Walked { items, known: KnownHashes::default(), beneath, sync: true })
    }
}

/// Sets its flag when dropped: how a future that is given up tells the blocking work
/// it waits for to stop.
struct AbortOnDrop(Arc<AtomicBool>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The walk's items, in order; it ends early once `abort` is set.
fn walk_all(
    sources: &[PathBuf],
    recursive: bool,
    beneath: Option<&TargetDir>,
    abort: &AtomicBool,
) -> Vec<Item> {
    let mut items = Vec::new();
    walk::walk(sources, recursive, beneath, &mut |item| {
        items.push(item);
        !abort.load(Ordering::Relaxed)
    });
    items
}

/// Which file a set of hashes belongs to: a file replaced or written since it was
/// hashed differs in at least one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileIdentity {
    /// The identity of the file `md` describes.
    fn of(path: &Path, md: &Metadata) -> FileIdentity {
        let (dev, ino) = crate::sys::identity(path, md);
        FileIdentity {
            dev,
            ino,
            size: md.len(),
            mtime: crate::sys::modified(md),
            ctime: crate::sys::changed(md),
        }
    }
}

/// Chunk hashes computed ahead, by local path.
#[derive(Debug, Default)]
pub struct KnownHashes(HashMap<PathBuf, FileHashes>);

/// The hashes of one file's chunks, by index; `None` where the workers did not get to.
pub type ChunkHashes = Vec<Option<[u8; 32]>>;

#[derive(Debug)]
struct FileHashes {
    identity: FileIdentity,
    hashes: ChunkHashes,
}

impl KnownHashes {
    /// The hashes of `local`'s chunks, if it is still the file that was hashed (`now` is
    /// its metadata as the sender opened it).
    pub fn take(&mut self, local: &Path, now: &Metadata) -> Option<ChunkHashes> {
        let known = self.0.remove(local)?;
        (known.identity == FileIdentity::of(local, now)).then_some(known.hashes)
    }

    /// How many chunk hashes are known, over all files.
    #[cfg(test)]
    fn count(&self) -> usize {
        self.0.values().map(|f| f.hashes.iter().flatten().count()).sum()
    }
}

/// The walk and the hashing ahead, running until [`HashAhead::finish`].
pub struct HashAhead {
    /// Set when the copy starts: no more hashing (the walk still completes).
    stop: Arc<AtomicBool>,
    /// Set when the copy will not happen: the walk ends too, so a failed login does not
    /// leave the process waiting for the walk of a large tree (the runtime waits for its
    /// blocking tasks before it exits).
    abort: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<Walked>>,
}

impl HashAhead {
    /// Starts walking `sources` and hashing their files' chunks (`chunk_size` bytes each)
    /// on the blocking pool.
    pub fn start(sources: Vec<PathBuf>, recursive: bool, chunk_size: u32) -> HashAhead {
        let stop = Arc::new(AtomicBool::new(false));
        let abort = Arc::new(AtomicBool::new(false));
        let (stop_flag, abort_flag) = (stop.clone(), abort.clone());
        let task = tokio::task::spawn_blocking(move || {
            let items = walk_all(&sources, recursive, None, &abort_flag);
            let known = hash_files(&items, chunk_size, &stop_flag);
            Walked { items, known, beneath: None, sync: false }
        });
        HashAhead { stop, abort, task: Some(task) }
    }

    /// Stops hashing (the chunks being hashed complete) and returns the walk with every
    /// hash known so far.
    pub async fn finish(mut self) -> std::io::Result<Walked> {
        self.stop.store(true, Ordering::Relaxed);
        let task = self.task.take().ok_or_else(|| std::io::Error::other("finished twice"))?;
        task.await.map_err(std::io::Error::other)
    }
}

impl Drop for HashAhead {
    /// A copy that never started (login failed) stops the walk and the workers.
    fn drop(&mut self) {
        if self.task.is_some() {
            self.abort.store(true, Ordering::Relaxed);
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A file being hashed, shared by the workers. It closes once the cursor has moved on
/// and its last chunk is hashed, so at most one file per worker (and the cursor's) is
/// open at a time, whatever the number of files.
struct OpenFile {
    file: File,
    plan: ChunkPlan,
    result: Arc<FileResult>,
}

/// What the workers found for one file.
struct FileResult {
    path: PathBuf,
    identity: FileIdentity,
    hashes: Mutex<ChunkHashes>,
}

/// Where the workers are: the next item to open and the next chunk of the open file.
#[derive(Default)]
struct Cursor {
    item: usize,
    open: Option<(Arc<OpenFile>, u32)>,
    /// Bytes handed to the workers so far.
    bytes: u64,
    results: Vec<Arc<FileResult>>,
}

/// Hashes the chunks of `items`' files in order, on up to [`MAX_WORKERS`] threads, until
/// `stop` is set, every chunk is hashed or [`MAX_AHEAD_BYTES`] are.
fn hash_files(items: &[Item], chunk_size: u32, stop: &AtomicBool) -> KnownHashes {
    hash_files_up_to(items, chunk_size, stop, MAX_AHEAD_BYTES)
}

fn hash_files_up_to(
    items: &[Item],
    chunk_size: u32,
    stop: &AtomicBool,
    max_bytes: u64,
) -> KnownHashes {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_WORKERS);
    let cursor = Mutex::new(Cursor::default());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                // Best effort: at normal priority the hashing would only compete more.
                crate::sys::lower_this_thread(WORKER_NICE);
                let mut buf = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let Some((file, index, (offset, len))) =
                        next_chunk(&cursor, items, chunk_size, max_bytes)
                    else {
                        break;
                    };
                    // A read error leaves the hash unknown; the sender meets it itself.
                    if read_exact_at(&file.file, len as usize, offset, &mut buf).is_ok() {
                        if let Some(slot) = lock(&file.result.hashes).get_mut(index as usize) {
                            *slot = Some(chunk_hash(&buf));
                        }
                    }
                }
            });
        }
    });
    let Cursor { results, open, .. } = cursor.into_inner().unwrap_or_else(|p| p.into_inner());
    // The workers are gone; with the open file dropped each result has one owner.
    drop(open);
    let files = results
        .into_iter()
        .filter_map(|result| Arc::try_unwrap(result).ok())
        .map(|result| {
            let hashes = result.hashes.into_inner().unwrap_or_else(|p| p.into_inner());
            (result.path, FileHashes { identity: result.identity, hashes })
        })
        .collect();
    KnownHashes(files)
}

/// The next chunk to hash and its span, opening the next file when the current one is
/// done; `None` when all are, or the next would pass `max_bytes`.
fn next_chunk(
    cursor: &Mutex<Cursor>,
    items: &[Item],
    chunk_size: u32,
    max_bytes: u64,
) -> Option<(Arc<OpenFile>, u32, (u64, u32))> {
    let mut cursor = lock(cursor);
    loop {
        if let Some((file, next)) = &mut cursor.open {
            let index = *next;
            if let Some(span) = file.plan.span(index) {
                let file = file.clone();
                *next += 1;
                cursor.bytes += u64::from(span.1);
                if cursor.bytes > max_bytes {
                    return None;
                }
                return Some((file, index, span));
            }
            cursor.open = None;
        }
        let item = items.get(cursor.item)?;
        cursor.item += 1;
        let Item::File { local, size, .. } = item else { continue };
        // Opening under the lock keeps the order simple; it is one syscall per file.
        let Some(file) = open(local, *size, chunk_size) else { continue };
        cursor.results.push(file.result.clone());
        cursor.open = Some((Arc::new(file), 0));
    }
}

/// Opens `path` for hashing if it still has the `size` the walk saw: the sender cuts the
/// file by that size, so chunks of another size would not be its chunks.
fn open(path: &Path, size: u64, chunk_size: u32) -> Option<OpenFile> {
    let file = File::open(path).ok()?;
    let md = file.metadata().ok()?;
    if md.len() != size {
        return None;
    }
    let plan = ChunkPlan::new(size, chunk_size);
    let count = usize::try_from(plan.count()).ok()?;
    let result = FileResult {
        path: path.to_path_buf(),
        identity: FileIdentity::of(path, &md),
        hashes: Mutex::new(vec![None; count]),
    };
    Some(OpenFile { file, plan, result: Arc::new(result) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::File::create(&path).and_then(|mut f| f.write_all(bytes)).expect("write");
        path
    }

    fn known_for(paths: &[&Path], chunk: u32) -> (Vec<Item>, KnownHashes) {
        let sources: Vec<PathBuf> = paths.iter().map(|p| p.to_path_buf()).collect();
        let items = walk_all(&sources, false, None, &AtomicBool::new(false));
        let known = hash_files(&items, chunk, &AtomicBool::new(false));
        (items, known)
    }

    #[test]
    fn every_chunk_of_every_file_is_hashed_as_the_sender_would() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let pa = file_of(dir.path(), "a", &a);
        let pb = file_of(dir.path(), "b", b"");
        let (_, mut known) = known_for(&[&pa, &pb], 4096);
        assert_eq!(known.count(), 3);
        let md = std::fs::metadata(&pa).expect("md");
        let hashes = known.take(&pa, &md).expect("hashes of a");
        let expect: Vec<_> = a.chunks(4096).map(|c| Some(chunk_hash(c))).collect();
        assert_eq!(hashes, expect);
        // An empty file has no chunks, and is known as such.
        let md = std::fs::metadata(&pb).expect("md");
        assert_eq!(known.take(&pb, &md), Some(vec![]));
    }

    #[test]
    fn many_files_are_hashed_across_the_workers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths: Vec<PathBuf> = (0..60u8)
            .map(|i| file_of(dir.path(), &format!("f{i}"), &vec![i; 100 + usize::from(i) * 97]))
            .collect();
        let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let (_, mut known) = known_for(&refs, 1024);
        for (i, path) in paths.iter().enumerate() {
            let bytes = std::fs::read(path).expect("read");
            let md = std::fs::metadata(path).expect("md");
            let expect: Vec<_> = bytes.chunks(1024).map(|c| Some(chunk_hash(c))).collect();
            assert_eq!(known.take(path, &md), Some(expect), "file {i}");
        }
    }

    #[test]
    fn a_file_changed_after_hashing_gets_no_hashes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = file_of(dir.path(), "f", &[1u8; 5000]);
        let (_, mut known) = known_for(&[&path], 4096);
        // Rewritten with another size: a different file now.
        file_of(dir.path(), "f", &[2u8; 6000]);
        let md = std::fs::metadata(&path).expect("md");
        assert_eq!(known.take(&path, &md), None);
    }

    #[test]
    fn hashing_ahead_stops_at_its_byte_budget() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = file_of(dir.path(), "f", &[4u8; 10 * 1024]);
        let items = walk_all(&[path.to_path_buf()], false, None, &AtomicBool::new(false));
        let mut known = hash_files_up_to(&items, 1024, &AtomicBool::new(false), 3 * 1024);
        assert_eq!(known.count(), 3);
        let md = std::fs::metadata(&path).expect("md");
        let hashes = known.take(&path, &md).expect("hashes");
        assert!(hashes[..3].iter().all(Option::is_some) && hashes[3..].iter().all(Option::is_none));
    }

    // The change time (Unix ctime), which Windows keeps outside the standard library's
    // metadata.
    #[cfg(unix)]
    #[test]
    fn a_file_rewritten_in_place_with_its_mtime_set_back_gets_no_hashes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = file_of(dir.path(), "f", &[1u8; 5000]);
        let (_, mut known) = known_for(&[&path], 4096);
        let before = std::fs::metadata(&path).expect("md").modified().expect("mtime");
        // Past the coarse clock tick some kernels stamp change times with.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let file = std::fs::OpenOptions::new().write(true).open(&path).expect("open");
        crate::sys::write_all_at(&file, &[2u8; 100], 10).expect("write");
        file.set_modified(before).expect("set mtime back");
        let md = std::fs::metadata(&path).expect("md");
        assert_eq!(md.modified().expect("mtime"), before);
        assert_eq!(known.take(&path, &md), None);
    }

    #[test]
    fn a_file_that_changed_size_after_the_walk_is_not_hashed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = file_of(dir.path(), "f", &[1u8; 5000]);
        let items = walk_all(&[path.to_path_buf()], false, None, &AtomicBool::new(false));
        // Grown between the walk and the hashing: the sender still cuts it at 5000.
        file_of(dir.path(), "f", &[1u8; 7000]);
        let mut known = hash_files(&items, 4096, &AtomicBool::new(false));
        assert_eq!(known.count(), 0);
        let md = std::fs::metadata(&path).expect("md");
        assert_eq!(known.take(&path, &md), None);
    }

    #[test]
    fn an_aborted_walk_ends_early() {
        let dir = tempfile::tempdir().expect("tempdir");
        for i in 0..20 {
            file_of(dir.path(), &format!("f{i}"), b"x");
        }
        let items = walk_all(&[dir.path().to_path_buf()], true, None, &AtomicBool::new(true));
        assert_eq!(items.len(), 1, "the walk stops after its first item");
        let all = walk_all(&[dir.path().to_path_buf()], true, None, &AtomicBool::new(false));
        assert_eq!(all.len(), 21);
    }

    #[test]
    fn a_stopped_worker_hashes_nothing_more() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = file_of(dir.path(), "f", &[3u8; 50_000]);
        let items = walk_all(&[path.to_path_buf()], false, None, &AtomicBool::new(false));
        let known = hash_files(&items, 4096, &AtomicBool::new(true));
        assert_eq!(known.count(), 0);
    }
}
