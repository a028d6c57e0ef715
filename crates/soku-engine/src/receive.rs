//! The receiver: accepts the manifest, verifies chunks (many at once), writes them into
//! temporary files and renames each file into place once its root hash checks out.
//! Every decision about what to accept is the sans-IO [`soku_proto::receive::Receiver`]'s;
//! this module only does the I/O it asks for.
//!
//! One loop owns everything: it handles control messages in order and hands each chunk
//! to a task in a [`JoinSet`], so an error or a cancel stops every task, and the
//! temporary files of unfinished files are removed either way ([`files::TempFiles`]),
//! or, with resume, kept for the next run to continue ([`crate::partial`]).

mod arrivals;
mod files;
mod sync;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use soku_proto::chunk::{chunk_hash, ChunkPlan};
use soku_proto::manifest::{Entry, Meta};
use soku_proto::message::{HeldBase, HeldChunk, Message, Unfinished, HELD_BATCH, UNFINISHED_NAMES};
use soku_proto::name::shown;
use soku_proto::receive::{ChunkCheck, EntryAction, FileOutcome, Receiver};
use soku_proto::ProtoError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use self::arrivals::Arrivals;
use self::files::{TargetFile, TempFiles};
use self::sync::SyncState;
use crate::events::{EventSink, TransferEvent};
use crate::failure::{self, Action, Failure, HeldChanged};
use crate::fsops::TargetDir;
use crate::link::{Inbound, Incoming, Link, Transport};
use crate::mutex::lock;
use crate::options::{CopyOptions, Outcome};
use crate::partial::{self, Expect, Storage, Trailer};
use crate::small_steps::{self, Keeps};
use crate::{codec, EngineError};

/// How often the receiver reports verified bytes to the sender.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Files whose storage is prepared at once (created, or with resume found and hashed),
/// on the blocking pool. One at a time, a tree of small files waited on a thread
/// hand-off and a few system calls per file before the next entry was even read; the
/// bound keeps what a peer's entries can start (tasks, descriptors) small, and the
/// control stream waits for room.
const PREPARING: usize = 32;

/// How long a failed session waits for its chunk writes in flight before its last
/// count: a write takes milliseconds, and a disk that hangs must not hang the command.
const WRITES_LAND: Duration = Duration::from_secs(5);

/// What the receiver's tasks share.
struct Shared {
    state: Mutex<Receiver>,
    dir: Arc<TargetDir>,
    files: Mutex<HashMap<u32, Arc<TargetFile>>>,
    temps: TempFiles,
    /// Chunks that arrived before their file was ready (QUIC) wait here.
    arrivals: Arrivals,
    tx: Arc<dyn Transport>,
    events: Arc<dyn EventSink>,
    /// Where the target's file system keeps files: which steps run in place.
    keeps: Keeps,
    preserve: bool,
    /// See [`CopyOptions::keep_special_bits`].
    keep_special_bits: bool,
    fsync: bool,
    chunk_size: u32,
    last_progress: Mutex<Instant>,
    /// Files that failed where the state machine does not count them: the sender's
    /// source errors.
    other_failures: Mutex<u32>,
    /// Files verified whose rename into place (or metadata) then failed: the state
    /// machine counted them as copied, and they are failures instead.
    unfinished: Mutex<u32>,
    /// Files the sender planned (its `Plan`), for the summary of a copy that runs out
    /// of space.
    planned: Mutex<u32>,
    /// Files renamed into place: verified is not yet there, and a copy that stops
    /// between the two leaves that file partial.
    placed: Mutex<u32>,
    /// Room for files being prepared ([`PREPARING`]).
    preparing: Arc<Semaphore>,
    writes: WritesInFlight,
    /// With resume, every file is reported as holding nothing and made afresh
    /// ([`Within::blind`]).
    blind: bool,
    /// A sync's rules and what it keeps ([`sync`]).
    sync: Option<SyncState>,
    /// Paths a sync deleted (or in a dry run would delete).
    deleted: Mutex<u32>,
}

/// What a resuming receiver found of a file: where, and the chunks it holds.
type Held = (HeldBase, Vec<HeldChunk>);

/// The setuid, setgid and sticky bits: what `-p` takes from the sender only when asked
/// ([`CopyOptions::keep_special_bits`]).
const SPECIAL_BITS: u32 = 0o7000;

