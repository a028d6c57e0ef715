//! The sender: announces the plan and each entry, reads every file as chunks, many in
//! flight at once, and reads the receiver's reports meanwhile. What may be sent when
//! (ids, an entry before its chunks, a summary after the last chunk, aborts, the end of
//! the manifest) is decided by the sans-IO [`soku_proto::send::Sender`]; this module only
//! does the I/O it asks for.
//!
//! One loop owns everything: chunk tasks live in a [`JoinSet`], so an error or a cancel
//! stops every one of them, and none outlives the copy.
//!
//! Files are announced up to [`ANNOUNCE_AHEAD`] ahead of the one being read, so the
//! receiver prepares them (and, with resume, says what it holds of them) while earlier
//! files are still being sent: waiting for the receiver costs one round trip per copy,
//! not one per file. A chunk the receiver holds is read and hashed like any other, and
//! sent only if the source's bytes differ.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use soku_proto::chunk::ChunkHeader;
use soku_proto::message::HeldBase;
use soku_proto::name::shown;
use soku_proto::send::{ChunkSpan, Report, Sender};
use soku_proto::ProtoError;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::ahead::{ChunkHashes, Walked};
use crate::compress_policy::{self, CompressPolicy};
use crate::events::{EventSink, TransferEvent};
use crate::failure;
use crate::link::{Inbound, Link, Transport};
use crate::mutex::lock;
use crate::options::{CopyOptions, Outcome};
use crate::small_steps::{self, Keeps};
use crate::source_file::SourceFile;
use crate::source_open::SourceOpener;
use crate::throttle::Throttle;
use crate::walk::Item;
use crate::{codec, EngineError};

/// Files announced ahead of the one being read, at least: enough for the receiver's
/// reports on the next files to arrive while this one is sent.
const ANNOUNCE_AHEAD: usize = 32;

/// Files announced ahead at most (further bounded by the descriptors this process may
/// open, [`crate::limits`]). Small files need many: each waits a round trip for the
/// receiver's report before its chunk leaves, so a path carries at most this many
/// files per round trip. 32 capped 2000 files of 8 KiB at 100 ms RTT to 2.6 MB/s, a
/// fifth of a 100 Mbit/s link (from `lab/2026-11-24-small-files`). Beyond the
/// first [`ANNOUNCE_AHEAD`], files are announced only while those ahead hold less than
/// the bytes in flight: large files never need more.
const ANNOUNCE_AHEAD_MAX: usize = 1024;

/// Files announced ahead at most in a sync (further bounded by descriptors as above),
/// whatever their size: most of a sync's files are skipped by the receiver after one
/// round trip, unread, so the files awaiting its word bound how many a round trip
/// settles. At [`ANNOUNCE_AHEAD_MAX`], and with the bytes in flight bounding small
/// files too, a re-run of a 100 000-file tree on 100 Mbit/s x 50 ms spent most of its
/// time waiting for decisions (`lab/2026-11-29-sync-100k`).
const SYNC_AHEAD_MAX: usize = 8192;

/// Files opened and announced in one go (one hand-off to the blocking pool).
const OPEN_BATCH: usize = 64;

/// Fewest files announced in one go once [`ANNOUNCE_AHEAD`] are ahead (unless the walk
/// has fewer left).
const REFILL_BATCH: usize = 16;

/// Files ahead whose chunks are looked for, when the first waits for the receiver's
/// report (reports of files prepared concurrently may come out of order).
const SCAN_AHEAD: usize = 64;

/// Chunk tasks at most, whatever their size (further bounded by descriptors): many
/// small chunks fit the bytes in flight, and on QUIC each is a stream that ends a
/// round trip later, when acknowledged.
const CHUNK_TASKS_MAX: usize = 1024;

/// How often a sender waiting for room within what the congestion window allows ahead
/// (`crate::pipeline`) looks at the window again when nothing else happened. A
/// completed chunk or a message wakes it too, but on a long lossy path a chunk
/// completes rounds after its last byte left (at 100 Mbit/s x 1 s with 5 % random loss
/// the first 8.6-11.2 s into the copy), while the window doubles every round of
/// startup. Woken by those alone, the sender stopped feeding the transport, the
/// transport reported rounds with nothing to send, and the controller does not grow its
/// window in such rounds: on the emulator startup stood still at a 4-5 MB window for up
/// to a second in six of nine copies (`lab/2026-12-01-one-second-stall`). 20 ms is a
/// fiftieth of such a round; on shorter paths chunks complete often enough anyway.
const WINDOW_RECHECK: Duration = Duration::from_millis(20);

