//! The receiver's state machine: which entries and chunks to accept, when a file is
//! complete and verified, when the whole copy is done.
//!
//! It never touches the file system: it tells the caller where things go
//! ([`EntryAction`]), checks every chunk header against the manifest before the caller
//! reads the chunk's bytes ([`Receiver::check_chunk`]), and says when a file may be
//! renamed into place ([`FileOutcome::Ready`]). Memory grows with what was actually
//! received, never with what a peer merely announced.
//!
//! With resume, the caller looks for what it already holds of each file (the partial
//! file of an interrupted copy, or a complete file of the same size at the final name),
//! hashes it, and tells the sender through [`Receiver::on_held`]. A held chunk counts as
//! received unless the sender sends it again (its source bytes differ), which it may do
//! once; the root hash checks held and received chunks alike.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use crate::chunk::{check_chunk_size, max_wire_len, root_hash, ChunkHeader, ChunkPlan};
use crate::manifest::{Entry, Meta};
use crate::message::{Held, HeldBase, HeldChunk, Message, HELD_BATCH};
use crate::name::Name;
use crate::path::{NameFilter, Target, WirePath};
use crate::ProtoError;

/// What the caller does for an accepted manifest entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryAction {
    /// Make sure this directory exists (and is not a symlink).
    MakeDir {
        /// Local path.
        local: PathBuf,
    },
    /// Create the temporary file for this file id (with resume: first look for what is
    /// held of it, and report that with [`Receiver::on_held`]).
    CreateFile {
        /// The file id.
        id: u32,
        /// The final local path (the caller writes beside it and renames).
        local: PathBuf,
        /// Exact size.
        size: u64,
        /// The source's metadata (a partial file records its size and modification time).
        meta: Meta,
        /// Chunk count.
        chunks: u32,
    },
}

/// Whether to read a chunk's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkCheck {
    /// Read it: it belongs at `offset` and has `plain_len` plain bytes.
    Accept {
        /// Offset in the file.
        offset: u64,
        /// Plain length.
        plain_len: u32,
    },
    /// The file's entry has not arrived yet (it travels on another stream): wait for it.
    NotYetAnnounced,
    /// The file already failed here: read and drop the bytes.
    Discard,
}

/// A file whose every chunk and root hash checked out: rename it into place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    /// The file id.
    pub id: u32,
    /// Final local path.
    pub local: PathBuf,
    /// Metadata to apply.
    pub meta: Meta,
    /// Size in bytes.
    pub size: u64,
    /// The file was complete at its final name and nothing was sent again: leave it
    /// there (only metadata to apply).
    pub in_place: bool,
}

/// What a chunk or summary did to its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOutcome {
    /// More to come.
    Pending,
    /// Complete and verified.
    Ready(Ready),
    /// Verification failed; the caller removes the temporary file.
    Failed {
        /// The file id.
        id: u32,
        /// Final local path (for the message).
        local: PathBuf,
        /// What failed.
        error: ProtoError,
    },
}

/// One chunk of an open file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Its bytes are being read and written.
    Reading,
    /// Received, hashed, written.
    Verified([u8; 32]),
    /// Held from before (resume), with the hash of the bytes held; the sender may send
    /// it once more.
    Held([u8; 32]),
}

#[derive(Debug)]
struct OpenFile {
    path: WirePath,
    local: PathBuf,
    size: u64,
    meta: Meta,
    plan: ChunkPlan,
    /// Chunks being read, verified or held.
    chunks: BTreeMap<u32, Slot>,
    verified: u64,
    /// Chunks accepted for reading (sent by the sender, not merely held).
    received: u32,
    /// Chunks `0..declared` may be sent: all of them without resume; with resume, those
    /// the sender was told about.
    declared: u32,
    /// With resume: what was held before the copy.
    base: HeldBase,
    /// Held chunks the sender sent again.
    replaced: u32,
    /// The sender's root hash and how many chunks it sent.
    summary: Option<([u8; 32], u32)>,
    /// The caller has created the file's storage; chunks may be written.
    opened: bool,
}

