//! The sender's state machine: what it may send when, which chunks to read, when a file's
//! root hash is due, and what the receiver's reports mean.
//!
//! It never touches the file system or the network. The caller walks the sources and
//! announces each one ([`Sender::dir`], [`Sender::file`], [`Sender::source_error`]),
//! reads and hashes every [`ChunkSpan`] it is handed, sends the messages it is given in
//! the order it is given them, and feeds the receiver's reports to [`Sender::on_report`].
//!
//! The control stream it produces is: one [`Message::Plan`]; then entries, source errors,
//! summaries and aborts; then one [`Message::EndOfManifest`] once every file is summarised
//! or aborted. Chunks may be read and sent concurrently and finish in any order: each
//! chunk hash is folded into the file's root hash as soon as every chunk before it is in,
//! so a file holds only the hashes of chunks that finished ahead of an earlier one (never
//! more than its chunk count), and nothing once it is summarised or aborted.
//!
//! With resume, a file's chunks are handed out only as the receiver's [`Message::Held`]
//! reports cover them. A chunk the receiver says it holds comes with that hash
//! ([`ChunkSpan::claimed`]): the caller reads and hashes it as always and sends it only
//! if the hashes differ. Either way the source's hash goes into the root.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::chunk::{check_chunk_size, root_hash, ChunkPlan, RootHasher};
use crate::manifest::{Entry, Meta};
use crate::message::{Held, HeldBase, Message, HELD_BATCH};
use crate::path::WirePath;
use crate::receive::Totals;
use crate::ProtoError;

/// One chunk for the caller to read, hash and send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkSpan {
    /// The file id.
    pub file: u32,
    /// The chunk's index within the file.
    pub index: u32,
    /// Where the chunk starts in the file.
    pub offset: u64,
    /// Its plain length.
    pub len: u32,
    /// With resume: the hash of the bytes the receiver holds for this chunk. The caller
    /// sends the chunk only if the source's bytes hash differently.
    pub claimed: Option<[u8; 32]>,
}

/// A file just announced: send `entry`, then `summary` if there is one, then its chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStart {
    /// The file id, counting up from 0.
    pub id: u32,
    /// The file's [`Message::Entry`] (an [`Entry::File`]).
    pub entry: Message,
    /// Number of chunks the caller will be handed.
    pub chunks: u64,
    /// For an empty file, its [`Message::FileSummary`], to send right after the entry: an
    /// empty file has no chunk whose sending would bring it.
    pub summary: Option<Message>,
}

/// What a receiver's report means to the sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// Bytes the receiver has verified so far, cumulative.
    Progress {
        /// Verified bytes.
        verified_bytes: u64,
    },
    /// A file failed on the receiving side; the copy goes on.
    FileFailed {
        /// The file id.
        file: u32,
        /// The receiver's reason, one line.
        message: String,
    },
    /// The receiver is done: what it ended with.
    Finished(Totals),
    /// The receiver ran out of space: what it holds (its `Fatal` follows).
    Unfinished(crate::message::Unfinished),
    /// The receiver gave up on the copy.
    Fatal {
        /// The receiver's reason, one line.
        message: String,
    },
    /// With resume: the first report of what the receiver holds of a file.
    Held {
        /// The file id.
        file: u32,
        /// What the receiver found.
        base: HeldBase,
    },
    /// In a sync: the receiver skipped this file; nothing of it is read or sent.
    Skipped {
        /// The file id.
        file: u32,
        /// Why.
        reason: crate::sync::SkipReason,
    },
    /// In a sync: the receiver removed (or in a dry run would remove) this path.
    Deleted {
        /// Below the target.
        path: WirePath,
    },
    /// A report that changes nothing: a later batch of held chunks, or one for a file
    /// that was aborted meanwhile.
    Noted,
}