/// Chunk reads (read, hash, maybe compress) running at once on the blocking pool, at
/// most: one per core, at least two, at most eight. Each read is CPU work on a file the
/// kernel reads ahead, so more at once than cores gain nothing; but every read beyond
/// the pool's idle threads starts a new thread (with its own allocator heap and fresh
/// buffers), and a copy's first `in_flight` (64) chunks all asked at once. On the
/// 100 Mbit/s x 50 ms emulated path, 125 MB upload, the client ran 43 threads and spent
/// 24 % of its profile samples zeroing fresh pages; with this limit 9 threads and 11 %
/// (from `lab/2026-11-24-cpu-per-byte`).
fn parallel_reads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8)
}

/// How one chunk task ended.
enum ChunkDone {
    /// Sent (and, on QUIC, acknowledged); its hash came before ([`Hashed`]).
    Sent { len: u32 },
    /// The receiver holds exactly these bytes already: not sent.
    Held { file: u32, index: u32, hash: [u8; 32], len: u32 },
    /// The source could not be read: the file is aborted, the copy goes on.
    ReadFailed { file: u32, error: std::io::Error, len: u32 },
}

/// A chunk read and hashed, about to be sent: its hash counts towards its file's root
/// at once, so the file's summary leaves as soon as its last chunk is read, not a round
/// trip later when that chunk is acknowledged (the receiver settles a file only once
/// the chunks the summary counts have arrived).
struct Hashed {
    file: u32,
    index: u32,
    hash: [u8; 32],
    /// The receiver held different bytes for it.
    claimed: bool,
}