/// Counters for the end of a copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Files verified and in place.
    pub files: u32,
    /// Bytes verified.
    pub bytes: u64,
    /// Files that failed.
    pub failures: u32,
    /// Bytes of held chunks that were not sent again (resume): part of `bytes`.
    pub resumed: u64,
    /// Files a sync skipped ([`Receiver::on_skipped`]): not part of `files`.
    pub skipped: u32,
    /// Of `files`, those completed from chunks held before the copy (resume).
    pub resumed_files: u32,
}

/// The receiver's state.
#[derive(Debug)]
pub struct Receiver {
    target: Target,
    names: Option<NameFilter>,
    recursive: bool,
    chunk_size: u32,
    resume: bool,
    /// See [`Receiver::with_nothing_held`].
    nothing_held: bool,
    next_id: u32,
    top_name: Option<Name>,
    dirs: HashSet<WirePath>,
    dir_meta: Vec<(PathBuf, Meta)>,
    open: HashMap<u32, OpenFile>,
    failed: HashSet<u32>,
    /// With sync: files skipped, whose sender's summary (an empty file's, sent before
    /// the skip was told) is dropped on arrival.
    skipped: HashSet<u32>,
    /// Whether this is a sync, which may skip files.
    sync: bool,
    totals: Totals,
    manifest_end: Option<(u32, u64)>,
}

impl Receiver {
    /// A receiver writing into `target`. `names` restricts top-level names to what the user
    /// asked for (downloads); uploads pass `None`.
    pub fn new(
        target: Target,
        names: Option<NameFilter>,
        recursive: bool,
        chunk_size: u32,
    ) -> Result<Self, ProtoError> {
        Ok(Self {
            target,
            names,
            recursive,
            chunk_size: check_chunk_size(chunk_size)?,
            resume: false,
            nothing_held: false,
            next_id: 0,
            top_name: None,
            dirs: HashSet::new(),
            dir_meta: Vec::new(),
            open: HashMap::new(),
            failed: HashSet::new(),
            skipped: HashSet::new(),
            sync: false,
            totals: Totals::default(),
            manifest_end: None,
        })
    }