/// A file announced and neither summarised nor aborted.
#[derive(Debug)]
struct OpenFile {
    plan: ChunkPlan,
    /// Chunk count (checked to fit at announcement).
    count: u32,
    /// Chunks `0..handed_out` were handed to the caller.
    handed_out: u32,
    /// Chunks `0..decided` may be handed out: all of them without resume; with resume,
    /// those the receiver's reports covered so far.
    decided: u32,
    /// With resume: what the receiver found, from its first report.
    base: Option<HeldBase>,
    /// With resume: hashes of chunks the receiver holds, not yet handed out.
    claims: BTreeMap<u32, [u8; 32]>,
    /// Chunks `0..folded` were sent and their hashes are in `root`.
    folded: u32,
    /// Chunks actually sent (not held by the receiver).
    sent: u32,
    /// Hashes of chunks sent ahead of chunk `folded`, waiting for it.
    early: BTreeMap<u32, [u8; 32]>,
    root: RootHasher,
}

impl OpenFile {
    /// Folds in the hashes that now follow on from `folded`.
    fn fold(&mut self) {
        while let Some(hash) = self.early.remove(&self.folded) {
            self.root.update(&hash);
            // no overflow: `folded` was handed out, so it is below `count`
            self.folded += 1;
        }
    }
}

/// The sender's state.
#[derive(Debug)]
pub struct Sender {
    chunk_size: u32,
    resume: bool,
    /// With resume: the receiver said before the copy that it holds nothing of any file
    /// ([`Sender::with_nothing_held`]), so no file waits for its reports.
    nothing_held: bool,
    planned: bool,
    ended: bool,
    finished: bool,
    next_id: u32,
    /// Total size of the files announced.
    bytes: u64,
    open: HashMap<u32, OpenFile>,
    /// Ids of aborted files: chunks of theirs still being read or sent when the read of
    /// another failed come back, and are dropped rather than taken for duplicates. An id
    /// is all an aborted file leaves behind (the receiver keeps its failed ids likewise,
    /// see `receive.rs`).
    aborted: HashSet<u32>,
    /// Whether this is a sync, whose receiver may skip files and delete paths.
    sync: bool,
    /// Files the receiver skipped: each may be told once.
    skipped: HashSet<u32>,
}

fn violation(message: impl Into<String>) -> ProtoError {
    ProtoError::Violation(message.into())
}

impl Sender {
    /// A sender cutting files into chunks of `chunk_size` bytes (the size the request
    /// carries; checked as the receiver checks it). With `resume`, each file's chunks
    /// wait for the receiver's [`Message::Held`] reports.
    pub fn new(chunk_size: u32, resume: bool) -> Result<Self, ProtoError> {
        Ok(Self {
            chunk_size: check_chunk_size(chunk_size)?,
            resume,
            nothing_held: false,
            planned: false,
            ended: false,
            finished: false,
            next_id: 0,
            bytes: 0,
            open: HashMap::new(),
            aborted: HashSet::new(),
            sync: false,
            skipped: HashSet::new(),
        })
    }

    /// A sync's sender: the receiver may skip files ([`Report::Skipped`]) and report
    /// deletions ([`Report::Deleted`]).
    pub fn with_sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// With resume: the receiver said before the copy began that it holds nothing of
    /// any file it will receive (no final name and no partial file under the names sent;
    /// see `ReceivePreview` in [`crate::hello`]). Every chunk is handed out at once, as
    /// without resume, and the receiver sends no [`Message::Held`] reports; it still
    /// keeps what arrives for a later run to resume. This saves the round trip the first
    /// file's chunks would wait for the first report.
    pub fn with_nothing_held(mut self, nothing_held: bool) -> Self {
        self.nothing_held = nothing_held;
        self
    }

    /// Whether each file's chunks wait for the receiver's reports.
    fn waits_for_reports(&self) -> bool {
        self.resume && !self.nothing_held
    }

    /// The chunk size files are cut by.
    pub fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    /// The plan of the whole job (for the receiver's progress): first, and once.
    pub fn plan(&mut self, files: u32, bytes: u64) -> Result<Message, ProtoError> {
        if self.planned {
            return Err(violation("second plan"));
        }
        self.planned = true;
        Ok(Message::Plan { files, bytes })
    }