/// Sends the `walked` sources over `link`.
pub async fn run(
    walked: Walked,
    opts: CopyOptions,
    link: &mut Link,
    events: Arc<dyn EventSink>,
) -> Result<Outcome, EngineError> {
    // The measurement switch `SOKU_SENT_LOG` (see `crate::sent_log`).
    let events = crate::sent_log::wrap(events);
    let Walked { items, mut known, beneath, sync } = walked;
    let items = if opts.byte_names { items } else { crate::walk::utf8_names_only(items) };
    let (files, bytes) = items.iter().fold((0u32, 0u64), |(n, b), item| match item {
        Item::File { size, .. } => (n.saturating_add(1), b.saturating_add(*size)),
        _ => (n, b),
    });
    let mut rules = Sender::new(opts.flags.chunk_size, opts.flags.resume)?
        .with_nothing_held(opts.nothing_held)
        .with_sync(sync);
    link.tx.send_control(rules.plan(files, bytes)?).await?;
    events.event(TransferEvent::Planned { files, bytes });
    let start = Instant::now();

    // Chunks in flight stay within the bulk budget, so control frames always have
    // room on the connection (see `soku_transport::BULK_BUDGET`), and within a few
    // congestion windows where the link tells one (`crate::pipeline`).
    let budget = soku_transport::BULK_BUDGET / u64::from(opts.flags.chunk_size.max(1));
    let in_flight =
        link.traits.chunks_in_flight.min(usize::try_from(budget).unwrap_or(usize::MAX)).max(1);
    let pipeline = in_flight as u64 * u64::from(opts.flags.chunk_size);
    let descriptors = crate::limits::for_files(opts.peer_open_files);
    // Each file ahead holds a descriptor until it is all handed out, and each chunk task
    // its file's until the chunk is acknowledged; at the receiver, each of those files
    // is a temporary file held open until it is complete. Under a low hard limit on
    // either side (which no process can raise) fewer of both keep the copy going, a
    // little slower on small files, where opening more would fail them. With the usual
    // limits (raised to 65536 where allowed) neither bound is the one that binds.
    let ahead_min = ANNOUNCE_AHEAD.min(descriptors / 8).max(1);
    let most_ahead = if sync { SYNC_AHEAD_MAX } else { ANNOUNCE_AHEAD_MAX };
    let ahead_max = (descriptors / 8).clamp(ahead_min, most_ahead);
    let tasks_max = (descriptors / 4)
        .clamp(in_flight, CHUNK_TASKS_MAX.max(in_flight))
        .min((descriptors / 4).max(1));
    let policy = opts
        .flags
        .compress
        .then(|| Arc::new(Mutex::new(CompressPolicy::new(Instant::now(), pipeline))));
    let (hashed_tx, hashed_rx) = tokio::sync::mpsc::unbounded_channel();
    let handed = Arc::new(AtomicU64::new(0));
    // However this session ends, the client's totals learn every byte it handed to the
    // transport (see `ReportHanded`).
    let _report = ReportHanded { handed: handed.clone(), events: events.clone() };
    let mut copy = Copy {
        rules,
        tasks: JoinSet::new(),
        names: Vec::new(),
        policy,
        throttle: Throttle::new(opts.flags.rate_limit_bps).map(Arc::new),
        reads: Arc::new(Semaphore::new(parallel_reads())),
        events: events.clone(),
        outcome: None,
        order: 0,
        bases: HashMap::new(),
        differing: HashMap::new(),
        differed: Differed::default(),
        resumed: 0,
        resumed_files: HashSet::new(),
        skipped: 0,
        deleted: 0,
        handed: handed.clone(),
        in_flight_bytes: 0,
        charged_bytes: 0,
        hashed: hashed_tx,
        hashed_rx,
        beneath,
    };
    let mut items = VecDeque::from(items);
    let mut announced: VecDeque<Announced> = VecDeque::new();
    // Bytes of the files in `announced`.
    let mut ahead_bytes = 0u64;
    loop {
        // Announce more while the window allows, a batch at a time.
        loop {
            let room = |n: usize, bytes: u64| {
                n < ahead_min || (n < ahead_max && (sync || bytes < pipeline))
            };
            let (mut n, mut bytes) = (announced.len(), ahead_bytes);
            let mut fits = 0;
            for item in items.iter().take(OPEN_BATCH) {
                if !room(n, bytes) {
                    break;
                }
                if let Item::File { size, .. } = item {
                    n += 1;
                    bytes = bytes.saturating_add(*size);
                }
                fits += 1;
            }
            // With enough files ahead, only a batch worth its hand-off to the blocking
            // pool: topped up as each was handed out, small files went one per trip.
            let enough_ahead = announced.len() >= ahead_min;
            if fits == 0 || (enough_ahead && fits < REFILL_BATCH && fits < items.len()) {
                break;
            }
            let batch: Vec<Item> = items.drain(..fits).collect();
            for file in copy.announce_batch(batch, &mut known, link).await? {
                ahead_bytes = ahead_bytes.saturating_add(file.size);
                announced.push_back(file);
            }
        }
        if announced.is_empty() {
            if items.is_empty() {
                break;
            }
            continue;
        }
        // The first file ahead with a chunk to hand out; files all handed out are let
        // go (and more are announced before anything else).
        let mut next = None;
        let mut let_go = false;
        let mut i = 0;
        while i < announced.len().min(SCAN_AHEAD) {
            let id = announced[i].id;
            match copy.rules.next_chunk(id) {
                Some(span) => {
                    next = Some((i, span));
                    break;
                }
                None if copy.rules.waits_for_receiver(id) => i += 1,
                None => {
                    if let Some(done) = announced.remove(i) {
                        ahead_bytes = ahead_bytes.saturating_sub(done.size);
                    }
                    let_go = true;
                }
            }
        }
        match next {
            Some((i, span)) => {
                // Looked at again after every step, and every `WINDOW_RECHECK` while
                // the window is what holds the sender back: it grows with every
                // acknowledgement, not only with chunks that complete.
                let tx = link.tx.clone();
                let ahead = || crate::pipeline::bytes_ahead(tx.window(), tx.loss(), pipeline);
                // A chunk the receiver says it holds is read and hashed here, and sent
                // only if its bytes differ (rarely): it is held to the window only then.
                // Held to the window from the start, a sync with --checksum compared a
                // tree at the window's pace, not the disks' (lab/2026-11-29-sync-100k).
                let charge = if span.claimed.is_some() { 0 } else { u64::from(span.len) };
                let len = u64::from(span.len);
                loop {
                    let full = copy.tasks.len() >= tasks_max
                        || (copy.in_flight_bytes > 0 && copy.in_flight_bytes + len > pipeline);
                    let behind_window =
                        copy.charged_bytes > 0 && copy.charged_bytes + charge > ahead();
                    if full {
                        copy.step(link).await?;
                    } else if behind_window {
                        copy.step_or_recheck(link).await?;
                    } else {
                        break;
                    }
                }
                if let Some(policy) = &copy.policy {
                    lock(policy).set_pipeline(ahead());
                }
                let file = &announced[i];
                copy.start_chunk(span, file, link.tx.clone());
            }
            None if let_go => {}
            // Every file looked at waits for the receiver's report.
            None => copy.step(link).await?,
        }
    }
    // On an ordered link the end of the manifest comes after every chunk; on one whose
    // chunks travel apart, as soon as every file is summarised (the receiver waits for
    // the chunks still on their way), a round trip before the last are acknowledged.
    while !copy.tasks.is_empty() && (link.traits.ordered || copy.rules.open_files() > 0) {
        copy.step(link).await?;
    }
    link.tx.send_control(copy.rules.end()?).await?;
    let outcome = loop {
        if let Some(outcome) = copy.outcome {
            break outcome;
        }
        copy.step(link).await?;
    };
    copy.differed.tell(&events);
    if sync {
        events.event(outcome.sync_totals());
    }
    events.event(TransferEvent::Finished {
        files: outcome.files,
        bytes: outcome.bytes,
        failures: outcome.failures,
        resumed: outcome.resumed,
        elapsed: start.elapsed(),
    });
    Ok(outcome)
}

