//! Both state machines driven against each other by a plain loop, in memory: files are
//! byte vectors, every message crosses as frames ([`frame::encode`], [`Decoder`]), and a
//! seeded generator decides what happens next, so chunks are read, sent and delivered out
//! of order and may arrive before their file's entry, as on QUIC.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;

use super::wp;
use crate::chunk::{chunk_hash, ChunkHeader, MIN_CHUNK_SIZE};
use crate::frame::{self, Decoder, MAX_CONTROL_FRAME};
use crate::manifest::Meta;
use crate::message::Message;
use crate::path::Target;
use crate::receive::{ChunkCheck, EntryAction, FileOutcome, Receiver, Totals};
use crate::send::{ChunkSpan, Report, Sender};

const CS: u32 = MIN_CHUNK_SIZE;
/// Chunks being read at once (the engine's chunks in flight).
const WINDOW: usize = 5;
/// Steps after which a run counts as hung.
const MAX_STEPS: usize = 100_000;

/// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): deterministic, and enough to shuffle.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Intact,
    /// Reading this chunk fails.
    ReadFailsAt(u32),
    /// This chunk's bytes are damaged on the way (its header keeps the true hash).
    CorruptAt(u32),
}

enum Source {
    Dir(&'static [&'static str]),
    File(&'static [&'static str], usize, Fate),
    Missing(&'static str),
}

fn sources() -> Vec<Source> {
    let cs = CS as usize;
    vec![
        Source::File(&["a"], 2 * cs + 100, Fate::Intact),
        Source::Missing("gone"),
        Source::File(&["empty"], 0, Fate::Intact),
        Source::File(&["exact"], 3 * cs, Fate::Intact),
        Source::Dir(&["tree"]),
        Source::File(&["tree", "one"], 1000, Fate::Intact),
        Source::Dir(&["tree", "sub"]),
        Source::File(&["tree", "sub", "two"], cs + 1, Fate::Intact),
        Source::File(&["flaky"], 4 * cs + 7, Fate::ReadFailsAt(2)),
        Source::File(&["bad"], 3 * cs, Fate::CorruptAt(1)),
        Source::File(&["last"], 5, Fate::Intact),
    ]
}

/// The sending side: the sources, the chunks being read, and its two outputs.
struct SendSide {
    tx: Sender,
    queue: VecDeque<(Source, Vec<u8>)>,
    /// Announced files: where they should land, their bytes, their fate.
    files: HashMap<u32, (PathBuf, Vec<u8>, Fate)>,
    current: Option<u32>,
    reading: Vec<ChunkSpan>,
    /// Control bytes on their way to the receiver, in order.
    control: Vec<u8>,
    /// Chunk streams on their way, each a chunk frame and its bytes, in no order.
    streams: Vec<Vec<u8>>,
    reports: Decoder,
    ended: bool,
    seen: Vec<Report>,
    /// Whether the file that fails to read was aborted.
    aborted: bool,
    /// Chunks of that file sent before its abort.
    sent_before_abort: usize,
}

impl SendSide {
    fn emit(&mut self, msg: &Message) {
        frame::encode(msg, &mut self.control).expect("encodes");
    }

    /// Announces the next source, hands out a chunk, or ends the manifest.
    fn announce(&mut self) {
        if self.reading.len() >= WINDOW {
            return;
        }
        if let Some(span) = self.current.and_then(|id| self.tx.next_chunk(id)) {
            self.reading.push(span);
            return;
        }
        self.current = None;
        if let Some((source, data)) = self.queue.pop_front() {
            let msg = match source {
                Source::Dir(parts) => self.tx.dir(wp(parts), Meta::default()).expect("dir"),
                Source::Missing(name) => {
                    self.tx.source_error(name.into(), "no such file".into()).expect("error")
                }
                Source::File(parts, size, fate) => {
                    let start = self.tx.file(wp(parts), size as u64, Meta::default()).expect("ok");
                    self.emit(&start.entry);
                    self.files.insert(start.id, (local(parts), data, fate));
                    self.current = Some(start.id);
                    let Some(summary) = start.summary else { return };
                    summary
                }
            };
            self.emit(&msg);
        } else if !self.ended && self.tx.open_files() == 0 {
            let end = self.tx.end().expect("every file settled");
            self.emit(&end);
            self.ended = true;
        }
    }