    /// Announces a directory. An unsafe path is refused before anything is recorded, so
    /// the caller may report it as a source error and go on.
    pub fn dir(&mut self, path: WirePath, meta: Meta) -> Result<Message, ProtoError> {
        self.may_announce("a directory entry")?;
        path.validate()?;
        Ok(Message::Entry(Entry::Dir { path, meta }))
    }

    /// Reports a source that cannot be sent (the copy goes on with the rest).
    pub fn source_error(&mut self, path: String, message: String) -> Result<Message, ProtoError> {
        self.may_announce("a source error")?;
        Ok(Message::SourceError { path, message })
    }

    /// Announces a file of `size` bytes and gives it the next id. On an error nothing is
    /// recorded (no id is used), so the caller may report it as a source error and go on.
    pub fn file(&mut self, path: WirePath, size: u64, meta: Meta) -> Result<FileStart, ProtoError> {
        self.may_announce("a file entry")?;
        path.validate()?;
        let plan = ChunkPlan::new(size, self.chunk_size);
        // The receiver refuses more chunks than a u32 index can name (see `receive.rs`).
        let count = u32::try_from(plan.count())
            .map_err(|_| violation(format!("{path}: file too large")))?;
        let next_id = self.next_id.checked_add(1).ok_or_else(|| violation("too many files"))?;
        let bytes =
            self.bytes.checked_add(size).ok_or_else(|| violation("total size too large"))?;
        let id = self.next_id;
        self.next_id = next_id;
        self.bytes = bytes;
        let summary = if count == 0 {
            Some(Message::FileSummary { file: id, root: root_hash(size, []), sent: 0 })
        } else {
            let file = OpenFile {
                plan,
                count,
                handed_out: 0,
                decided: if self.waits_for_reports() { 0 } else { count },
                base: None,
                claims: BTreeMap::new(),
                folded: 0,
                sent: 0,
                early: BTreeMap::new(),
                root: RootHasher::new(size),
            };
            self.open.insert(id, file);
            None
        };
        let entry = Message::Entry(Entry::File { id, path, size, meta });
        Ok(FileStart { id, entry, chunks: plan.count(), summary })
    }

    fn may_announce(&self, what: &str) -> Result<(), ProtoError> {
        if !self.planned {
            return Err(violation(format!("{what} before the plan")));
        }
        if self.ended {
            return Err(violation(format!("{what} after the end of the manifest")));
        }
        Ok(())
    }

    /// The next chunk of `file` to read, in index order; `None` when none may be handed
    /// out now: all were, the file is not open (never announced, summarised, aborted or
    /// failed at the receiver), or, with resume, the receiver has not yet said what it
    /// holds of the next one ([`Sender::waits_for_receiver`]).
    pub fn next_chunk(&mut self, file: u32) -> Option<ChunkSpan> {
        let open = self.open.get_mut(&file)?;
        if open.handed_out >= open.decided {
            return None;
        }
        let index = open.handed_out;
        let (offset, len) = open.plan.span(index)?;
        open.handed_out += 1;
        let claimed = open.claims.remove(&index);
        Some(ChunkSpan { file, index, offset, len, claimed })
    }

    /// Whether `file` has chunks left that wait for the receiver's report (with resume):
    /// `next_chunk` gives nothing now, but will once the report arrives.
    pub fn waits_for_receiver(&self, file: u32) -> bool {
        self.open
            .get(&file)
            .is_some_and(|open| open.handed_out >= open.decided && open.decided < open.count)
    }

    /// Records that chunk `index` of `file`, whose plain bytes hash to `hash`, was sent.
    /// Returns the file's [`Message::FileSummary`] when this was its last outstanding
    /// chunk. A chunk of an aborted file is dropped: it was in flight when the abort came.
    pub fn on_chunk_sent(
        &mut self,
        file: u32,
        index: u32,
        hash: [u8; 32],
    ) -> Result<Option<Message>, ProtoError> {
        self.on_chunk_done(file, index, hash, true)
    }