/// `entry` with the special bits of its mode cleared, as OpenSSH's scp clears them
/// since 9.2: the sender chooses the mode, and a setuid file owned by the receiving
/// user (root, as often as not) or a sticky world-writable directory is the receiving
/// side's risk, not the sender's. Everything else about the entry is checked later, as
/// it came.
fn without_special_bits(mut entry: Entry) -> Entry {
    match &mut entry {
        Entry::Dir { meta, .. } | Entry::File { meta, .. } => meta.mode &= !SPECIAL_BITS,
    }
    entry
}

/// Removes (or, with resume, keeps) the temporary files of whatever is unfinished when
/// the receiver stops, by error or by being dropped.
struct StopOnDrop(Arc<Shared>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = self.0.temps.stop();
    }
}

/// What a confined server holds a receiver to (`Role::Receive`'s fields of the same
/// names); the default for a client.
#[derive(Debug, Default, Clone, Copy)]
pub struct Within<'a> {
    /// The directory the target is opened beneath.
    pub beneath: Option<&'a TargetDir>,
    /// Report nothing held, whatever is there.
    pub blind: bool,
}

/// Receives into `receiver`'s target, whose directory is `root` (opened beneath
/// `within.beneath`, for a confined server), under a sync's rules if there are some.
pub async fn run(
    receiver: Receiver,
    root: PathBuf,
    within: Within<'_>,
    sync: Option<soku_proto::sync::SyncRules>,
    opts: CopyOptions,
    link: &mut Link,
    events: Arc<dyn EventSink>,
) -> Result<Outcome, EngineError> {
    // The sender may announce many files ahead, each a temporary file here.
    let _ = crate::limits::open_files();
    let receiver = receiver
        .with_resume(opts.flags.resume)
        .with_nothing_held(opts.nothing_held)
        .with_sync(sync.is_some());
    let sync = sync
        .map(SyncState::new)
        .transpose()
        .map_err(|e| ProtoError::Violation(format!("the sync's rules: {e}")))?;
    // A dry run makes nothing, not even its target: where that is missing, the
    // directory above it is opened, and every file below is found absent.
    let dry_run = sync.as_ref().is_some_and(|s| s.rules.dry_run);
    let opened_at = match root.parent() {
        Some(parent) if dry_run && !root.is_dir() => parent.to_path_buf(),
        _ => root.clone(),
    };
    let dir = match within.beneath {
        Some(beneath) => beneath.open_below(&opened_at),
        None => TargetDir::open(&opened_at),
    };
    let dir = dir.map_err(|e| {
        let problem = crate::failure::describe_io(&e);
        EngineError::Target(format!(
            "{}: cannot open the target directory: {problem}",
            shown(&root)
        ))
    })?;
    let dir = Arc::new(dir);
    let keeps = dir.keeps();
    let shared = Arc::new(Shared {
        state: Mutex::new(receiver),
        dir: dir.clone(),
        files: Mutex::default(),
        temps: TempFiles::new(dir, opts.flags.resume),
        arrivals: Arrivals::default(),
        tx: link.tx.clone(),
        events: events.clone(),
        keeps,
        preserve: opts.flags.preserve,
        keep_special_bits: opts.keep_special_bits,
        fsync: opts.flags.fsync,
        chunk_size: opts.flags.chunk_size,
        last_progress: Mutex::new(Instant::now()),
        other_failures: Mutex::new(0),
        unfinished: Mutex::new(0),
        planned: Mutex::new(0),
        placed: Mutex::new(0),
        preparing: Arc::new(Semaphore::new(PREPARING)),
        writes: WritesInFlight::default(),
        blind: within.blind,
        sync,
        deleted: Mutex::new(0),
    });
    let _stop = StopOnDrop(shared.clone());
    let result = receive_all(&shared, opts, link, events.clone()).await;
    if result.is_err() {
        // What this session verified stays at the target for the next one to find
        // held: the client's totals count it as sent, not as resumed. A chunk whose
        // task the error stopped is still being written (a blocking write runs to its
        // end) and the next session will find it: it is counted once it lands.
        shared.writes.landed(WRITES_LAND).await;
        events.event(TransferEvent::Sent { bytes: shared.sent() });
    }
    if result.as_ref().is_err_and(|e| !e.keeps_partial_files()) {
        shared.temps.stop_discarding();
    }
    if let Err(EngineError::NoSpace(_)) = &result {
        // The user is told what the full disk holds: which files arrived, and which
        // partial files take space there (`Fatal`, from `role::run`, follows).
        let facts = shared.unfinished().await;
        if opts.tell_unfinished {
            let _ = link.tx.send_control(Message::Unfinished(facts.clone())).await;
        }
        events.event(TransferEvent::Unfinished { facts, here: true });
    }
    result
}