    /// Finishes reading one of the chunks being read, and sends it.
    fn read_one(&mut self, rng: &mut Rng) {
        if self.reading.is_empty() {
            return;
        }
        let span = self.reading.swap_remove(rng.below(self.reading.len()));
        let (_, data, fate) = &self.files[&span.file];
        if *fate == Fate::ReadFailsAt(span.index) {
            if let Some(abort) = self.tx.on_read_failed(span.file, "input/output error".into()) {
                self.emit(&abort);
                self.aborted = true;
            }
            return;
        }
        let plain = &data[span.offset as usize..][..span.len as usize];
        let hash = chunk_hash(plain);
        let mut wire = plain.to_vec();
        if *fate == Fate::CorruptAt(span.index) {
            wire[0] ^= 0xff;
        }
        let header = ChunkHeader {
            file: span.file,
            index: span.index,
            wire_len: span.len,
            compressed: false,
            hash,
        };
        let mut stream = frame::to_vec(&Message::Chunk(header)).expect("encodes");
        stream.extend_from_slice(&wire);
        self.streams.push(stream);
        if matches!(fate, Fate::ReadFailsAt(_)) && !self.aborted {
            self.sent_before_abort += 1;
        }
        let summary = self.tx.on_chunk_sent(span.file, span.index, hash).expect("sent once");
        if let Some(summary) = summary {
            self.emit(&summary);
        }
    }

    fn take_reports(&mut self, bytes: Vec<u8>) {
        self.reports.feed(&bytes);
        while let Some(msg) = self.reports.next_message::<Message>().expect("decodes") {
            self.seen.push(self.tx.on_report(msg).expect("a valid report"));
        }
    }
}

fn local(parts: &[&str]) -> PathBuf {
    PathBuf::from("/t").join(parts.join("/"))
}

/// The receiving side: its "file system" and its reports.
struct ReceiveSide {
    rx: Receiver,
    control: Decoder,
    /// Temporary files by id: their final path and bytes.
    temp: HashMap<u32, (PathBuf, Vec<u8>)>,
    /// Files renamed into place.
    done: BTreeMap<PathBuf, Vec<u8>>,
    dirs: BTreeSet<PathBuf>,
    source_errors: Vec<String>,
    plan: Option<(u32, u64)>,
    end: Option<(u32, u64)>,
    /// Report bytes on their way to the sender, in order.
    reports: Vec<u8>,
    finished: bool,
    /// Bytes of accepted chunks whose hash this loop saw match.
    verified: u64,
    /// Chunks that arrived before their file's entry.
    early: usize,
    /// Chunks that arrived after a later chunk of their file.
    out_of_order: usize,
    last_index: HashMap<u32, u32>,
}

impl ReceiveSide {
    fn report(&mut self, msg: &Message) {
        frame::encode(msg, &mut self.reports).expect("encodes");
    }

    fn take_control(&mut self, bytes: &[u8]) {
        self.control.feed(bytes);
        while let Some(msg) = self.control.next_message::<Message>().expect("decodes") {
            self.on_message(msg);
        }
    }

    /// What the engine's receiver does with each control message.
    fn on_message(&mut self, msg: Message) {
        match msg {
            Message::Plan { files, bytes } => self.plan = Some((files, bytes)),
            Message::Entry(entry) => match self.rx.on_entry(entry).expect("a valid entry") {
                EntryAction::MakeDir { local } => {
                    self.dirs.insert(local);
                }
                EntryAction::CreateFile { id, local, size, .. } => {
                    self.temp.insert(id, (local, vec![0; size as usize]));
                    if let Some(outcome) = self.rx.on_file_opened(id) {
                        self.settle(outcome);
                    }
                }
            },
            Message::FileSummary { file, root, sent } => {
                let outcome = self.rx.on_summary(file, root, sent).expect("a valid summary");
                self.settle(outcome);
            }
            Message::FileAborted { file, .. } => {
                if self.rx.on_file_failed(file).is_some() {
                    self.temp.remove(&file);
                }
            }
            Message::SourceError { path, .. } => self.source_errors.push(path),
            Message::EndOfManifest { files, bytes } => {
                self.rx.on_end(files, bytes).expect("matches the manifest");
                self.end = Some((files, bytes));
            }
            other => panic!("the sender sent {}", other.kind()),
        }
    }

