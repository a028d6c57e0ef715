//! The pieces every in-memory test uses: a scene of real files in a temporary
//! directory, both roles run against each other over an in-memory link, and a sink that
//! records events.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use soku_engine::ahead::Walked;
use soku_engine::events::{EventSink, TransferEvent};
use soku_engine::link::Link;
use soku_engine::{CopyOptions, EngineError, Outcome, Role};
use soku_proto::manifest::{Entry, Meta};
use soku_proto::message::{CopyFlags, Message};
use soku_proto::path::{NameFilter, WirePath};
use soku_proto::receive::Receiver;

/// Smallest chunk size: many chunks per file in a small test.
pub const SMALL_CHUNKS: u32 = soku_proto::chunk::MIN_CHUNK_SIZE;

/// Options for a test copy: the defaults (resume on), small chunks.
pub fn options(recursive: bool) -> CopyOptions {
    let flags = CopyFlags {
        recursive,
        chunk_size: SMALL_CHUNKS,
        resume: true,
        fsync: true,
        ..CopyFlags::NONE
    };
    CopyOptions { byte_names: true, ..CopyOptions::asked(flags) }
}

/// Options for a copy with `--no-resume`; also what a raw peer that plays the sender by
/// hand (and does not wait for held reports) needs.
pub fn no_resume(recursive: bool) -> CopyOptions {
    let opts = options(recursive);
    CopyOptions { flags: CopyFlags { resume: false, ..opts.flags }, ..opts }
}

/// Records every event.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<TransferEvent>>);

impl EventSink for Recorder {
    fn event(&self, event: TransferEvent) {
        self.0.lock().unwrap().push(event);
    }
}

impl Recorder {
    /// Paths of the files reported failed.
    pub fn failed(&self) -> Vec<String> {
        let events = self.0.lock().unwrap();
        events
            .iter()
            .filter_map(|e| match e {
                TransferEvent::FileFailed { path, .. } => Some(path.clone()),
                _ => None,
            })
            .collect()
    }

    /// The sender's lines about files it could not read, as the receiver heard them.
    pub fn source_failures(&self) -> Vec<String> {
        let events = self.0.lock().unwrap();
        events
            .iter()
            .filter_map(|e| match e {
                TransferEvent::SourceFailed { message, .. } => Some(message.clone()),
                _ => None,
            })
            .collect()
    }
}

/// A source directory and a target directory side by side.
pub struct Scene {
    pub dir: tempfile::TempDir,
}

impl Scene {
    pub fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::create_dir(dir.path().join("dst")).unwrap();
        Scene { dir }
    }

    pub fn src(&self) -> PathBuf {
        self.dir.path().join("src")
    }

    pub fn dst(&self) -> PathBuf {
        self.dir.path().join("dst")
    }

    /// Writes `len` bytes of a pattern that differs per `seed` at `src/rel`.
    pub fn file(&self, rel: &str, len: usize, seed: u8) -> PathBuf {
        let path = self.src().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, pattern(len, seed)).unwrap();
        path
    }
}

/// Bytes that differ per position and per seed (no all-zero chunks unless asked).
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    let mut xof = blake3::Hasher::new_derive_key("soku engine test").update(&[seed]).finalize_xof();
    let mut out = vec![0u8; len];
    xof.fill(&mut out);
    out
}

/// Plain file metadata for entries a test writes by hand.
pub fn meta() -> Meta {
    Meta { mode: 0o644, mtime: 0, mtime_nsec: 0, atime: 0, atime_nsec: 0 }
}

/// The entry of file `id`, `name` at the top of the target, `size` bytes, as a peer
/// playing the sender by hand sends it.
pub fn file_entry(id: u32, name: &str, size: u64) -> Message {
    Message::Entry(Entry::File { id, path: WirePath(vec![name.into()]), size, meta: meta() })
}

/// The sender's role for `sources`.
pub async fn sender(sources: &[PathBuf], recursive: bool) -> Role {
    Role::Send(Walked::walk(sources.to_vec(), recursive).await.unwrap())
}

