//! The receiver: accepts the manifest, reads and verifies chunks (in parallel on QUIC),
//! writes them into temporary files and renames each file into place once its root hash
//! checks out. Every decision about what to accept is the sans-IO
//! [`soku_proto::receive::Receiver`]'s; this module only does the I/O it asks for.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use soku_proto::chunk::{chunk_hash, ChunkHeader};
use soku_proto::message::Message;
use soku_proto::receive::{ChunkCheck, EntryAction, FileOutcome, Receiver};
use tokio::io::AsyncRead;
use tokio::sync::{watch, Notify, Semaphore};

use super::{codec, fsops, lock, CopyOptions};
use crate::events::{EventSink, TransferEvent};
use crate::link::{read_bytes, read_chunk_header, read_message, ControlTx};

/// Chunks read into memory at once (bounds memory: chunk size times this).
const CHUNKS_IN_MEMORY: usize = 64;
/// How often the receiver reports verified bytes to the sender.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// What the receiver ended with.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReceiveOutcome {
    /// Files verified and in place.
    pub files: u32,
    /// Bytes verified.
    pub bytes: u64,
    /// Files that failed (either side).
    pub failures: u32,
}

/// Where chunks come from.
pub enum ChunkIn {
    /// One QUIC unidirectional stream per chunk.
    Quic(quinn::Connection),
    /// Interleaved with control frames on the ssh channel.
    Stream,
}

struct Shared {
    state: Mutex<Receiver>,
    root: PathBuf,
    files: Mutex<HashMap<u32, Arc<TargetFile>>>,
    announced: watch::Sender<u64>,
    control: ControlTx,
    events: Arc<dyn EventSink>,
    opts: CopyOptions,
    memory: Semaphore,
    fatal: Mutex<Option<anyhow::Error>>,
    changed: Notify,
    last_progress: Mutex<Instant>,
    remote_failures: Mutex<u32>,
    /// Chunks between arrival and the end of `settle` (their file renamed into place).
    /// The state machine calls a file done at its last chunk, before the rename, so the
    /// receiver is finished only when this is also zero: otherwise `-p` could set a
    /// directory's times and a late rename into it would change them again.
    chunks_in_hand: AtomicUsize,
}

/// A temporary file being filled, and the lock its writers take turns on.
///
/// Writes to one file are serialized here rather than in the kernel: a buffered write
/// holds the inode's lock (tmpfs, ext4), and the kernel's waiters spin on it while the
/// holder copies. With up to [`CHUNKS_IN_MEMORY`] chunk writers that spinning took 7-11 %
/// of both cores in a loopback copy (perf), CPU the sender and the decryption needed;
/// waiters on this mutex sleep instead. Decoding and hashing stay parallel.
struct TargetFile {
    file: std::fs::File,
    writing: Mutex<()>,
}

impl TargetFile {
    fn new(file: std::fs::File) -> Self {
        TargetFile { file, writing: Mutex::new(()) }
    }

    fn write_all_at(&self, data: &[u8], offset: u64) -> std::io::Result<()> {
        let _turn = lock(&self.writing);
        self.file.write_all_at(data, offset)
    }
}

/// Counts one chunk in hand for as long as it lives.
struct InHand<'a>(&'a Shared);

impl<'a> InHand<'a> {
    fn new(shared: &'a Shared) -> Self {
        shared.chunks_in_hand.fetch_add(1, Ordering::SeqCst);
        InHand(shared)
    }
}

impl Drop for InHand<'_> {
    fn drop(&mut self) {
        self.0.chunks_in_hand.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_one();
    }
}

impl Shared {
    fn set_fatal(&self, err: anyhow::Error) {
        lock(&self.fatal).get_or_insert(err);
        self.changed.notify_one();
    }