/// Tells the events the bytes handed to the transport when a session ends, failed
/// ones included. A chunk counts once handed over, not once its stream is
/// acknowledged: a chunk whose acknowledgement an outage cut off may still have been
/// written at the target, where the next session finds it held, and it must count as
/// sent then, not as already there (seen: 1 MiB called resumed after a 70 s outage,
/// `tests/e2e/outage_e2e.rs`). A chunk lost in the cut counts again when sent again.
struct ReportHanded {
    handed: Arc<AtomicU64>,
    events: Arc<dyn EventSink>,
}

impl Drop for ReportHanded {
    fn drop(&mut self) {
        let bytes = self.handed.load(Ordering::Relaxed);
        self.events.event(TransferEvent::Sent { bytes });
    }
}

/// The sender's state while it runs.
struct Copy {
    rules: Sender,
    /// Chunk tasks, each with the bytes it is charged against the window.
    tasks: JoinSet<Result<(ChunkDone, u64), EngineError>>,
    /// Local paths by file id, for the receiver's failure reports.
    names: Vec<String>,
    policy: Option<Arc<Mutex<CompressPolicy>>>,
    throttle: Option<Arc<Throttle>>,
    /// Room for chunk reads on the blocking pool ([`parallel_reads`]).
    reads: Arc<Semaphore>,
    events: Arc<dyn EventSink>,
    /// The receiver's final count, once it came.
    outcome: Option<Outcome>,
    /// Chunks started so far (each chunk's place in the send order).
    order: u64,
    /// With resume: what the receiver held of each file, from its first report.
    bases: HashMap<u32, HeldBase>,
    /// With resume: chunks per file the receiver held with other bytes (sent again).
    differing: HashMap<u32, u32>,
    /// Of those, in files resumed from a partial file, what the copy tells once.
    differed: Differed,
    /// Bytes the receiver held already and were not sent.
    resumed: u64,
    /// Files of which the receiver held a chunk that was not sent.
    resumed_files: HashSet<u32>,
    /// In a sync: files the receiver skipped, and paths it deleted.
    skipped: u32,
    deleted: u32,
    /// Bytes of the chunks handed to the transport ([`TransferEvent::Sent`]), counted
    /// by the chunk tasks.
    handed: Arc<AtomicU64>,
    /// Plain bytes of the chunks being read or sent.
    in_flight_bytes: u64,
    /// Of those, the bytes of chunks to be sent (not claimed by the receiver), which the
    /// window bounds.
    charged_bytes: u64,
    /// Chunk tasks tell their hash here before they send.
    hashed: tokio::sync::mpsc::UnboundedSender<Hashed>,
    hashed_rx: tokio::sync::mpsc::UnboundedReceiver<Hashed>,
    /// The directory a confined server opens every source beneath ([`Walked::beneath`]).
    beneath: Option<Arc<crate::fsops::TargetDir>>,
}

/// Chunks that a resumed partial file held with bytes other than the source's, told in
/// one line per copy (a line per file read as if every file were damaged), however the
/// copy ends: a session cut short tells what it found too.
#[derive(Default)]
struct Differed {
    chunks: u64,
    files: u32,
    first: Option<String>,
    told: bool,
}