/// The receiver's loop: until the manifest ended and every file settled.
async fn receive_all(
    shared: &Arc<Shared>,
    opts: CopyOptions,
    link: &mut Link,
    events: Arc<dyn EventSink>,
) -> Result<Outcome, EngineError> {
    let start = Instant::now();
    let ordered = link.traits.ordered;
    let mut tasks: JoinSet<Result<(), EngineError>> = JoinSet::new();
    let mut ended = false;
    // Whether more can come from the peer: after the end of the manifest, the end of
    // its control stream (on an ordered link) or of the whole link means only the chunks
    // in hand are left to settle.
    let mut inbox_open = true;
    loop {
        if ended && tasks.is_empty() {
            if lock(&shared.state).is_finished() {
                break;
            }
            if ordered || !inbox_open {
                // On one ordered stream every chunk came before the end of the manifest.
                return Err(ProtoError::Violation(
                    "the manifest ended with files incomplete".into(),
                )
                .into());
            }
        }
        tokio::select! {
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => joined??,
            inbound = link.recv(), if inbox_open => match inbound {
                None | Some(Ok(Inbound::Closed)) if ended => inbox_open = !ordered && inbound.is_some(),
                None | Some(Ok(Inbound::Closed)) => {
                    // On an ordered link the chunks in hand came first, and none of them
                    // waits for anything: what they found wrong is the better message.
                    if ordered {
                        while let Some(joined) = tasks.join_next().await {
                            joined??;
                        }
                    }
                    return Err(EngineError::PeerClosed { peer: "sender", what: "the copy finished" });
                }
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(Inbound::Chunk(chunk))) => {
                    tasks.spawn(on_chunk(shared.clone(), chunk, ordered));
                }
                Some(Ok(Inbound::Control(msg))) => {
                    shared.on_control(msg, &mut ended, &mut tasks).await?
                }
            },
        }
    }
    let totals = lock(&shared.state).totals();
    let unfinished = *lock(&shared.unfinished);
    // Every file that was sent in place: the directory this copy made is no longer an
    // unfinished copy's, and the next copy into it goes inside it, by scp's rule. A
    // source the sender could not read at all left nothing here to continue, so it does
    // not keep the mark. Before the directories' times are set (`-p`): the removal
    // changes its modification time.
    let dry_run = shared.dry_run();
    let made = lock(&shared.state).made_target().map(|(made, _)| made).filter(|_| !dry_run);
    if let Some(made) = made.filter(|_| totals.failures + unfinished == 0) {
        if let Err(e) = shared.dir.unmark_made(&made) {
            let mark = made.join(crate::partial::made_dir::MARK);
            events.event(TransferEvent::Warning(format!(
                "{}: cannot remove: {e}: remove it by hand, or the next copy to {} will \
                 resume into it",
                shown(&mark),
                shown(&made)
            )));
        }
    }
    // A sync deletes only after a copy that went through whole, as rsync does after an
    // error: what a source that could not be read stands for is not known here.
    let failures = totals.failures + *lock(&shared.other_failures) + unfinished;
    shared.delete_extras(failures == 0).await?;
    // A path that could not be deleted counts too.
    let failures = totals.failures + *lock(&shared.other_failures) + unfinished;
    if opts.flags.preserve && !dry_run {
        let dirs = lock(&shared.state).directories().to_vec();
        for (local, meta) in dirs.iter().rev() {
            if let Err(e) = shared.dir.finish_dir(local, meta) {
                events.event(TransferEvent::Warning(format!("{}: {e}", shown(&local))));
            }
        }
    }
    let files = totals.files.saturating_sub(unfinished);
    let outcome = Outcome {
        files,
        bytes: totals.bytes,
        failures,
        resumed: totals.resumed,
        resumed_files: totals.resumed_files,
        skipped: totals.skipped,
        deleted: *lock(&shared.deleted),
    };
    link.tx
        .send_control(Message::Finished { files: outcome.files, bytes: outcome.bytes, failures })
        .await?;
    events.event(TransferEvent::Verified { bytes: outcome.bytes });
    if shared.sync.is_some() {
        events.event(outcome.sync_totals());
    }
    events.event(TransferEvent::Finished {
        files: outcome.files,
        bytes: outcome.bytes,
        failures,
        resumed: outcome.resumed,
        elapsed: start.elapsed(),
    });
    Ok(outcome)
}

