//! The sender harness: a [`Sender`] driven by a sequence of calls decoded from the
//! fuzzer's bytes (the caller's announcements, chunks handed out and sent in any order,
//! failed reads) and by arbitrary receiver reports ([`Sender::on_report`]), each result
//! compared with a model and the invariants checked after every call.
//!
//! Calls are decoded by hand, as in `receiver.rs` (same reasons; same path, size and
//! meta arguments). Byte format: one configuration byte (bits 0-1 the chunk size:
//! minimum, default, maximum, or a u32 that follows), then operations, each an op byte
//! (its value modulo [`OPS`]) and its arguments.

use std::collections::BTreeMap;

use super::input::Input;
use super::paths::is_safe_path;
use super::receiver::{file_size, meta, wire_path};
use super::wire::round_trip;
use crate::chunk::{root_hash, ChunkPlan};
use crate::chunk::{DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE};
use crate::frame;
use crate::manifest::Entry;
use crate::message::Message;
use crate::receive::Totals;
use crate::send::{ChunkSpan, FileStart, Report, Sender};

/// Op: `plan`; arguments: files (byte), bytes (u64).
pub(super) const PLAN: u8 = 0;
/// Op: `dir`; arguments: path, meta.
pub(super) const DIR: u8 = 1;
/// Op: `file`; arguments: path, size, meta.
pub(super) const FILE: u8 = 2;
/// Op: `next_chunk`; argument: file id (`b % 16`).
pub(super) const NEXT: u8 = 3;
/// Op: `on_chunk_sent`; arguments: file id, index (255: `u32::MAX`, else `b % 8`), hash
/// byte.
pub(super) const SENT: u8 = 4;
/// Op: `on_read_failed`; argument: file id.
pub(super) const READ_FAILED: u8 = 5;
/// Op: `end`.
pub(super) const END: u8 = 6;
/// Op: `source_error`.
pub(super) const SOURCE_ERROR: u8 = 7;
/// Op: `on_report`; arguments: a kind byte (`% 5`: progress with a u64, a file failure
/// with a file id, finished with a u32, a u64 and a u32, fatal, or a raw control message:
/// a length byte and that many bytes of postcard payload).
pub(super) const REPORT: u8 = 8;
/// Number of ops.
pub(super) const OPS: u8 = 9;

/// Feeds `data` as a configuration and a sequence of calls to a [`Sender`].
pub fn sender(data: &[u8]) {
    let mut input = Input::new(data);
    let chunk_size = match input.byte() % 4 {
        0 => MIN_CHUNK_SIZE,
        1 => DEFAULT_CHUNK_SIZE,
        2 => MAX_CHUNK_SIZE,
        _ => input.u32(),
    };
    let tx = Sender::new(chunk_size, false);
    let valid = (MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE).contains(&chunk_size);
    assert_eq!(tx.is_ok(), valid, "chunk size {chunk_size}");
    let Ok(mut tx) = tx else { return };
    let mut model = Model { chunk_size, ..Model::default() };
    while !input.is_empty() {
        match input.byte() % OPS {
            PLAN => {
                let (files, bytes) = (u32::from(input.byte()), input.u64());
                let result = tx.plan(files, bytes);
                assert_eq!(result.ok(), (!model.planned).then_some(Message::Plan { files, bytes }));
                model.planned = true;
            }
            DIR => {
                let (path, meta) = (wire_path(&mut input), meta(&mut input));
                let result = tx.dir(path.clone(), meta);
                let ok = model.may_announce() && is_safe_path(&path);
                assert_eq!(result.ok(), ok.then_some(Message::Entry(Entry::Dir { path, meta })));
            }
            FILE => {
                let path = wire_path(&mut input);
                let size = file_size(&mut input, chunk_size);
                let meta = meta(&mut input);
                let result = tx.file(path.clone(), size, meta);
                model.file(result, Entry::File { id: model.next_id, path, size, meta });
            }
            NEXT => {
                let file = u32::from(input.byte() % 16);
                let span = tx.next_chunk(file);
                model.next_chunk(file, span);
            }
            SENT => {
                let file = u32::from(input.byte() % 16);
                let index = match input.byte() {
                    255 => u32::MAX,
                    b => u32::from(b % 8),
                };
                let hash = [input.byte(); 32];
                let result = tx.on_chunk_sent(file, index, hash);
                model.chunk_sent(file, index, hash, result.map_err(|_| ()));
            }
            READ_FAILED => {
                let file = u32::from(input.byte() % 16);
                let result = tx.on_read_failed(file, "read error".into());
                let open = model.files.get(&file).is_some_and(|f| f.state == State::Open);
                let aborted = Message::FileAborted { file, message: "read error".into() };
                assert_eq!(result, open.then_some(aborted), "on_read_failed({file})");
                if open {
                    model.set_state(file, State::Aborted);
                }
            }
            END => {
                let result = tx.end();
                let open = model.files.values().any(|f| f.state == State::Open);
                let ok = model.planned && !model.ended && !open;
                let files = model.next_id;
                let end = Message::EndOfManifest { files, bytes: model.bytes };
                assert_eq!(result.ok(), ok.then_some(end), "end");
                model.ended |= ok;
            }
            SOURCE_ERROR => {
                let result = tx.source_error("src".into(), "gone".into());
                let error = Message::SourceError { path: "src".into(), message: "gone".into() };
                assert_eq!(result.ok(), model.may_announce().then_some(error));
            }
            _ => {
                let Some(report) = report(&mut input) else { continue };
                let result = tx.on_report(report.clone());
                model.report(report, result.ok());
            }
        }
        model.check_invariants(&tx);
    }
}