impl Differed {
    fn add(&mut self, path: String, chunks: u32) {
        self.chunks += u64::from(chunks);
        self.files += 1;
        self.first.get_or_insert(path);
    }

    /// The line, once, if any chunk differed.
    fn tell(&mut self, events: &Arc<dyn EventSink>) {
        let Some(first) = self.first.as_ref().filter(|_| !self.told) else { return };
        self.told = true;
        let chunks = format!("{} chunk{}", self.chunks, if self.chunks == 1 { "" } else { "s" });
        let line = if self.files == 1 {
            format!(
                "{first}: {chunks} of the interrupted copy differed from the source: sent again"
            )
        } else {
            format!(
                "{chunks} in {} files of the interrupted copy differed from their sources \
                 (the first: {first}): sent again",
                self.files
            )
        };
        events.event(TransferEvent::Warning(line));
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        let events = self.events.clone();
        self.differed.tell(&events);
    }
}

/// A file announced, whose chunks are still to be handed out.
struct Announced {
    id: u32,
    size: u64,
    file: Arc<SourceFile>,
    /// Where a small file's file system keeps it, if its chunks may be read in place
    /// ([`crate::small_steps`]): in memory, or on a local disk when cached.
    small: Option<Keeps>,
    ahead: ChunkHashes,
    watch: Arc<SourceWatch>,
}

/// A source file being read: its status when it was opened, and how many of its chunks
/// are still to be read. The read that completes the file checks its status again (one
/// `fstat` per file, no extra reads) before its hash can go into the file's root, so a
/// file changed while it was read fails instead of arriving as a mix of old and new
/// bytes. A change after its last chunk was read (a log appended to later in the copy)
/// is not one: what was sent is the file as it was then, read whole.
struct SourceWatch {
    opened: failure::SourceStamp,
    unread: AtomicU32,
}

impl SourceWatch {
    fn new(opened: &std::fs::Metadata, chunks: u32) -> SourceWatch {
        SourceWatch { opened: failure::SourceStamp::of(opened), unread: AtomicU32::new(chunks) }
    }

    /// One chunk of `file` was read; after the last, whether the file is as it was
    /// opened. Every other read completed before its count went down (the count is one
    /// atomic), so the status is taken once nothing more of the file is read.
    ///
    /// A chunk whose hash was `known_ahead` ([`crate::ahead`]) is checked at once too:
    /// that hash is of the bytes the file held when it had the status it was opened
    /// with, and once that status moved the bytes just read may be others, which the
    /// receiver would refuse as damaged ("failed verification") before the file's last
    /// read could say what happened. Its `fstat` costs far less than the hash it saves.
    fn chunk_read(&self, file: &File, known_ahead: bool) -> std::io::Result<()> {
        let last =
            self.unread.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if last != Ok(1) && !known_ahead {
            return Ok(());
        }
        self.opened.check_file(file)
    }
}