/// Verifies and writes one chunk. On an `ordered` link the file's entry always comes
/// first, so a chunk for a file not yet open is a protocol violation, not something to
/// wait for.
async fn on_chunk(
    shared: Arc<Shared>,
    mut chunk: Incoming,
    ordered: bool,
) -> Result<(), EngineError> {
    let header = chunk.header;
    let (offset, plain_len) = loop {
        let check = lock(&shared.state).check_chunk(&header)?;
        match check {
            ChunkCheck::Accept { offset, plain_len } => break (offset, plain_len),
            ChunkCheck::Discard => return Ok(()),
            ChunkCheck::NotYetAnnounced
                if ordered && !lock(&shared.state).is_announced(header.file) =>
            {
                return Err(ProtoError::Violation(format!(
                    "chunk for file {} before its entry",
                    header.file
                ))
                .into())
            }
            // Its bytes are already off the connection (unread stream data would hold
            // flow-control credit the entry we wait for may need); wait for the entry,
            // and for the file's storage (prepared concurrently, even on an ordered link).
            ChunkCheck::NotYetAnnounced => {
                let not_yet = || lock(&shared.state).awaits_file(header.file);
                shared.arrivals.wait_for(header.file, not_yet).await;
            }
        }
    };
    let file = lock(&shared.files).get(&header.file).cloned();
    // The state machine accepts chunks only once the file is opened, and the file leaves
    // `files` when it settles, which needs this chunk first, or when it fails (another
    // chunk's write failed meanwhile): then this chunk goes nowhere.
    let Some(file) = file else { return Ok(()) };
    let wire = std::mem::take(&mut chunk.wire);
    // Uncompressed, the wire bytes are the plain bytes: their hash, if the link took it
    // as they arrived, is the chunk's.
    let arrived_hash = chunk.wire_hash.filter(|_| !header.compressed);
    let this = shared.clone();
    // A session that has taken its last count writes nothing more.
    let Some(writing) = shared.writes.start() else { return Ok(()) };
    let written = small_steps::run(file.writes_in_place(), move || {
        let _writing = writing;
        // Undecodable bytes fail the file as a hash mismatch would.
        let mut hash = [0; 32];
        if let Some(plain) = codec::decode(&header, wire, plain_len) {
            hash = arrived_hash.unwrap_or_else(|| chunk_hash(&plain));
            if hash == header.hash {
                file.write_chunk(&plain, offset, &this.temps)?;
            }
        }
        // Counted in the step that wrote it, so that no count misses a chunk that is
        // at the target (this task may be stopped while the write runs).
        Ok(lock(&this.state).on_chunk_written(&header, hash))
    })
    .await?;
    // The chunk's memory is free once its bytes are written.
    drop(chunk);
    let outcome = match written {
        Ok(outcome) => outcome?,
        Err(e) => {
            let local = lock(&shared.state).open_path(header.file);
            if let Some(local) = local {
                let failure = failure::describe(&local, Action::Write, &e);
                shared.store_failed(header.file, &local, failure).await?;
            }
            FileOutcome::Pending
        }
    };
    shared.settle(outcome).await?;
    shared.maybe_report_progress().await
}

impl Shared {
    /// Handles one control message from the sender.
    async fn on_control(
        self: &Arc<Self>,
        msg: Message,
        ended: &mut bool,
        tasks: &mut JoinSet<Result<(), EngineError>>,
    ) -> Result<(), EngineError> {
        match msg {
            Message::Plan { files, bytes } => {
                *lock(&self.planned) = files;
                self.events.event(TransferEvent::Planned { files, bytes })
            }
            Message::Entry(entry) => self.on_entry(entry, tasks).await?,
            Message::FileSummary { file, root, sent } => {
                let outcome = lock(&self.state).on_summary(file, root, sent)?;
                self.settle(outcome).await?;
            }
            // The sender's own failures: its line names its path (`SourceFailed`).
            Message::FileAborted { file, message } => {
                if let Some(local) = lock(&self.state).on_file_failed(file) {
                    lock(&self.files).remove(&file);
                    self.temps.discard(&local);
                    let target = shown(&local);
                    self.events.event(TransferEvent::SourceFailed { target, message });
                }
            }
            Message::SourceError { path, message } => {
                *lock(&self.other_failures) += 1;
                let message = format!("{path}: {message}");
                self.events.event(TransferEvent::SourceFailed { target: String::new(), message });
            }
            Message::EndOfManifest { files, bytes } => {
                lock(&self.state).on_end(files, bytes)?;
                self.arrivals.all_ready();
                *ended = true;
            }
            Message::Fatal { message } => return Err(EngineError::Remote(message)),
            other => {
                return Err(
                    ProtoError::Violation(format!("the sender sent {}", other.kind())).into()
                )
            }
        }
        Ok(())
    }