/// The receiver's role writing into `target` for `count` sources; `names` for a
/// download (top-level names must be among them).
pub fn receiver(target: &Path, count: u32, recursive: bool, names: Option<&[&str]>) -> Role {
    receiver_of_chunks(target, count, recursive, names, SMALL_CHUNKS)
}

/// [`receiver`], for a copy whose chunks are `chunk_size` bytes.
pub fn receiver_of_chunks(
    target: &Path,
    count: u32,
    recursive: bool,
    names: Option<&[&str]>,
    chunk_size: u32,
) -> Role {
    // As the binary resolves it: a directory an unfinished copy made resumes.
    let target = soku_engine::partial::made_dir::resolve_target(target, count).unwrap();
    let root = target.root().to_path_buf();
    let names = names.map(|n| NameFilter::for_requested(n.iter().map(|s| s.as_bytes())));
    let receiver = Box::new(Receiver::new(target, names, recursive, chunk_size).unwrap());
    Role::Receive { receiver, root, beneath: None, blind: false, sync: None }
}

/// Both sides' results and events.
pub struct Ran {
    pub sent: Result<Outcome, EngineError>,
    pub received: Result<Outcome, EngineError>,
    pub sender_events: Arc<Recorder>,
    pub receiver_events: Arc<Recorder>,
}

/// Runs `send` on one end and `receive` on the other, then closes both links.
pub async fn run_pair(pair: (Link, Link), send: Role, receive: Role, opts: CopyOptions) -> Ran {
    let (mut a, mut b) = pair;
    let (sender_events, receiver_events) =
        (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
    let (se, re) = (sender_events.clone(), receiver_events.clone());
    let (sent, received) = tokio::join!(
        async {
            let out = soku_engine::run(send, &mut a, opts, se).await;
            let _ = a.close(std::time::Duration::from_secs(5)).await;
            out
        },
        async {
            let out = soku_engine::run(receive, &mut b, opts, re).await;
            let _ = b.close(std::time::Duration::from_secs(5)).await;
            out
        },
    );
    Ran { sent, received, sender_events, receiver_events }
}

/// Every path below `dir`, relative, sorted; directories end with `/`.
pub fn listing(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = slashes(path.strip_prefix(base).unwrap().display());
            if entry.file_type().unwrap().is_dir() {
                out.push(format!("{rel}/"));
                walk(base, &path, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Asserts that `a` and `b` hold the same bytes.
pub fn assert_same(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert!(
        x == y,
        "{} and {} differ ({} vs {} bytes)",
        a.display(),
        b.display(),
        x.len(),
        y.len()
    );
}

/// Writes `bytes` into the file at `path` at `offset`, as another program would.
pub fn write_at(path: &Path, bytes: &[u8], offset: u64) {
    use std::io::{Seek, SeekFrom, Write};
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(bytes).unwrap();
}

/// Reads `buf.len()` bytes of `file` at `offset`.
pub fn read_at(mut file: &std::fs::File, buf: &mut [u8], offset: u64) {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.read_exact(buf).unwrap();
}

/// Makes a symlink at `link` to `target` where this user may (Unix; Windows asks for a
/// privilege or developer mode): whether it is there. (Wine reports success and makes
/// nothing.)
pub fn symlink_if_allowed(target: &Path, link: &Path) -> bool {
    #[cfg(unix)]
    let made = std::os::unix::fs::symlink(target, link);
    #[cfg(windows)]
    let made = std::os::windows::fs::symlink_dir(target, link);
    made.is_ok() && std::fs::symlink_metadata(link).is_ok()
}

/// A path as text with `/` between its parts, whichever separator the system wrote
/// (Windows takes both).
pub fn slashes(path: impl std::fmt::Display) -> String {
    let text = path.to_string();
    if cfg!(windows) {
        text.replace('\\', "/")
    } else {
        text
    }
}