impl Copy {
    /// Announces walked items in order: errors, directories, and files (returned, for
    /// their chunks to be sent). The files are opened together, in one blocking task.
    async fn announce_batch(
        &mut self,
        batch: Vec<Item>,
        known: &mut crate::ahead::KnownHashes,
        link: &mut Link,
    ) -> Result<Vec<Announced>, EngineError> {
        let paths: Vec<_> = batch
            .iter()
            .filter_map(|item| match item {
                Item::File { local, .. } => Some(local.clone()),
                _ => None,
            })
            .collect();
        let beneath = self.beneath.clone();
        let opened = tokio::task::spawn_blocking(move || {
            // Files of one device share its file system: one `fstatfs` per run of them.
            let mut last: Option<(u64, Keeps)> = None;
            let mut opener = SourceOpener::beneath(beneath);
            let mut open = |local: &std::path::Path| {
                let file = opener.open(local)?;
                let md = file.metadata()?;
                let keeps = match last {
                    Some((dev, keeps)) if dev == crate::sys::device(&md) => keeps,
                    _ => last.insert((crate::sys::device(&md), Keeps::of(&file))).1,
                };
                let small = keeps.in_place(md.len()).then_some(keeps);
                Ok::<_, std::io::Error>((file, md, small))
            };
            paths.iter().map(|local| open(local)).collect::<Vec<_>>()
        })
        .await?;
        let mut opened = opened.into_iter();
        let mut files = Vec::new();
        for item in batch {
            match item {
                Item::Error { path, message } => self.source_error(link, path, message).await?,
                Item::Dir { wire, meta } => {
                    link.tx.send_control(self.rules.dir(wire, meta)?).await?
                }
                Item::File { wire, local, size, meta } => {
                    let Some(opened) = opened.next() else {
                        return Err(EngineError::Internal("a file was not opened".into()));
                    };
                    let (file, ahead, md, small) = match opened {
                        Ok((file, md, small)) => {
                            let ahead = known.take(&local, &md).unwrap_or_default();
                            (Arc::new(SourceFile::new(file)), ahead, md, small)
                        }
                        Err(e) => {
                            let failure = failure::describe_source(&local, &e);
                            // Every file after this one would fail the same way.
                            if failure.ends_copy {
                                return Err(EngineError::Source(failure.message));
                            }
                            let path = shown(&local);
                            self.source_error(link, path, failure.problem).await?;
                            continue;
                        }
                    };
                    let start = self.rules.file(wire, size, meta)?;
                    let path = shown(&local);
                    self.events.event(TransferEvent::File { path: path.clone(), bytes: size });
                    self.names.push(path);
                    link.tx.send_control(start.entry).await?;
                    if let Some(summary) = start.summary {
                        link.tx.send_control(summary).await?;
                    }
                    // The rules refuse a file of more chunks than a u32 counts.
                    let chunks = u32::try_from(start.chunks).unwrap_or(u32::MAX);
                    let watch = Arc::new(SourceWatch::new(&md, chunks));
                    files.push(Announced { id: start.id, size, file, small, ahead, watch });
                }
            }
        }
        Ok(files)
    }

    async fn source_error(
        &mut self,
        link: &mut Link,
        path: String,
        message: String,
    ) -> Result<(), EngineError> {
        self.events
            .event(TransferEvent::FileFailed { path: path.clone(), message: message.clone() });
        Ok(link.tx.send_control(self.rules.source_error(path, message)?).await?)
    }

    /// Starts the task that reads, hashes, maybe compresses and sends one chunk.
    fn start_chunk(&mut self, span: ChunkSpan, file: &Announced, tx: Arc<dyn Transport>) {
        // A chunk the receiver may hold is compressed only if it has to be sent, which
        // is rare: not at all.
        let mode = match span.claimed {
            Some(_) => None,
            None => self.policy.as_ref().map(|p| lock(p).next_chunk(Instant::now())),
        };
        let task = ChunkTask {
            file: file.file.clone(),
            small: file.small,
            watch: file.watch.clone(),
            span,
            known: file.ahead.get(span.index as usize).copied().flatten(),
            order: self.order,
            compress: mode == Some(compress_policy::Mode::Compress),
            policy: self.policy.clone(),
            throttle: self.throttle.clone(),
            reads: self.reads.clone(),
            tx,
            hashed: self.hashed.clone(),
            handed: self.handed.clone(),
            events: self.events.clone(),
        };
        self.order += 1;
        self.in_flight_bytes += u64::from(span.len);
        let charge = if span.claimed.is_some() { 0 } else { u64::from(span.len) };
        self.charged_bytes += charge;
        self.tasks.spawn(async move { task.run().await.map(|done| (done, charge)) });
    }

    /// Waits for the next thing to happen: a chunk task ending or a report arriving.
    async fn step(&mut self, link: &mut Link) -> Result<(), EngineError> {
        self.step_within(link, None).await
    }

    /// [`step`](Self::step), or nothing once [`WINDOW_RECHECK`] has passed: for a
    /// sender held to the congestion window, which grows with every acknowledgement
    /// whether or not a chunk completes.
    async fn step_or_recheck(&mut self, link: &mut Link) -> Result<(), EngineError> {
        self.step_within(link, Some(WINDOW_RECHECK)).await
    }

    async fn step_within(
        &mut self,
        link: &mut Link,
        recheck: Option<Duration>,
    ) -> Result<(), EngineError> {
        let timer = async {
            match recheck {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            Some(hashed) = self.hashed_rx.recv() => self.on_hashed(hashed, link).await,
            Some(joined) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                let (done, charge) = joined??;
                self.charged_bytes = self.charged_bytes.saturating_sub(charge);
                self.on_chunk_done(done, link).await
            }
            inbound = link.recv() => self.on_inbound(inbound),
            () = timer => Ok(()),
        }
    }