    /// Records that chunk `index` of `file` was not sent because the receiver holds
    /// exactly these bytes (the source's also hash to `hash`); otherwise as
    /// [`Sender::on_chunk_sent`].
    pub fn on_chunk_held(
        &mut self,
        file: u32,
        index: u32,
        hash: [u8; 32],
    ) -> Result<Option<Message>, ProtoError> {
        self.on_chunk_done(file, index, hash, false)
    }

    fn on_chunk_done(
        &mut self,
        file: u32,
        index: u32,
        hash: [u8; 32],
        sent: bool,
    ) -> Result<Option<Message>, ProtoError> {
        if self.aborted.contains(&file) {
            return Ok(None);
        }
        let Some(open) = self.open.get_mut(&file) else {
            return Err(if file < self.next_id {
                violation(format!("chunk {index} of file {file} sent after its summary"))
            } else {
                violation(format!("chunk {index} of file {file}, which was never announced"))
            });
        };
        if index >= open.handed_out {
            return Err(violation(format!("chunk {index} of file {file} was never handed out")));
        }
        if index < open.folded || open.early.contains_key(&index) {
            return Err(violation(format!("chunk {index} of file {file} sent twice")));
        }
        open.early.insert(index, hash);
        open.sent += u32::from(sent);
        open.fold();
        if open.folded < open.count {
            return Ok(None);
        }
        let (root, sent) = (open.root.finalize(), open.sent);
        self.open.remove(&file);
        Ok(Some(Message::FileSummary { file, root, sent }))
    }

    /// Records that a chunk of `file` could not be read. The first time, returns the
    /// [`Message::FileAborted`] to send; no more of its chunks are handed out, and it is
    /// never summarised.
    pub fn on_read_failed(&mut self, file: u32, message: String) -> Option<Message> {
        self.open.remove(&file)?;
        self.aborted.insert(file);
        Some(Message::FileAborted { file, message })
    }

    /// The end of the manifest: once, after the plan, and only when every file announced
    /// is summarised or aborted (the receiver's count of files must be final).
    pub fn end(&mut self) -> Result<Message, ProtoError> {
        if !self.planned {
            return Err(violation("end of manifest before the plan"));
        }
        if self.ended {
            return Err(violation("second end of manifest"));
        }
        if !self.open.is_empty() {
            return Err(violation(format!(
                "end of manifest with {} files neither summarised nor aborted",
                self.open.len()
            )));
        }
        self.ended = true;
        Ok(Message::EndOfManifest { files: self.next_id, bytes: self.bytes })
    }

    /// Interprets a message from the receiver. Errors name the message's kind, never its
    /// content (it may be large or hostile).
    pub fn on_report(&mut self, msg: Message) -> Result<Report, ProtoError> {
        if self.finished {
            return Err(violation(format!("{} after the finish report", msg.kind())));
        }
        match msg {
            Message::Progress { verified_bytes } => Ok(Report::Progress { verified_bytes }),
            Message::FileFailed { file, message } => {
                if file >= self.next_id {
                    return Err(violation(format!(
                        "a file failure for file {file}, which was never announced"
                    )));
                }
                // Nothing more of it is read or sent; chunks in flight are dropped as
                // for an abort.
                if self.open.remove(&file).is_some() {
                    self.aborted.insert(file);
                }
                Ok(Report::FileFailed { file, message })
            }
            Message::Finished { files, bytes, failures } => {
                if !self.ended {
                    return Err(violation("a finish report before the end of the manifest"));
                }
                self.finished = true;
                Ok(Report::Finished(Totals {
                    files,
                    bytes,
                    failures,
                    resumed: 0,
                    skipped: 0,
                    resumed_files: 0,
                }))
            }
            Message::Fatal { message } => Ok(Report::Fatal { message }),
            Message::Unfinished(unfinished) => Ok(Report::Unfinished(unfinished)),
            Message::Held(held) => self.on_held(held),
            Message::Skipped { file, reason } => self.on_skipped(file, reason),
            Message::Deleted { path } => {
                if !self.sync {
                    return Err(violation("a deletion report outside a sync"));
                }
                if !self.ended {
                    return Err(violation("a deletion report before the end of the manifest"));
                }
                path.validate()?;
                Ok(Report::Deleted { path })
            }
            other => Err(violation(format!("the receiver sent {}", other.kind()))),
        }
    }