    /// Takes one chunk stream; `false` if it must wait for its file's entry.
    fn take_stream(&mut self, stream: &[u8]) -> bool {
        let mut decoder = Decoder::new(MAX_CONTROL_FRAME);
        decoder.feed(stream);
        let Some(Message::Chunk(header)) = decoder.next_message().expect("decodes") else {
            panic!("a chunk stream without a chunk frame")
        };
        let wire = decoder.buffered();
        assert_eq!(wire.len(), header.wire_len as usize);
        let (offset, plain_len) = match self.rx.check_chunk(&header).expect("fits") {
            ChunkCheck::NotYetAnnounced => {
                self.early += 1;
                return false;
            }
            ChunkCheck::Discard => return true,
            ChunkCheck::Accept { offset, plain_len } => (offset, plain_len),
        };
        assert_eq!(plain_len, header.wire_len, "nothing is compressed here");
        let last = self.last_index.insert(header.file, header.index);
        self.out_of_order += usize::from(last.is_some_and(|last| last > header.index));
        let hash = chunk_hash(wire);
        if hash == header.hash {
            self.verified += u64::from(plain_len);
            let (_, data) = self.temp.get_mut(&header.file).expect("accepted, so open");
            data[offset as usize..][..wire.len()].copy_from_slice(wire);
        }
        let outcome = self.rx.on_chunk_written(&header, hash).expect("checked before");
        self.settle(outcome);
        self.report(&Message::Progress { verified_bytes: self.rx.totals().bytes });
        true
    }

    fn settle(&mut self, outcome: FileOutcome) {
        match outcome {
            FileOutcome::Pending => {}
            FileOutcome::Ready(ready) => {
                let (local, data) = self.temp.remove(&ready.id).expect("ready, so open");
                assert_eq!(local, ready.local);
                self.done.insert(local, data);
            }
            FileOutcome::Failed { id, error, .. } => {
                self.temp.remove(&id);
                self.report(&Message::FileFailed { file: id, message: error.to_string() });
            }
        }
    }

    /// Reports the end once the manifest ended and every file settled, as the engine does.
    fn maybe_finish(&mut self) {
        if !self.finished && self.end.is_some() && self.rx.is_finished() {
            let Totals { files, bytes, failures, .. } = self.rx.totals();
            self.report(&Message::Finished { files, bytes, failures });
            self.finished = true;
        }
    }
}

/// One whole copy, every step chosen by `seed`.
fn run(seed: u64) -> (SendSide, ReceiveSide) {
    let mut rng = Rng(seed);
    let queue: VecDeque<(Source, Vec<u8>)> = sources()
        .into_iter()
        .map(|source| {
            let data = match &source {
                Source::File(_, size, _) => rng.bytes(*size),
                _ => Vec::new(),
            };
            (source, data)
        })
        .collect();
    let (files, bytes) = planned(&queue);
    let mut tx = Sender::new(CS, false).expect("valid chunk size");
    let plan = tx.plan(files, bytes).expect("first");
    let mut send = SendSide {
        tx,
        queue,
        files: HashMap::new(),
        current: None,
        reading: Vec::new(),
        control: Vec::new(),
        streams: Vec::new(),
        reports: Decoder::new(MAX_CONTROL_FRAME),
        ended: false,
        seen: Vec::new(),
        aborted: false,
        sent_before_abort: 0,
    };
    send.emit(&plan);
    let target = Target::IntoDir("/t".into());
    let mut recv = ReceiveSide {
        rx: Receiver::new(target, None, true, CS).expect("valid chunk size"),
        control: Decoder::new(MAX_CONTROL_FRAME),
        temp: HashMap::new(),
        done: BTreeMap::new(),
        dirs: BTreeSet::new(),
        source_errors: Vec::new(),
        plan: None,
        end: None,
        reports: Vec::new(),
        finished: false,
        verified: 0,
        early: 0,
        out_of_order: 0,
        last_index: HashMap::new(),
    };
    for _ in 0..MAX_STEPS {
        if send.tx.is_finished() {
            break;
        }
        match rng.below(5) {
            0 => send.announce(),
            1 => send.read_one(&mut rng),
            // Control bytes arrive in order, in pieces of any size.
            2 if !recv.finished && !send.control.is_empty() => {
                let n = 1 + rng.below(send.control.len().min(64));
                let bytes: Vec<u8> = send.control.drain(..n).collect();
                recv.take_control(&bytes);
            }
            3 if !recv.finished && !send.streams.is_empty() => {
                let stream = send.streams.swap_remove(rng.below(send.streams.len()));
                if !recv.take_stream(&stream) {
                    send.streams.push(stream);
                }
            }
            4 if !recv.reports.is_empty() => {
                let n = 1 + rng.below(recv.reports.len().min(64));
                send.take_reports(recv.reports.drain(..n).collect());
            }
            _ => {}
        }
        recv.maybe_finish();
    }
    assert!(send.tx.is_finished(), "seed {seed}: the copy did not finish");
    (send, recv)
}