    async fn on_chunk_done(&mut self, done: ChunkDone, link: &mut Link) -> Result<(), EngineError> {
        let len = match &done {
            ChunkDone::Sent { len, .. }
            | ChunkDone::Held { len, .. }
            | ChunkDone::ReadFailed { len, .. } => *len,
        };
        self.in_flight_bytes = self.in_flight_bytes.saturating_sub(u64::from(len));
        match done {
            // Told when it was handed over (`ChunkTask::run`).
            ChunkDone::Sent { .. } => {}
            ChunkDone::Held { file, index, hash, len } => {
                self.resumed += u64::from(len);
                self.resumed_files.insert(file);
                self.events.event(TransferEvent::Resumed { bytes: self.resumed });
                if let Some(summary) = self.rules.on_chunk_held(file, index, hash)? {
                    self.on_summarised(file);
                    link.tx.send_control(summary).await?;
                }
            }
            ChunkDone::ReadFailed { file, error, .. } => {
                let path = self.name(file);
                let failure = failure::describe_source(Path::new(&path), &error);
                // The receiver shows the whole line: it knows the file by its own name.
                if let Some(abort) = self.rules.on_read_failed(file, failure.message) {
                    let message = failure.problem;
                    self.events.event(TransferEvent::FileFailed { path, message });
                    link.tx.send_control(abort).await?;
                }
            }
        }
        Ok(())
    }

    /// A chunk about to be sent: its hash goes into its file's root.
    async fn on_hashed(&mut self, hashed: Hashed, link: &mut Link) -> Result<(), EngineError> {
        let Hashed { file, index, hash, claimed } = hashed;
        if claimed {
            *self.differing.entry(file).or_default() += 1;
        }
        if let Some(summary) = self.rules.on_chunk_sent(file, index, hash)? {
            self.on_summarised(file);
            link.tx.send_control(summary).await?;
        }
        Ok(())
    }

    /// A file is all sent: counts it if a partial file held bytes that differed from the
    /// source (changed without a new modification time, or damaged at the receiver),
    /// for the one line the copy ends with ([`Differed`]).
    fn on_summarised(&mut self, file: u32) {
        let base = self.bases.remove(&file);
        let differing = self.differing.remove(&file).unwrap_or(0);
        if base == Some(HeldBase::Partial) && differing > 0 {
            let path = self.name(file);
            self.differed.add(path, differing);
        }
    }

    /// Handles what the receiver sent.
    fn on_inbound(
        &mut self,
        inbound: Option<Result<Inbound, crate::LinkError>>,
    ) -> Result<(), EngineError> {
        let closed = EngineError::PeerClosed { peer: "receiver", what: "confirming the copy" };
        let msg = match inbound {
            None | Some(Ok(Inbound::Closed)) => return Err(closed),
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(Inbound::Chunk(_))) => {
                return Err(ProtoError::Violation("the receiver sent a chunk".into()).into())
            }
            Some(Ok(Inbound::Control(msg))) => msg,
        };
        match self.rules.on_report(msg)? {
            Report::Progress { verified_bytes } => {
                if let Some(policy) = &self.policy {
                    lock(policy).on_verified(verified_bytes, Instant::now());
                }
                self.events.event(TransferEvent::Verified { bytes: verified_bytes });
            }
            Report::FileFailed { file, message } => {
                let source = self.name(file);
                self.events.event(TransferEvent::TargetFailed { source, message });
            }
            Report::Finished(totals) => {
                self.events.event(TransferEvent::Verified { bytes: totals.bytes });
                self.outcome = Some(Outcome {
                    files: totals.files,
                    bytes: totals.bytes,
                    failures: totals.failures,
                    resumed: self.resumed,
                    resumed_files: u32::try_from(self.resumed_files.len()).unwrap_or(u32::MAX),
                    skipped: self.skipped,
                    deleted: self.deleted,
                });
            }
            Report::Unfinished(facts) => {
                self.events.event(TransferEvent::Unfinished { facts, here: false });
            }
            Report::Fatal { message } => return Err(EngineError::Remote(message)),
            Report::Held { file, base } => {
                if let HeldBase::Restarted { reason } = &base {
                    let path = self.name(file);
                    self.events.event(TransferEvent::Warning(format!(
                        "{path}: {reason}: copying it again from the start"
                    )));
                }
                self.bases.insert(file, base);
            }
            Report::Skipped { file, reason } => {
                self.skipped += 1;
                let path = self.name(file);
                self.events.event(TransferEvent::Skipped { path, reason });
            }
            Report::Deleted { path } => {
                self.deleted += 1;
                self.events.event(TransferEvent::Deleted { path: path.to_string() });
            }
            Report::Noted => {}
        }
        Ok(())
    }

    fn name(&self, file: u32) -> String {
        self.names.get(file as usize).cloned().unwrap_or_else(|| format!("file #{file}"))
    }
}