    /// Handles an entry: a directory is made before the next message is read (what is
    /// in it comes after it); a file's storage is prepared by a task of its own, at
    /// most [`PREPARING`] at once, while the entries after it are read.
    async fn on_entry(
        self: &Arc<Self>,
        entry: Entry,
        tasks: &mut JoinSet<Result<(), EngineError>>,
    ) -> Result<(), EngineError> {
        let entry = if self.keep_special_bits { entry } else { without_special_bits(entry) };
        let announced =
            self.sync.as_ref().map(|_| (entry.path().clone(), matches!(entry, Entry::Dir { .. })));
        let action = lock(&self.state).on_entry(entry)?;
        if let (Some(sync), Some((path, is_dir))) = (&self.sync, announced) {
            sync.record(&path, is_dir);
        }
        match action {
            // A dry run makes nothing.
            EntryAction::MakeDir { .. } if self.dry_run() => {}
            EntryAction::MakeDir { local } => {
                let (dir, at) = (self.dir.clone(), local.clone());
                // The target itself, made for a single source: marked before anything
                // lands in it, so that an interruption from here on is resumed in it.
                let mark = lock(&self.state)
                    .made_target()
                    .filter(|(made, _)| *made == local)
                    .map(|(_, name)| name.clone());
                let made = small_steps::run(self.keeps.in_place(0), move || {
                    dir.ensure_dir(&at)?;
                    mark.map_or(Ok(()), |name| dir.mark_made(&at, &name))
                });
                made.await?
                    .map_err(|e| failure::describe(&local, Action::MakeDir, &e).into_error())?;
            }
            EntryAction::CreateFile { id, local, size, meta, chunks } => {
                let path = shown(&local);
                self.events.event(TransferEvent::File { path, bytes: size });
                let room = self.preparing.clone().acquire_owned().await;
                let room =
                    room.map_err(|_| EngineError::Internal("the receiver stopped".into()))?;
                let this = self.clone();
                tasks.spawn(async move {
                    let prepared = this.prepare_file(id, local, size, meta, chunks).await;
                    drop(room);
                    this.arrivals.ready(id);
                    prepared
                });
            }
        }
        Ok(())
    }

    /// Makes the storage of file `id` (with resume: finds what is held of it, and tells
    /// the sender), then lets its chunks in.
    async fn prepare_file(
        self: &Arc<Self>,
        id: u32,
        local: PathBuf,
        size: u64,
        meta: Meta,
        chunks: u32,
    ) -> Result<(), EngineError> {
        if self.sync.is_some() && self.skipped(id, &local, size, meta).await? {
            return Ok(());
        }
        let in_place = self.keeps.in_place(size);
        let resumes = lock(&self.state).resumes() && chunks > 0;
        // A blind receiver's sender still waits for a first report: it says "nothing".
        let blind_report = (resumes && self.blind).then(|| (HeldBase::Nothing, Vec::new()));
        let made = if resumes && !self.blind {
            self.prepare_held(&local, size, meta, in_place).await?
        } else {
            let fresh = |lock_wait| {
                let (this, local) = (self.clone(), local.clone());
                move || {
                    this.temps.track(&local, || {
                        partial::prepare_fresh(&this.dir, &local, size, meta.mode, lock_wait)
                    })
                }
            };
            let made = run_locking(in_place, fresh).await?;
            made.map(|file| (TargetFile::new(file, true), blind_report))
        };
        match made {
            Ok((target, held)) => {
                let early = self.writes_back_early();
                let target = target.writing_back_early(early).writing_in_place(in_place);
                lock(&self.files).insert(id, Arc::new(target));
                let opened = lock(&self.state).on_file_opened(id);
                let Some(outcome) = opened else {
                    // It failed (or the sender aborted it) while it was being made.
                    lock(&self.files).remove(&id);
                    self.temps.discard(&local);
                    return Ok(());
                };
                // A receiver that said it holds nothing reports nothing: its sender
                // sends every chunk (what the race of another writer left is written over).
                let reports = lock(&self.state).reports_held();
                if let Some(prepared) = held.filter(|_| reports) {
                    self.tell_held(id, &local, chunks, prepared).await?;
                }
                self.settle(outcome).await
            }
            // The copy is ending for a reason of its own, told once: no line per file.
            Err(e) if files::CopyStopped::is(&e) => Ok(()),
            Err(e) => {
                let failure = failure::describe(&local, Action::Create, &e);
                self.store_failed(id, &local, failure).await
            }
        }
    }