    /// With `resume`, the sender waits for [`Receiver::on_held`] reports before sending
    /// a file's chunks (the request says so to both sides).
    pub fn with_resume(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// With resume: this receiver told the sender before the copy began that it holds
    /// nothing of any file (see [`crate::send::Sender::with_nothing_held`]). Chunks come
    /// at once, without [`Receiver::on_held`] reports; what arrives is still kept for a
    /// later run to resume.
    pub fn with_nothing_held(mut self, nothing_held: bool) -> Self {
        self.nothing_held = nothing_held;
        self
    }

    /// A sync's receiver, which may skip files ([`Receiver::on_skipped`]).
    pub fn with_sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// Whether a sync's receiver may skip file `id` now: the sender waits for a report
    /// on it (or it is empty, so nothing of it is ever sent) and nothing was told yet.
    pub fn may_skip(&self, id: u32) -> bool {
        self.sync
            && self.open.get(&id).is_some_and(|file| {
                file.received == 0
                    && (file.plan.count() == 0 || (self.reports_held() && file.declared == 0))
            })
    }

    /// A sync skips file `id` (see [`crate::sync`]): it is settled here without being
    /// read or written, and the report to send is returned. An error when it may not be
    /// skipped ([`Receiver::may_skip`]): the caller's mistake.
    pub fn on_skipped(
        &mut self,
        id: u32,
        reason: crate::sync::SkipReason,
    ) -> Result<Message, ProtoError> {
        if !self.may_skip(id) {
            return Err(ProtoError::Internal(format!("file {id} skipped out of turn")));
        }
        self.open.remove(&id);
        self.skipped.insert(id);
        self.totals.skipped += 1;
        Ok(Message::Skipped { file: id, reason })
    }

    /// Whether files are reported with [`Receiver::on_held`] before their chunks come.
    pub fn reports_held(&self) -> bool {
        self.resume && !self.nothing_held
    }

    /// Where received entries land.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Whether this copy resumes (see [`Receiver::with_resume`]).
    pub fn resumes(&self) -> bool {
        self.resume
    }

    /// Accepts a manifest entry, or says why it is refused. A refused entry changes
    /// nothing: it takes no file id and does not set the top-level name.
    pub fn on_entry(&mut self, entry: Entry) -> Result<EntryAction, ProtoError> {
        if self.manifest_end.is_some() {
            return Err(ProtoError::Violation("entry after end of manifest".into()));
        }
        let path = entry.path().clone();
        path.validate()?;
        let new_top = self.check_top_name(&path)?;
        if path.0.len() > 1 {
            if !self.recursive {
                return Err(ProtoError::Violation(format!("{path}: nested entry without -r")));
            }
            let parent = WirePath(path.0[..path.0.len() - 1].to_vec());
            if !self.dirs.contains(&parent) {
                return Err(ProtoError::Violation(format!("{path}: parent not announced")));
            }
        }
        let local = self.target.local_path(&path)?;
        match entry {
            Entry::Dir { meta, .. } => {
                if !self.recursive {
                    return Err(ProtoError::Violation(format!("{path}: directory without -r")));
                }
                self.top_name = self.top_name.take().or(new_top);
                self.dirs.insert(path);
                self.dir_meta.push((local.clone(), meta));
                Ok(EntryAction::MakeDir { local })
            }
            Entry::File { id, size, meta, .. } => {
                if id != self.next_id {
                    return Err(ProtoError::Violation(format!(
                        "file id {id}, expected {}",
                        self.next_id
                    )));
                }
                let next_id = self
                    .next_id
                    .checked_add(1)
                    .ok_or_else(|| ProtoError::Violation("too many files".into()))?;
                let plan = ChunkPlan::new(size, self.chunk_size);
                let Ok(count) = u32::try_from(plan.count()) else {
                    return Err(ProtoError::Violation(format!("{path}: file too large")));
                };
                self.next_id = next_id;
                self.top_name = self.top_name.take().or(new_top);
                let file = OpenFile {
                    path,
                    local: local.clone(),
                    size,
                    meta,
                    plan,
                    chunks: BTreeMap::new(),
                    verified: 0,
                    received: 0,
                    declared: if self.reports_held() { 0 } else { count },
                    base: HeldBase::Nothing,
                    replaced: 0,
                    summary: None,
                    opened: false,
                };
                self.open.insert(id, file);
                Ok(EntryAction::CreateFile { id, local, size, meta, chunks: count })
            }
        }
    }

    /// Checks the top-level name; returns it if it becomes the single-name target's name
    /// once the entry is accepted.
    fn check_top_name(&self, path: &WirePath) -> Result<Option<Name>, ProtoError> {
        let empty = Name::default();
        let top = path.top().unwrap_or(&empty);
        if let Some(names) = &self.names {
            names.check(top)?;
        }
        match &self.top_name {
            None if matches!(self.target, Target::IntoDir(_)) => {}
            None => return Ok(Some(top.clone())),
            Some(first) if first == top => {}
            Some(first) if self.target.takes_name(first) || self.target.takes_name(top) => {
                return Err(ProtoError::Violation(format!(
                    "second top-level name {top:?} after {first:?} for a single-name target"
                )))
            }
            Some(_) => {}
        }
        Ok(None)
    }

    /// Records that the caller created the storage for file `id` (after
    /// [`EntryAction::CreateFile`]); until then its chunks wait, and the file is not
    /// settled even when its summary is in (an empty file's summary may come before
    /// its storage exists, when the caller prepares files concurrently). Returns what
    /// the file comes to now (an empty file is ready at once), or `None` when the file
    /// is not open any more (it failed or was aborted meanwhile): the caller discards
    /// the storage it made.
    pub fn on_file_opened(&mut self, id: u32) -> Option<FileOutcome> {
        let file = self.open.get_mut(&id)?;
        file.opened = true;
        Some(self.settle(id))
    }

    /// Whether file `id` was announced (its entry accepted), open or not: a chunk for
    /// such a file waits for its storage even on an ordered link.
    pub fn is_announced(&self, id: u32) -> bool {
        id < self.next_id
    }

    /// Whether a chunk of `file` would wait now ([`ChunkCheck::NotYetAnnounced`]): its
    /// entry has not come (and may still), or its storage is being made. Changes
    /// nothing.
    pub fn awaits_file(&self, file: u32) -> bool {
        if self.failed.contains(&file) {
            return false;
        }
        match self.open.get(&file) {
            Some(open) => !open.opened,
            None => file >= self.next_id && self.manifest_end.is_none(),
        }
    }

    /// Checks a chunk header before its bytes are read.
    pub fn check_chunk(&mut self, header: &ChunkHeader) -> Result<ChunkCheck, ProtoError> {
        if self.failed.contains(&header.file) {
            return Ok(ChunkCheck::Discard);
        }
        if self.awaits_file(header.file) {
            return Ok(ChunkCheck::NotYetAnnounced);
        }
        let Some(file) = self.open.get_mut(&header.file) else {
            return Err(ProtoError::Violation(format!(
                "chunk for file {} which is not open",
                header.file
            )));
        };
        let Some((offset, plain_len)) = file.plan.span(header.index) else {
            return Err(ProtoError::Violation(format!(
                "chunk {} past the end of {}",
                header.index, file.path
            )));
        };
        if header.wire_len > max_wire_len(plain_len, header.compressed)
            || (!header.compressed && header.wire_len != plain_len)
        {
            return Err(ProtoError::Violation(format!(
                "chunk {} of {} has wire length {} for {} plain bytes",
                header.index, file.path, header.wire_len, plain_len
            )));
        }
        if file.summary.is_some_and(|(_, sent)| file.received >= sent) {
            return Err(ProtoError::Violation(format!(
                "chunk {} of {} beyond the chunks its summary said were sent",
                header.index, file.path
            )));
        }
        if header.index >= file.declared {
            return Err(ProtoError::Violation(format!(
                "chunk {} of {} before the receiver said what it holds",
                header.index, file.path
            )));
        }
        match file.chunks.get(&header.index) {
            None => {}
            Some(Slot::Held(_)) => {
                // The source's bytes differ from what is held: it replaces them, once.
                file.verified -= u64::from(plain_len);
                self.totals.bytes -= u64::from(plain_len);
                self.totals.resumed -= u64::from(plain_len);
                file.replaced += 1;
            }
            // Refused without touching the chunk: replacing it would forget the hash of
            // a chunk already verified.
            Some(Slot::Reading | Slot::Verified(_)) => {
                return Err(ProtoError::Violation(format!(
                    "chunk {} of {} sent twice",
                    header.index, file.path
                )))
            }
        }
        file.chunks.insert(header.index, Slot::Reading);
        file.received += 1;
        Ok(ChunkCheck::Accept { offset, plain_len })
    }

    /// Records a chunk whose plain bytes hashed to `hash` and were written.
    pub fn on_chunk_written(
        &mut self,
        header: &ChunkHeader,
        hash: [u8; 32],
    ) -> Result<FileOutcome, ProtoError> {
        if self.failed.contains(&header.file) {
            return Ok(FileOutcome::Pending);
        }
        let Some(file) = self.open.get_mut(&header.file) else {
            return Err(ProtoError::Violation(format!("chunk for unknown file {}", header.file)));
        };
        let Some(slot) = file.chunks.get_mut(&header.index) else {
            return Err(ProtoError::Violation("chunk written without being checked".into()));
        };
        if *slot != Slot::Reading {
            // Counting it again would let a file reach its size with chunks missing.
            return Err(ProtoError::Violation(format!(
                "chunk {} of {} written twice",
                header.index, file.path
            )));
        }
        if hash != header.hash {
            let error =
                ProtoError::ChunkHashMismatch { path: file.path.to_string(), index: header.index };
            return Ok(self.fail(header.file, error));
        }
        *slot = Slot::Verified(hash);
        let plain_len = file.plan.span(header.index).map_or(0, |(_, len)| len);
        file.verified += u64::from(plain_len);
        self.totals.bytes += u64::from(plain_len);
        Ok(self.settle(header.file))
    }

    /// Records the sender's root hash for a file, and how many chunks it sent.
    pub fn on_summary(
        &mut self,
        id: u32,
        root: [u8; 32],
        sent: u32,
    ) -> Result<FileOutcome, ProtoError> {
        if self.failed.contains(&id) || self.skipped.contains(&id) {
            return Ok(FileOutcome::Pending);
        }
        let Some(file) = self.open.get_mut(&id) else {
            return Err(ProtoError::Violation(format!("summary for unknown file {id}")));
        };
        if file.summary.is_some() {
            // Refused without replacing the first root, which the file is checked against.
            return Err(ProtoError::Violation(format!("second summary for {}", file.path)));
        }
        if file.received > sent {
            return Err(ProtoError::Violation(format!(
                "summary of {} says {sent} chunks were sent, {} arrived",
                file.path, file.received
            )));
        }
        file.summary = Some((root, sent));
        Ok(self.settle(id))
    }

    /// With resume: records what is held of file `id` for chunks `from..to` (the chunks
    /// held there, with the hashes of the bytes held, ascending) and returns the report
    /// to send. Batches go from chunk 0 up to the file's chunk count, at most
    /// [`HELD_BATCH`] chunks each; a caller that breaks this gets an internal error.
    /// `None` for a file that is not open (it failed meanwhile): nothing to send.
    pub fn on_held(
        &mut self,
        id: u32,
        base: HeldBase,
        from: u32,
        to: u32,
        held: Vec<HeldChunk>,
    ) -> Result<Option<Message>, ProtoError> {
        let reports = self.reports_held();
        let Some(file) = self.open.get_mut(&id) else { return Ok(None) };
        let count = file.plan.count();
        let in_range = held.iter().all(|c| (from..to).contains(&c.index));
        let ascending = held.windows(2).all(|w| w[0].index < w[1].index);
        if !reports
            || from != file.declared
            || to <= from
            || u64::from(to) > count
            || held.len() > HELD_BATCH
            || !in_range
            || !ascending
        {
            return Err(ProtoError::Internal(format!(
                "held chunks {from}..{to} of {} out of turn",
                file.path
            )));
        }
        for chunk in &held {
            let len = file.plan.span(chunk.index).map_or(0, |(_, len)| len);
            file.chunks.insert(chunk.index, Slot::Held(chunk.hash));
            file.verified += u64::from(len);
            self.totals.bytes += u64::from(len);
            self.totals.resumed += u64::from(len);
        }
        file.declared = to;
        file.base = base.clone();
        Ok(Some(Message::Held(Held { file: id, base, from, to, chunks: held })))
    }

    /// Marks a file failed (a local write error, or the sender aborted it).
    pub fn on_file_failed(&mut self, id: u32) -> Option<PathBuf> {
        let file = self.open.remove(&id)?;
        self.failed.insert(id);
        self.totals.failures += 1;
        Some(file.local)
    }

    /// Records the end of the manifest. A refused end is not recorded: the receiver is
    /// not finished by an end that does not match the manifest.
    pub fn on_end(&mut self, files: u32, bytes: u64) -> Result<(), ProtoError> {
        if self.manifest_end.is_some() {
            return Err(ProtoError::Violation("second end of manifest".into()));
        }
        if files != self.next_id {
            return Err(ProtoError::Violation(format!(
                "end of manifest says {files} files, {} were announced",
                self.next_id
            )));
        }
        self.manifest_end = Some((files, bytes));
        Ok(())
    }

    /// Whether the manifest ended and every file is in place or failed.
    pub fn is_finished(&self) -> bool {
        self.manifest_end.is_some() && self.open.is_empty()
    }

    /// The local path of open file `id`.
    pub fn open_path(&self, id: u32) -> Option<PathBuf> {
        self.open.get(&id).map(|f| f.local.clone())
    }

    /// Files still open, with their local paths (for cleanup after a fatal error).
    pub fn open_files(&self) -> impl Iterator<Item = (u32, &PathBuf)> {
        self.open.iter().map(|(id, f)| (*id, &f.local))
    }

    /// The directory this copy makes (or resumes) as the target itself, once its entry
    /// came, and the top-level name of the source it stands for: a single source's
    /// directory under [`Target::AsName`], or the one a [`Target::Resumed`] was made
    /// for. While the copy is unfinished the caller keeps a mark in it, by which the
    /// same command run again resumes it there ([`Target::Resumed`]).
    pub fn made_target(&self) -> Option<(PathBuf, &Name)> {
        let top = self.top_name.as_ref()?;
        if !self.target.takes_name(top) || !self.dirs.contains(&WirePath(vec![top.clone()])) {
            return None;
        }
        self.target.local_path(&WirePath(vec![top.clone()])).ok().map(|local| (local, top))
    }

    /// Directories received, parents first, with their metadata (applied at the end,
    /// children first, so writing into them does not disturb their times).
    pub fn directories(&self) -> &[(PathBuf, Meta)] {
        &self.dir_meta
    }

    /// The chunks of open file `id` that are verified or held, in index order (empty for
    /// a file not open).
    pub fn verified_chunks(&self, id: u32) -> Vec<u32> {
        self.open.get(&id).map_or_else(Vec::new, |file| {
            file.chunks
                .iter()
                .filter(|(_, slot)| **slot != Slot::Reading)
                .map(|(index, _)| *index)
                .collect()
        })
    }

    /// Counters so far.
    pub fn totals(&self) -> Totals {
        self.totals
    }

    fn fail(&mut self, id: u32, error: ProtoError) -> FileOutcome {
        match self.on_file_failed(id) {
            Some(local) => FileOutcome::Failed { id, local, error },
            None => FileOutcome::Pending,
        }
    }

    /// Completes the file if every chunk and the summary are in.
    fn settle(&mut self, id: u32) -> FileOutcome {
        let Some(file) = self.open.get(&id) else { return FileOutcome::Pending };
        if !file.opened {
            return FileOutcome::Pending;
        }
        // Chunks still on their way (on QUIC a summary can overtake them; on any link
        // one can be queued behind it) leave the file pending, even where it holds
        // bytes for them already.
        let Some((summary, sent)) = file.summary else { return FileOutcome::Pending };
        if file.received < sent {
            return FileOutcome::Pending;
        }
        let all_in = file.chunks.len() as u64 == file.plan.count();
        if file.verified != file.size
            || !all_in
            || file.chunks.values().any(|s| *s == Slot::Reading)
        {
            return FileOutcome::Pending;
        }
        let hashes = file.chunks.values().filter_map(|slot| match slot {
            Slot::Verified(hash) | Slot::Held(hash) => Some(hash),
            Slot::Reading => None,
        });
        let root = root_hash(file.size, hashes);
        if root != summary {
            let error = ProtoError::FileHashMismatch { path: file.path.to_string() };
            return self.fail(id, error);
        }
        // safe: the entry was just looked up
        let Some(file) = self.open.remove(&id) else { return FileOutcome::Pending };
        self.totals.files += 1;
        if file.chunks.values().any(|slot| matches!(slot, Slot::Held(_))) {
            self.totals.resumed_files += 1;
        }
        let in_place = file.base == HeldBase::Complete && file.replaced == 0;
        FileOutcome::Ready(Ready {
            id,
            local: file.local,
            meta: file.meta,
            size: file.size,
            in_place,
        })
    }
}

#[cfg(test)]
mod tests;