    /// Handles one chunk whose header was read from `input`; reads its bytes from there.
    /// On an `ordered` input (the ssh channel) the file's entry always comes first, so a
    /// chunk for a file not yet open is a protocol violation, not something to wait for.
    async fn on_chunk<R: AsyncRead + Unpin>(
        self: &Arc<Self>,
        header: ChunkHeader,
        input: &mut R,
        ordered: bool,
    ) -> anyhow::Result<()> {
        let _in_hand = InHand::new(self);
        let mut announced = self.announced.subscribe();
        // Bytes taken off the connection while waiting for the file's entry.
        let mut early = None;
        let (offset, plain_len) = loop {
            let check = lock(&self.state).check_chunk(&header)?;
            match check {
                ChunkCheck::Accept { offset, plain_len } => break (offset, plain_len),
                ChunkCheck::Discard => {
                    if early.is_none() {
                        let _permit = self.memory.acquire().await?;
                        read_bytes(input, header.wire_len).await?;
                    }
                    return Ok(());
                }
                ChunkCheck::NotYetAnnounced if ordered => anyhow::bail!(
                    "protocol violation: chunk for file {} before its entry",
                    header.file
                ),
                ChunkCheck::NotYetAnnounced => {
                    // Read the chunk before waiting: unread stream data holds QUIC
                    // flow-control credit, and the entry we wait for travels on the
                    // same connection. With the sender's 64 MiB in flight equal to the
                    // connection window, a copy of three 1 GiB files stalled for good
                    // at the first file boundary in 3 of 5 runs on loopback.
                    if early.is_none() {
                        let permit = self.memory.acquire().await?;
                        early = Some((permit, read_bytes(input, header.wire_len).await?));
                    }
                    announced.changed().await?
                }
            }
        };
        let (permit, wire) = match early {
            Some(read) => read,
            None => {
                let permit = self.memory.acquire().await?;
                (permit, read_bytes(input, header.wire_len).await?)
            }
        };
        let file = lock(&self.files).get(&header.file).cloned();
        // safe: the state machine accepts chunks only once the file is opened, and the
        // file leaves `files` only when it settles, which needs this chunk first.
        let Some(file) = file else {
            anyhow::bail!("internal: chunk accepted for file {} with no open file", header.file)
        };
        let written = tokio::task::spawn_blocking(move || -> std::io::Result<Option<[u8; 32]>> {
            let Some(plain) = codec::decode(&header, wire, plain_len) else { return Ok(None) };
            let hash = chunk_hash(&plain);
            // The temporary file was sized with `set_len`, so it reads as zeros wherever
            // nothing is written: skipping all-zero chunks keeps sparse files sparse and
            // saves the disk writes.
            if hash == header.hash && plain.iter().any(|&b| b != 0) {
                file.write_all_at(&plain, offset)?;
            }
            Ok(Some(hash))
        })
        .await?;
        drop(permit);
        let outcome = match written {
            // Undecodable bytes fail the file as a hash mismatch would.
            Ok(hash) => lock(&self.state).on_chunk_written(&header, hash.unwrap_or([0; 32]))?,
            Err(e) => {
                let local = lock(&self.state).on_file_failed(header.file);
                match local {
                    Some(local) => FileOutcome::Failed {
                        id: header.file,
                        local,
                        error: soku_proto::ProtoError::Violation(format!("write failed: {e}")),
                    },
                    None => FileOutcome::Pending,
                }
            }
        };
        self.settle(outcome).await?;
        self.maybe_report_progress().await
    }

    /// Acts on what a chunk or summary did to its file.
    async fn settle(self: &Arc<Self>, outcome: FileOutcome) -> anyhow::Result<()> {
        match outcome {
            FileOutcome::Pending => {}
            FileOutcome::Ready(ready) => {
                let file = lock(&self.files).remove(&ready.id);
                let preserve = self.opts.preserve;
                let result = tokio::task::spawn_blocking(move || {
                    let Some(target) = file else { return Ok(()) };
                    fsops::finish_file(&ready.local, &target.file, &ready.meta, preserve)
                        .map_err(|e| (ready.local.clone(), e.to_string()))
                })
                .await?;
                if let Err((local, message)) = result {
                    fsops::discard(&local);
                    self.events.event(TransferEvent::FileFailed {
                        path: local.display().to_string(),
                        message: message.clone(),
                    });
                    *lock(&self.remote_failures) += 1;
                }
            }
            FileOutcome::Failed { id, local, error } => {
                lock(&self.files).remove(&id);
                fsops::discard(&local);
                let message = error.to_string();
                self.events.event(TransferEvent::FileFailed {
                    path: local.display().to_string(),
                    message: message.clone(),
                });
                self.control.send(Message::FileFailed { file: id, message }).await?;
            }
        }
        self.changed.notify_one();
        Ok(())
    }