/// Files and bytes of the plan: every file source.
fn planned(queue: &VecDeque<(Source, Vec<u8>)>) -> (u32, u64) {
    queue.iter().fold((0, 0), |(files, bytes), (source, data)| match source {
        Source::File(..) => (files + 1, bytes + data.len() as u64),
        _ => (files, bytes),
    })
}

/// Checks what both sides ended with.
fn check(seed: u64, send: &SendSide, recv: &ReceiveSide) {
    let intact: BTreeMap<PathBuf, Vec<u8>> = send
        .files
        .values()
        .filter(|(_, _, fate)| *fate == Fate::Intact)
        .map(|(local, data, _)| (local.clone(), data.clone()))
        .collect();
    assert_eq!(intact.len(), 6, "seed {seed}");
    assert_eq!(recv.done, intact, "seed {seed}: the intact files, byte for byte, and no others");
    assert!(recv.temp.is_empty(), "seed {seed}: failed files were removed");
    let dirs: BTreeSet<PathBuf> = [local(&["tree"]), local(&["tree", "sub"])].into();
    assert_eq!(recv.dirs, dirs, "seed {seed}");
    assert_eq!(recv.source_errors, ["gone"], "seed {seed}");

    let all: u64 = send.files.values().map(|(_, data, _)| data.len() as u64).sum();
    assert_eq!(recv.plan, Some((8, all)), "seed {seed}");
    assert_eq!(recv.end, Some((8, all)), "seed {seed}");

    let totals = recv.rx.totals();
    let intact_bytes: u64 = intact.values().map(|data| data.len() as u64).sum();
    assert_eq!((totals.files, totals.failures), (6, 2), "seed {seed}");
    assert_eq!(totals.bytes, recv.verified, "seed {seed}");
    // Chunks of the two failed files verified before they failed count too, the damaged
    // chunk and the unreadable one never.
    let failed_bytes = all - intact_bytes;
    assert!(totals.bytes >= intact_bytes, "seed {seed}");
    assert!(totals.bytes <= intact_bytes + failed_bytes - 2 * u64::from(CS), "seed {seed}");

    let bad = send.files.iter().find(|(_, (_, _, fate))| matches!(fate, Fate::CorruptAt(_)));
    let bad = bad.map(|(id, _)| *id).expect("the damaged file was announced");
    let failures: Vec<&Report> =
        send.seen.iter().filter(|r| !matches!(r, Report::Progress { .. })).collect();
    let [Report::FileFailed { file, message }, Report::Finished(finished)] = failures[..] else {
        panic!("seed {seed}: sender saw {failures:?}")
    };
    assert_eq!(*file, bad, "seed {seed}");
    assert!(message.contains("failed verification"), "seed {seed}: {message}");
    assert_eq!(*finished, totals, "seed {seed}");
    assert!(send.seen.iter().any(|r| matches!(r, Report::Progress { .. })), "seed {seed}");
    assert_eq!((send.tx.open_files(), send.tx.held_hashes()), (0, 0), "seed {seed}");
}

#[test]
fn sender_and_receiver_agree_in_a_shuffled_plain_loop() {
    let (mut early, mut out_of_order, mut before_abort) = (0, 0, 0);
    for seed in 0..16 {
        let (send, recv) = run(seed);
        check(seed, &send, &recv);
        early += recv.early;
        out_of_order += recv.out_of_order;
        before_abort += send.sent_before_abort;
    }
    // The orders that make the protocol hard did occur.
    assert!(early > 0, "no chunk arrived before its entry");
    assert!(out_of_order > 0, "no chunk arrived after a later one of its file");
    assert!(before_abort > 0, "no file was aborted mid-way");
}