    /// In a sync: whether file `id` is skipped (the quick check, `--update`, or a dry
    /// run), which is then told to the sender and settled here.
    async fn skipped(
        self: &Arc<Self>,
        id: u32,
        local: &Path,
        size: u64,
        meta: Meta,
    ) -> Result<bool, EngineError> {
        let Some(sync) = &self.sync else { return Ok(false) };
        if !lock(&self.state).may_skip(id) {
            // A dry run's client asks no preview, so its sender waits for every file.
            if sync.rules.dry_run {
                return Err(EngineError::Internal("a dry run's file was not held back".into()));
            }
            return Ok(false);
        }
        let (this, at) = (self.clone(), local.to_path_buf());
        let looked = small_steps::run(self.keeps.in_place(0), move || {
            let Some(sync) = &this.sync else { return Ok(None) };
            sync.check(&this.dir, &at, size, &meta, this.preserve)
        });
        let reason = match looked.await? {
            Ok(reason) => reason,
            Err(e) => {
                let failure = failure::describe(local, Action::Create, &e);
                self.store_failed(id, local, failure).await?;
                return Ok(true);
            }
        };
        let Some(reason) = reason else { return Ok(false) };
        let told = lock(&self.state).on_skipped(id, reason)?;
        self.tx.send_control(told).await?;
        self.events.event(TransferEvent::Skipped { path: shown(&local), reason });
        Ok(true)
    }

    /// Whether this is a sync's dry run: nothing is written or removed.
    fn dry_run(&self) -> bool {
        self.sync.as_ref().is_some_and(|s| s.rules.dry_run)
    }

    /// In a sync with delete, once every file is in place (`clean`: none failed):
    /// removes what the transferred directories hold beyond the source (a dry run only
    /// lists it), and tells the sender each path.
    async fn delete_extras(self: &Arc<Self>, clean: bool) -> Result<(), EngineError> {
        let Some(sync) = self.sync.as_ref().filter(|s| s.rules.delete) else { return Ok(()) };
        if !clean {
            self.events.event(TransferEvent::Warning(
                "not deleting anything at the target: some files failed (as rsync, which \
                 deletes only after a copy without errors)"
                    .into(),
            ));
            return Ok(());
        }
        let dry_run = sync.rules.dry_run;
        let this = self.clone();
        let done = tokio::task::spawn_blocking(move || {
            let Some(sync) = &this.sync else { return Vec::new() };
            let target = lock(&this.state).target().clone();
            let extras = sync.extras(&this.dir, &target);
            extras
                .into_iter()
                .map(|(wire, local)| {
                    let removed = if dry_run { Ok(()) } else { this.dir.remove(&local) };
                    (wire, local, removed)
                })
                .collect()
        })
        .await?;
        for (wire, local, removed) in done {
            match removed {
                Ok(()) => {
                    *lock(&self.deleted) += 1;
                    self.tx.send_control(Message::Deleted { path: wire }).await?;
                    self.events.event(TransferEvent::Deleted { path: shown(&local) });
                }
                Err(e) => {
                    *lock(&self.other_failures) += 1;
                    let problem = crate::failure::describe_io(&e);
                    self.events.event(TransferEvent::Warning(format!(
                        "{}: cannot delete: {problem}",
                        shown(&local)
                    )));
                }
            }
        }
        Ok(())
    }

    /// With resume: finds what is held of the file at `local` and prepares its storage.
    /// On the blocking pool (it hashes what is held), or in place for a small file, unless
    /// another receiver holds its partial file: that wait is the pool's.
    async fn prepare_held(
        self: &Arc<Self>,
        local: &Path,
        size: u64,
        meta: Meta,
        in_place: bool,
    ) -> Result<std::io::Result<(TargetFile, Option<Held>)>, EngineError> {
        let trailer = Trailer::new(size, &meta);
        let plan = ChunkPlan::new(size, self.chunk_size);
        // A receiver that holds nothing under the copy's names (its preview) makes each
        // file's partial file at once.
        let expect =
            if lock(&self.state).reports_held() { Expect::Anything } else { Expect::Nothing };
        let prepare = |lock_wait| {
            let (this, local) = (self.clone(), local.to_path_buf());
            move || {
                let found = this.temps.track(&local, || {
                    partial::prepare_within(
                        &this.dir, &local, trailer, plan, meta.mode, lock_wait, expect,
                    )
                })?;
                let partial::Prepared { base, held, storage } = found;
                let target = match storage {
                    Storage::Temp(file) => TargetFile::new(file, held.is_empty()),
                    Storage::FinalFile => TargetFile::in_final(&local, trailer, meta.mode),
                }
                .keeping(&held, plan);
                Ok((target, Some((base, held))))
            }
        };
        run_locking(in_place, prepare).await
    }