/// One chunk: read, hash, maybe compress (on the blocking pool, or in place for a small
/// file, [`crate::small_steps`]), pace, send.
struct ChunkTask {
    file: Arc<SourceFile>,
    /// Of a small file, read in place when cached ([`Announced::small`]).
    small: Option<Keeps>,
    /// Checks the file once its last chunk is read.
    watch: Arc<SourceWatch>,
    span: ChunkSpan,
    /// Its hash, if hashed ahead of the copy ([`crate::ahead`]).
    known: Option<[u8; 32]>,
    /// Place of this chunk in the copy's send order.
    order: u64,
    compress: bool,
    policy: Option<Arc<Mutex<CompressPolicy>>>,
    /// scp's `-l`, shared by all chunks of the copy.
    throttle: Option<Arc<Throttle>>,
    reads: Arc<Semaphore>,
    tx: Arc<dyn Transport>,
    /// Where the chunk's hash goes before it is sent.
    hashed: tokio::sync::mpsc::UnboundedSender<Hashed>,
    /// The copy's count of bytes handed to the transport.
    handed: Arc<AtomicU64>,
    /// Told the new count as each chunk is handed over.
    events: Arc<dyn EventSink>,
}

impl ChunkTask {
    /// An error returned is fatal to the copy (the link broke); a read error only
    /// aborts this file.
    async fn run(self) -> Result<ChunkDone, EngineError> {
        let ChunkSpan { file: id, index, offset, len, claimed } = self.span;
        let (file, known, compress) = (self.file.clone(), self.known, self.compress);
        let watch = self.watch.clone();
        // The semaphore is never closed; if it were, reading without a permit is safe.
        let permit = self.reads.acquire().await.ok();
        // A small file's chunk is read in place when the page cache holds it: one that
        // must come from the disk waits for it on the pool, many at once.
        let in_place = match self.small {
            Some(Keeps::InMemory) => true,
            Some(_) => file.cached(offset),
            None => false,
        };
        let read = small_steps::run(in_place, move || {
            let encoded = codec::read_chunk(&file, id, index, (offset, len), known, compress)?;
            // Before its hash is told: a file that changed while it was read never gets
            // the summary that would let the receiver name it (`ReadFailed` aborts it).
            watch.chunk_read(file.file(), known.is_some())?;
            Ok::<_, std::io::Error>(encoded)
        })
        .await?;
        drop(permit);
        let encoded = match read {
            Ok(encoded) => encoded,
            Err(error) => {
                return Ok(ChunkDone::ReadFailed { file: id, error, len });
            }
        };
        let ChunkHeader { hash, wire_len, .. } = encoded.header;
        if claimed == Some(hash) {
            return Ok(ChunkDone::Held { file: id, index, hash, len });
        }
        if let (Some(policy), Some(took)) = (&self.policy, encoded.compress_time) {
            lock(policy).on_compressed(u64::from(len), u64::from(wire_len), took);
        }
        if let Some(throttle) = &self.throttle {
            throttle.take(u64::from(wire_len)).await;
        }
        // The loop outlives its tasks: a closed channel means the copy is over anyway.
        let _ = self.hashed.send(Hashed { file: id, index, hash, claimed: claimed.is_some() });
        // Counted before it goes: a chunk cut off mid-way may still reach the target.
        let handed = self.handed.fetch_add(u64::from(len), Ordering::Relaxed) + u64::from(len);
        // Told now, not when the send returns: a process killed while chunks are on their
        // way has reported them (the crash suite's "in flight at the kill"). Tasks run
        // concurrently, so these may arrive slightly out of order; the count is the
        // largest seen.
        self.events.event(TransferEvent::Sent { bytes: handed });
        self.tx.send_chunk(encoded.header, encoded.wire, self.order).await?;
        Ok(ChunkDone::Sent { len })
    }
}