    /// Records that the receiver skipped `file`. It may do so only before it said
    /// anything else of the file, so no chunk of it was handed out; an empty file,
    /// summarised at once, may be skipped after its summary. A report that claims a
    /// file the sender already summarised as sent misleads only this side's count.
    fn on_skipped(
        &mut self,
        file: u32,
        reason: crate::sync::SkipReason,
    ) -> Result<Report, ProtoError> {
        if !self.sync {
            return Err(violation("a skipped-file report outside a sync"));
        }
        if file >= self.next_id {
            return Err(violation(format!(
                "a skipped-file report for file {file}, which was never announced"
            )));
        }
        if !self.skipped.insert(file) {
            return Err(violation(format!("file {file} skipped twice")));
        }
        if self.aborted.contains(&file) {
            return Ok(Report::Noted);
        }
        if let Some(open) = self.open.get(&file) {
            if open.decided > 0 || open.handed_out > 0 {
                return Err(violation(format!(
                    "file {file} skipped after its held chunks were told"
                )));
            }
            self.open.remove(&file);
        }
        Ok(Report::Skipped { file, reason })
    }

    /// Records a report of held chunks. Batches must follow each other from chunk 0 to
    /// the file's chunk count, list chunks in ascending order within their range, and
    /// keep the base of the first.
    fn on_held(&mut self, held: Held) -> Result<Report, ProtoError> {
        let Held { file, base, from, to, chunks } = held;
        if !self.resume {
            return Err(violation("a held-chunks report without resume"));
        }
        if self.nothing_held {
            return Err(violation("a held-chunks report after the receiver said it holds nothing"));
        }
        if self.aborted.contains(&file) {
            return Ok(Report::Noted);
        }
        let Some(open) = self.open.get_mut(&file) else {
            return Err(if file < self.next_id {
                violation(format!("a held-chunks report for file {file}, which needs none"))
            } else {
                violation(format!(
                    "a held-chunks report for file {file}, which was never announced"
                ))
            });
        };
        if from != open.decided || to <= from || to > open.count {
            return Err(violation(format!(
                "held chunks {from}..{to} of file {file} after 0..{} of {}",
                open.decided, open.count
            )));
        }
        if chunks.len() > HELD_BATCH {
            return Err(violation(format!("{} held chunks in one report", chunks.len())));
        }
        if !chunks.is_empty() && !matches!(base, HeldBase::Partial | HeldBase::Complete) {
            return Err(violation(format!("held chunks of file {file} with nothing held")));
        }
        let mut last = None;
        for chunk in &chunks {
            if chunk.index < from || chunk.index >= to || last.is_some_and(|l| chunk.index <= l) {
                return Err(violation(format!(
                    "held chunk {} of file {file} out of order or outside {from}..{to}",
                    chunk.index
                )));
            }
            last = Some(chunk.index);
        }
        let first = match &open.base {
            None => true,
            Some(seen) if *seen == base => false,
            Some(_) => return Err(violation(format!("file {file}'s held base changed"))),
        };
        open.claims.extend(chunks.iter().map(|c| (c.index, c.hash)));
        open.decided = to;
        if first {
            open.base = Some(base.clone());
            Ok(Report::Held { file, base })
        } else {
            Ok(Report::Noted)
        }
    }

    /// Whether the receiver's finish report has arrived.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Files announced and neither summarised nor aborted.
    pub fn open_files(&self) -> usize {
        self.open.len()
    }

    /// Chunk hashes held (those sent ahead of an earlier chunk of their file): the
    /// sender's memory that grows with a file.
    pub fn held_hashes(&self) -> usize {
        self.open.values().map(|f| f.early.len()).sum()
    }
}

#[cfg(test)]
mod tests;