    /// Tells the sender what is held of file `id` (of `chunks` chunks), in batches.
    async fn tell_held(
        &self,
        id: u32,
        local: &Path,
        chunks: u32,
        (base, held): Held,
    ) -> Result<(), EngineError> {
        if let HeldBase::Restarted { reason } = &base {
            let warning = format!("{}: {reason}: copying it again from the start", shown(&local));
            self.events.event(TransferEvent::Warning(warning));
        }
        let mut from = 0;
        let mut rest = held.as_slice();
        loop {
            let (batch, after) = rest.split_at(rest.len().min(HELD_BATCH));
            let to = match (after.first(), batch.last()) {
                (Some(_), Some(last)) => last.index + 1,
                _ => chunks,
            };
            let report = lock(&self.state).on_held(id, base.clone(), from, to, batch.to_vec())?;
            let Some(report) = report else { return Ok(()) };
            self.tx.send_control(report).await?;
            if after.is_empty() {
                return Ok(());
            }
            (from, rest) = (to, after);
        }
    }

    /// Acts on what a chunk or summary did to its file.
    async fn settle(self: &Arc<Self>, outcome: FileOutcome) -> Result<(), EngineError> {
        match outcome {
            FileOutcome::Pending => {}
            FileOutcome::Ready(ready) => {
                let ready_path = shown(&ready.local);
                let file = lock(&self.files).remove(&ready.id);
                let this = self.clone();
                let in_place = self.keeps.in_place_flushing(ready.size, self.fsync);
                // A rename under way is waited for as a chunk write is (`WritesInFlight`),
                // so that the count of a stopped copy (`unfinished`) sees what it did.
                let Some(writing) = self.writes.start() else { return Ok(()) };
                let result = small_steps::run(in_place, move || {
                    let _writing = writing;
                    let Some(target) = file else { return Ok(()) };
                    let done = match target.take_file() {
                        _ if ready.in_place => this
                            .dir
                            .entry(&ready.local)
                            .and_then(|entry| entry.open_final())
                            .and_then(|file| file.ok_or_else(HeldChanged::io))
                            .and_then(|file| target.check_kept(&file))
                            .and_then(|()| {
                                this.dir.finish_in_place(&ready.local, &ready.meta, this.preserve)
                            }),
                        Some(file) => target.check_kept(&file).and_then(|()| {
                            this.dir.finish_file(
                                &ready.local,
                                &file,
                                ready.size,
                                &ready.meta,
                                this.preserve,
                                this.fsync,
                            )
                        }),
                        None => Err(std::io::Error::other("its temporary file is gone")),
                    };
                    match done {
                        Ok(()) => {
                            this.temps.settled(&ready.local);
                            *lock(&this.placed) += 1;
                            Ok(())
                        }
                        Err(e) => {
                            this.temps.discard(&ready.local);
                            Err(failure::describe(&ready.local, Action::Finish, &e))
                        }
                    }
                })
                .await?;
                if let Err(failure) = result {
                    if failure.ends_copy {
                        return Err(failure.into_error());
                    }
                    self.events.event(TransferEvent::FileFailed {
                        path: ready_path,
                        message: failure.problem,
                    });
                    *lock(&self.unfinished) += 1;
                    // The sender names it too: on an upload its line is the only one
                    // the user sees.
                    let failed = Message::FileFailed { file: ready.id, message: failure.message };
                    self.tx.send_control(failed).await?;
                }
            }
            FileOutcome::Failed { id, local, error } => {
                lock(&self.files).remove(&id);
                self.temps.discard(&local);
                let message = error.to_string();
                self.events.event(TransferEvent::FileFailed {
                    path: shown(&local),
                    message: message.clone(),
                });
                self.tx.send_control(Message::FileFailed { file: id, message }).await?;
            }
        }
        Ok(())
    }

    /// File `id` could not be stored at `local`: fails it and tells the sender, or ends
    /// the copy when every other file would fail the same way (its partial files are
    /// kept for a resume).
    async fn store_failed(
        &self,
        id: u32,
        local: &Path,
        failure: Failure,
    ) -> Result<(), EngineError> {
        if failure.ends_copy {
            return Err(failure.into_error());
        }
        if lock(&self.state).on_file_failed(id).is_none() {
            return Ok(());
        }
        lock(&self.files).remove(&id);
        self.temps.discard(local);
        self.events
            .event(TransferEvent::FileFailed { path: shown(&local), message: failure.problem });
        let message = failure.message;
        Ok(self.tx.send_control(Message::FileFailed { file: id, message }).await?)
    }