/// A receiver's report: one of the messages a receiver sends, or any control message.
fn report(input: &mut Input<'_>) -> Option<Message> {
    Some(match input.byte() % 5 {
        0 => Message::Progress { verified_bytes: input.u64() },
        1 => Message::FileFailed { file: u32::from(input.byte() % 16), message: "full".into() },
        2 => Message::Finished { files: input.u32(), bytes: input.u64(), failures: input.u32() },
        3 => Message::Fatal { message: "gave up".into() },
        _ => {
            let len = usize::from(input.byte());
            frame::decode_payload::<Message>(input.take(len)).ok()?
        }
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Summarised,
    Aborted,
}

#[derive(Debug)]
struct FileModel {
    size: u64,
    plan: ChunkPlan,
    count: u64,
    handed_out: u32,
    sent: BTreeMap<u32, [u8; 32]>,
    state: State,
}

#[derive(Debug, Default)]
struct Model {
    chunk_size: u32,
    planned: bool,
    ended: bool,
    finished: bool,
    next_id: u32,
    bytes: u64,
    files: BTreeMap<u32, FileModel>,
}

impl Model {
    fn may_announce(&self) -> bool {
        self.planned && !self.ended
    }

    fn set_state(&mut self, file: u32, state: State) {
        if let Some(f) = self.files.get_mut(&file) {
            f.state = state;
        }
    }

    /// `file`: accepted exactly when announcing is allowed, the path is safe, the chunks
    /// can be indexed by a u32, and the id and the total size do not overflow.
    fn file(&mut self, result: Result<FileStart, crate::ProtoError>, entry: Entry) {
        let Entry::File { id, path, size, .. } = &entry else { return };
        let plan = ChunkPlan::new(*size, self.chunk_size);
        let count = plan.count();
        let total = self.bytes.checked_add(*size);
        let ok = self.may_announce()
            && is_safe_path(path)
            && count <= u64::from(u32::MAX)
            && self.next_id < u32::MAX
            && total.is_some();
        assert_eq!(result.is_ok(), ok, "file({entry:?}): {result:?}");
        let (Ok(start), Some(total)) = (result, total) else { return };
        let summary = (count == 0).then(|| Message::FileSummary {
            file: *id,
            root: root_hash(*size, []),
            sent: 0,
        });
        let expected =
            FileStart { id: *id, entry: Message::Entry(entry.clone()), chunks: count, summary };
        assert_eq!(start, expected);
        round_trip(&start.entry);
        self.next_id += 1;
        self.bytes = total;
        let state = if count == 0 { State::Summarised } else { State::Open };
        let file =
            FileModel { size: *size, plan, count, handed_out: 0, sent: BTreeMap::new(), state };
        self.files.insert(*id, file);
    }

    /// `next_chunk`: the next index of an open file, until all were handed out.
    fn next_chunk(&mut self, file: u32, span: Option<ChunkSpan>) {
        let Some(f) = self.files.get_mut(&file).filter(|f| f.state == State::Open) else {
            assert_eq!(span, None, "a chunk of file {file}, which is not open");
            return;
        };
        if u64::from(f.handed_out) >= f.count {
            assert_eq!(span, None, "more chunks of file {file} than it has");
            return;
        }
        let index = f.handed_out;
        let (offset, len) = f.plan.span(index).expect("an index below the count has a span");
        assert_eq!(span, Some(ChunkSpan { file, index, offset, len, claimed: None }));
        f.handed_out += 1;
    }

    /// `on_chunk_sent`: a chunk handed out and not sent yet; the summary comes with the
    /// last one, and its root is over every chunk hash in index order.
    fn chunk_sent(
        &mut self,
        file: u32,
        index: u32,
        hash: [u8; 32],
        result: Result<Option<Message>, ()>,
    ) {
        let expected = match self.files.get_mut(&file) {
            Some(f) if f.state == State::Aborted => Ok(None),
            Some(f) if f.state == State::Open => {
                if index >= f.handed_out || f.sent.contains_key(&index) {
                    Err(())
                } else {
                    f.sent.insert(index, hash);
                    if f.sent.len() as u64 == f.count {
                        f.state = State::Summarised;
                        let root = root_hash(f.size, f.sent.values());
                        let sent = f.sent.len() as u32;
                        Ok(Some(Message::FileSummary { file, root, sent }))
                    } else {
                        Ok(None)
                    }
                }
            }
            _ => Err(()),
        };
        assert_eq!(result, expected, "on_chunk_sent({file}, {index}, {hash:?})");
    }

    /// `on_report`: what a receiver may say, and nothing after its finish report.
    fn report(&mut self, msg: Message, result: Option<Report>) {
        let expected = if self.finished {
            None
        } else {
            match msg.clone() {
                Message::Progress { verified_bytes } => Some(Report::Progress { verified_bytes }),
                Message::FileFailed { file, message } if file < self.next_id => {
                    // The sender stops a file the receiver failed, as it does an abort.
                    if self.files.get(&file).is_some_and(|f| f.state == State::Open) {
                        self.set_state(file, State::Aborted);
                    }
                    Some(Report::FileFailed { file, message })
                }
                Message::Finished { files, bytes, failures } if self.ended => {
                    Some(Report::Finished(Totals {
                        files,
                        bytes,
                        failures,
                        resumed: 0,
                        skipped: 0,
                        resumed_files: 0,
                    }))
                }
                Message::Fatal { message } => Some(Report::Fatal { message }),
                Message::Unfinished(unfinished) => Some(Report::Unfinished(unfinished)),
                _ => None,
            }
        };
        assert_eq!(result, expected, "on_report({msg:?})");
        self.finished |= matches!(result, Some(Report::Finished(_)));
    }

    fn check_invariants(&self, tx: &Sender) {
        let open: Vec<&FileModel> =
            self.files.values().filter(|f| f.state == State::Open).collect();
        assert_eq!(tx.open_files(), open.len(), "open files");
        // Held hashes: those sent ahead of a chunk not yet sent, never more than a file's
        // chunk count.
        let held: usize = open
            .iter()
            .map(|f| {
                let folded = (0..).find(|i| !f.sent.contains_key(i)).unwrap_or(u32::MAX);
                f.sent.range(folded..).count()
            })
            .sum();
        assert_eq!(tx.held_hashes(), held, "held hashes");
        assert!(open.iter().all(|f| f.sent.len() as u64 <= f.count));
        // Finished only after the end of the manifest and the receiver's finish report.
        assert_eq!(tx.is_finished(), self.finished);
        assert!(!self.finished || self.ended);
    }
}