    async fn maybe_report_progress(&self) -> anyhow::Result<()> {
        {
            let mut last = lock(&self.last_progress);
            if last.elapsed() < PROGRESS_EVERY {
                return Ok(());
            }
            *last = Instant::now();
        }
        let bytes = lock(&self.state).totals().bytes;
        self.events.event(TransferEvent::Verified { bytes });
        self.control.send(Message::Progress { verified_bytes: bytes }).await
    }

    async fn on_entry(self: &Arc<Self>, entry: soku_proto::manifest::Entry) -> anyhow::Result<()> {
        let mode = match &entry {
            soku_proto::manifest::Entry::File { meta, .. } => meta.mode,
            soku_proto::manifest::Entry::Dir { .. } => 0,
        };
        let action = lock(&self.state).on_entry(entry)?;
        let root = self.root.clone();
        match action {
            EntryAction::MakeDir { local } => {
                let shown = local.display().to_string();
                tokio::task::spawn_blocking(move || fsops::ensure_dir(&root, &local))
                    .await?
                    .map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
            }
            EntryAction::CreateFile { id, local, size } => {
                let made = {
                    let local = local.clone();
                    tokio::task::spawn_blocking(move || {
                        fsops::create_temp(&root, &local, size, mode)
                    })
                    .await?
                };
                match made {
                    Ok(file) => {
                        lock(&self.files).insert(id, Arc::new(TargetFile::new(file)));
                        lock(&self.state).on_file_opened(id);
                    }
                    Err(e) => {
                        lock(&self.state).on_file_failed(id);
                        let message = e.to_string();
                        self.events.event(TransferEvent::FileFailed {
                            path: local.display().to_string(),
                            message: message.clone(),
                        });
                        self.control.send(Message::FileFailed { file: id, message }).await?;
                    }
                }
            }
        }
        self.announced.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Removes the temporary files of everything unfinished (after a fatal error).
    fn discard_open(&self) {
        for (_, local) in lock(&self.state).open_files() {
            fsops::discard(local);
        }
    }
}

/// Receives into `receiver`'s target. `control_in` carries control frames (and, on the
/// ssh channel, chunks).
pub async fn run<R: AsyncRead + Unpin + Send>(
    receiver: Receiver,
    root: PathBuf,
    opts: CopyOptions,
    control: ControlTx,
    control_in: &mut R,
    chunks: ChunkIn,
    events: Arc<dyn EventSink>,
) -> anyhow::Result<ReceiveOutcome> {
    let (announced, _) = watch::channel(0u64);
    let shared = Arc::new(Shared {
        state: Mutex::new(receiver),
        root,
        files: Mutex::default(),
        announced,
        control: control.clone(),
        events: events.clone(),
        opts,
        memory: Semaphore::new(CHUNKS_IN_MEMORY),
        fatal: Mutex::default(),
        changed: Notify::new(),
        last_progress: Mutex::new(Instant::now()),
        remote_failures: Mutex::new(0),
        chunks_in_hand: AtomicUsize::new(0),
    });
    let start = Instant::now();
    let acceptor = match chunks {
        ChunkIn::Quic(conn) => Some(tokio::spawn(accept_chunks(conn, shared.clone()))),
        ChunkIn::Stream => None,
    };
    let ordered = acceptor.is_none();
    let result = control_loop(&shared, control_in, ordered).await;
    if let Some(acceptor) = acceptor {
        acceptor.abort();
    }
    match result {
        Ok(()) => {}
        Err(err) => {
            shared.discard_open();
            let _ = control.send(Message::Fatal { message: format!("{err:#}") }).await;
            return Err(err);
        }
    }
    if opts.preserve {
        let dirs = lock(&shared.state).directories().to_vec();
        for (local, meta) in dirs.iter().rev() {
            if let Err(e) = fsops::finish_dir(local, meta) {
                events.event(TransferEvent::Warning(format!("{}: {e}", local.display())));
            }
        }
    }
    let totals = lock(&shared.state).totals();
    let failures = totals.failures + *lock(&shared.remote_failures);
    let outcome = ReceiveOutcome { files: totals.files, bytes: totals.bytes, failures };
    control
        .send(Message::Finished { files: outcome.files, bytes: outcome.bytes, failures })
        .await?;
    events.event(TransferEvent::Verified { bytes: outcome.bytes });
    events.event(TransferEvent::Finished {
        files: outcome.files,
        bytes: outcome.bytes,
        failures,
        elapsed: start.elapsed(),
    });
    Ok(outcome)
}

/// Reads control frames until the manifest has ended and every file is settled.
async fn control_loop<R: AsyncRead + Unpin>(
    shared: &Arc<Shared>,
    input: &mut R,
    ordered: bool,
) -> anyhow::Result<()> {
    let mut ended = false;
    loop {
        if let Some(err) = lock(&shared.fatal).take() {
            return Err(err);
        }
        let in_hand = shared.chunks_in_hand.load(Ordering::SeqCst);
        if ended && in_hand == 0 && lock(&shared.state).is_finished() {
            return Ok(());
        }
        if ended && ordered {
            // On one ordered stream every chunk came before the end of the manifest.
            anyhow::bail!("protocol violation: the manifest ended with files incomplete");
        }
        if ended {
            // Only data streams are still arriving: wait for them to settle (a lost
            // connection is reported through `fatal` by the stream acceptor). The control
            // input is not read here, so no read is ever cancelled mid-frame.
            let _ = tokio::time::timeout(Duration::from_secs(1), shared.changed.notified()).await;
            continue;
        }
        let msg = read_message(input).await?;
        let Some(msg) = msg else {
            anyhow::bail!("the sender closed the connection before the copy finished");
        };
        match msg {
            Message::Plan { files, bytes } => {
                shared.events.event(TransferEvent::Planned { files, bytes })
            }
            Message::Entry(entry) => shared.on_entry(entry).await?,
            Message::Chunk(header) => shared.on_chunk(header, input, true).await?,
            Message::FileSummary { file, root } => {
                let outcome = lock(&shared.state).on_summary(file, root)?;
                shared.settle(outcome).await?;
            }
            Message::FileAborted { file, message } => {
                if let Some(local) = lock(&shared.state).on_file_failed(file) {
                    lock(&shared.files).remove(&file);
                    fsops::discard(&local);
                    shared.events.event(TransferEvent::FileFailed {
                        path: local.display().to_string(),
                        message,
                    });
                }
            }
            Message::SourceError { path, message } => {
                *lock(&shared.remote_failures) += 1;
                shared.events.event(TransferEvent::FileFailed { path, message });
            }
            Message::EndOfManifest { files, bytes } => {
                lock(&shared.state).on_end(files, bytes)?;
                shared.announced.send_modify(|n| *n += 1);
                ended = true;
            }
            Message::Fatal { message } => anyhow::bail!("remote: {message}"),
            other => anyhow::bail!(
                "protocol violation: the sender sent {}",
                crate::transfer::message_name(&other)
            ),
        }
    }
}

/// Accepts QUIC data streams, one chunk each, and handles them concurrently.
async fn accept_chunks(conn: quinn::Connection, shared: Arc<Shared>) {
    loop {
        let mut stream = match conn.accept_uni().await {
            Ok(stream) => stream,
            Err(e) => {
                shared.set_fatal(anyhow::anyhow!("connection lost: {e}"));
                return;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let result = async {
                let header = read_chunk_header(&mut stream).await?;
                shared.on_chunk(header, &mut stream, false).await
            }
            .await;
            if let Err(e) = result {
                shared.set_fatal(e);
            }
        });
    }
}