    /// Whether each chunk's write starts its write-back at once: when files are flushed
    /// before their rename (docs/durability.md), unless the target's file system keeps
    /// its files in memory, where there is no disk to write back to. The flush itself
    /// is never skipped: a disk may be mounted below such a target.
    fn writes_back_early(&self) -> bool {
        self.fsync && self.keeps != Keeps::InMemory
    }

    /// What the target holds once the copy stopped for lack of space: the files in
    /// place, and the partial files kept (stops the temporary files: none is made
    /// after this).
    async fn unfinished(&self) -> Unfinished {
        let kept = self.temps.stop();
        let whole = *lock(&self.placed);
        let planned = *lock(&self.planned);
        let dir = self.dir.clone();
        let target = dir.path().display().to_string();
        // A stat per partial file, off the runtime: a tree's copy may hold hundreds.
        let looked = tokio::task::spawn_blocking(move || {
            let mut found: Vec<(PathBuf, u64)> = kept
                .into_iter()
                .filter_map(|local| dir.temp_space(&local).map(|space| (local, space)))
                .collect();
            found.sort();
            found
        });
        let found = looked.await.unwrap_or_default();
        Unfinished {
            target,
            planned,
            whole,
            partial: u32::try_from(found.len()).unwrap_or(u32::MAX),
            partial_bytes: found.iter().map(|(_, space)| space).sum(),
            names: found
                .iter()
                .take(UNFINISHED_NAMES)
                .map(|(local, _)| local.display().to_string())
                .collect(),
        }
    }

    /// Bytes verified in this session that the target did not hold before it.
    fn sent(&self) -> u64 {
        let totals = lock(&self.state).totals();
        totals.bytes.saturating_sub(totals.resumed)
    }

    async fn maybe_report_progress(&self) -> Result<(), EngineError> {
        {
            let mut last = lock(&self.last_progress);
            if last.elapsed() < PROGRESS_EVERY {
                return Ok(());
            }
            *last = Instant::now();
        }
        let totals = lock(&self.state).totals();
        let bytes = totals.bytes;
        self.events.event(TransferEvent::Verified { bytes });
        self.events.event(TransferEvent::Sent { bytes: self.sent() });
        if totals.resumed > 0 {
            self.events.event(TransferEvent::Resumed { bytes: totals.resumed });
        }
        Ok(self.tx.send_control(Message::Progress { verified_bytes: bytes }).await?)
    }
}

/// Chunk writes on the blocking pool. Stopping the task that waits for one does not
/// stop the write, so a session that fails waits for them to land before it counts.
struct WritesInFlight(Arc<Semaphore>);

/// Far more than the chunks a link can hold in memory at once, and within what tokio's
/// semaphore holds on any target.
const WRITE_SLOTS: u32 = u32::MAX >> 3;

impl Default for WritesInFlight {
    fn default() -> Self {
        WritesInFlight(Arc::new(Semaphore::new(WRITE_SLOTS as usize)))
    }
}

impl WritesInFlight {
    /// A write begins, and has landed when the value is dropped; `None` once
    /// [`WritesInFlight::landed`] was called.
    fn start(&self) -> Option<OwnedSemaphorePermit> {
        self.0.clone().try_acquire_owned().ok()
    }

    /// Waits, at most `bound`, until no write is under way, and lets no other begin: a
    /// task the error stopped may be past its checks and about to write.
    async fn landed(&self, bound: Duration) {
        let _ = tokio::time::timeout(bound, self.0.acquire_many(WRITE_SLOTS)).await;
        self.0.close();
    }
}

/// Runs a step that may wait, for as long as it is given, for another receiver to let
/// go of a partial file: in place without waiting where `in_place`, and on the blocking
/// pool, waiting up to [`partial::LOCK_WAIT`], otherwise or when that lock was busy.
async fn run_locking<T, S>(
    in_place: bool,
    step: impl Fn(Duration) -> S,
) -> Result<std::io::Result<T>, EngineError>
where
    S: FnOnce() -> std::io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    if in_place {
        match step(Duration::ZERO)() {
            Err(e) if partial::LockBusy::is(&e) => {}
            made => return Ok(made),
        }
    }
    Ok(tokio::task::spawn_blocking(step(partial::LOCK_WAIT)).await?)
}
