//! The receiver harness: a [`Receiver`] driven by a sequence of calls decoded from the
//! fuzzer's bytes, each call's result compared with a model of the protocol, and the
//! invariants checked after every call.
//!
//! The calls are decoded by hand ([`Input`]) rather than derived with the `arbitrary`
//! crate, for three reasons: soku-proto needs no extra dependency or feature, so the
//! corpus replay runs in the plain `cargo test`; the byte format is defined in this file,
//! so committed corpus files keep their meaning whatever a dependency upgrade does to its
//! own format; and ids, sizes and path components come from small tables of values that
//! matter (the id expected next, a size one byte past a chunk, `..`, a parent announced
//! or not), which the fuzzer hits far sooner than among arbitrary integers and strings.
//!
//! Byte format: one configuration byte ([`Script::new`]), then operations, each an op
//! byte (its value modulo [`OPS`]) and its arguments; reads past the end give zeros.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use super::input::Input;
use super::paths::{expected_local, is_safe_path, is_spelled_here, ROOT};
use crate::chunk::{max_wire_len, root_hash, ChunkHeader, ChunkPlan};
use crate::chunk::{DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE};
use crate::manifest::{Entry, Meta};
use crate::name::Name;
use crate::path::{NameFilter, Target, WirePath, MAX_COMPONENT, MAX_DEPTH};
use crate::receive::{ChunkCheck, EntryAction, FileOutcome, Ready, Receiver, Totals};
use crate::ProtoError;

/// Op: `on_entry(Dir)`; arguments: path, meta.
pub(super) const DIR: u8 = 0;
/// Op: `on_entry(File)`; arguments: id, path, size, meta.
pub(super) const FILE: u8 = 1;
/// Op: `on_file_opened`; argument: id.
pub(super) const OPENED: u8 = 2;
/// Op: `check_chunk`; argument: header.
pub(super) const CHECK: u8 = 3;
/// Op: `on_chunk_written`; arguments: header, hash.
pub(super) const WRITTEN: u8 = 4;
/// Op: `on_summary`; arguments: id, root.
pub(super) const SUMMARY: u8 = 5;
/// Op: `on_file_failed`; argument: id.
pub(super) const FAILED: u8 = 6;
/// Op: `on_end`; arguments: file count (an id), bytes (u64).
pub(super) const END: u8 = 7;
/// Op: `check_chunk`, then `on_chunk_written` with the header's own hash if accepted, as
/// the caller does for a chunk whose bytes check out; argument: header.
pub(super) const DELIVER: u8 = 8;
/// Number of ops.
pub(super) const OPS: u8 = 9;

/// Id argument: the id the receiver expects next.
pub(super) const ID_NEXT: u8 = 0xfe;
/// Id argument: `u32::MAX`; any other byte `b` means id `b % 16`.
pub(super) const ID_MAX: u8 = 0xff;
/// Hash and root arguments: an odd byte `b` means `[b; 32]`, an even byte the right one:
/// the header's own hash, or the root over the chunks verified so far and, for those not
/// yet verified, the hash `[b; 32]` (a summary may come before the chunks).
pub(super) const RIGHT: u8 = 0;
/// Size argument (`b % 10` picks): 0, 1, chunk - 1, chunk, chunk + 1, 2 chunks, 3 chunks
/// - 7, the largest file (`u32::MAX` chunks), `u64::MAX`, or a u64 read from the input.
pub(super) const SIZES: u8 = 10;

/// Path components (the component argument picks `b % len`); the last one reads a length
/// byte (`% 8`) and that many bytes, taken as lossy UTF-8.
const PARTS: [&str; 13] =
    ["a", "b", "c", "d.log", ".log", "..", ".", "", "x/y", "x\\y", "n\0ul", "ü", "z"];
/// Component index for a name of `MAX_COMPONENT` bytes, and one byte more.
const PART_LONGEST: u8 = 13;
const PART_TOO_LONG: u8 = 14;
const PART_RAW: u8 = 15;

/// Feeds `data` as a configuration and a sequence of calls to a [`Receiver`].
pub fn receiver(data: &[u8]) {
    let mut input = Input::new(data);
    let Some((mut rx, mut model)) = Model::setup(&mut input) else { return };
    while !input.is_empty() {
        let op = input.byte() % OPS;
        match op {
            DIR => {
                let path = model.path(&mut input);
                let meta = meta(&mut input);
                model.entry(&mut rx, Entry::Dir { path, meta });
            }
            FILE => {
                let id = model.id(&mut input);
                let path = model.path(&mut input);
                let size = model.size(&mut input);
                let meta = meta(&mut input);
                model.entry(&mut rx, Entry::File { id, path, size, meta });
            }
            OPENED => {
                let id = model.id(&mut input);
                let outcome = rx.on_file_opened(id);
                let expected = match model.open_file(id) {
                    Some(file) => {
                        file.opened = true;
                        Some(model.settle(id))
                    }
                    None => None,
                };
                assert_eq!(outcome, expected, "on_file_opened({id})");
            }
            CHECK => {
                let header = model.header(&mut input);
                let _ = model.check(&mut rx, &header);
            }
            WRITTEN => {
                let header = model.header(&mut input);
                let hash = pick_hash(input.byte(), header.hash);
                model.written(&mut rx, &header, hash);
            }
            SUMMARY => {
                let id = model.id(&mut input);
                let b = input.byte();
                let root = pick_hash(b, model.right_root(id, [b; 32]));
                model.summary(&mut rx, id, root);
            }
            FAILED => {
                let id = model.id(&mut input);
                let local = rx.on_file_failed(id);
                let expected = model.open_file(id).map(|file| file.local.clone());
                assert_eq!(local, expected, "on_file_failed({id})");
                if expected.is_some() {
                    model.fail(id);
                }
            }
            END => {
                let files = model.id(&mut input);
                let bytes = input.u64();
                let result = rx.on_end(files, bytes);
                let ok = !model.ended && files == model.next_id;
                assert_eq!(result.is_ok(), ok, "on_end({files}, {bytes}): {result:?}");
                model.ended |= ok;
            }
            _ => {
                let header = model.header(&mut input);
                if let Ok(ChunkCheck::Accept { .. }) = model.check(&mut rx, &header) {
                    model.written(&mut rx, &header, header.hash);
                }
            }
        }
        model.check_invariants(&rx);
    }
}

/// Builds inputs for [`receiver`] (the seed corpus).
#[derive(Debug, Clone)]
pub(super) struct Script(Vec<u8>);

impl Script {
    /// Configuration byte: bit 0 recursive; bit 1 a single-name target (else a
    /// directory); bits 2-3 the name filter (`% 3`: none, `dir/a` and `b`, `logs/*.log`
    /// and `c`); bits 4-5 the chunk size (minimum, default, maximum, or a u32 that follows).
    pub(super) fn new(config: u8) -> Self {
        Self(vec![config])
    }

    /// Appends raw bytes (an op and its arguments).
    pub(super) fn op(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }

    /// A path argument from component indexes.
    pub(super) fn path(parts: &[u8]) -> Vec<u8> {
        let mut out = vec![u8::try_from(parts.len()).unwrap_or(0)];
        out.extend_from_slice(parts);
        out
    }

    /// The bytes.
    pub(super) fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

pub(super) fn meta(input: &mut Input<'_>) -> Meta {
    Meta { mode: u32::from(input.byte()), ..Meta::default() }
}

fn pick_hash(b: u8, right: [u8; 32]) -> [u8; 32] {
    if b.is_multiple_of(2) {
        right
    } else {
        [b; 32]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Ready,
    Failed,
}

#[derive(Debug)]
struct FileModel {
    path: WirePath,
    local: PathBuf,
    size: u64,
    meta: Meta,
    plan: ChunkPlan,
    opened: bool,
    checked: BTreeSet<u32>,
    verified: BTreeMap<u32, [u8; 32]>,
    summary: Option<[u8; 32]>,
    state: State,
}

/// The name filters a configuration can pick.
#[derive(Debug, Clone, Copy)]
enum Names {
    Plain,
    Glob,
}

impl Names {
    fn requested(self) -> &'static [&'static str] {
        match self {
            Names::Plain => &["dir/a", "b"],
            Names::Glob => &["logs/*.log", "c"],
        }
    }

    /// Whether a top-level name matches, re-stated without the glob crate. A leading dot
    /// is never matched by `*` (path.rs asks for a literal leading dot), but `*` may match
    /// nothing, so `.log` itself matches `*.log` (its dot is the pattern's literal dot).
    fn allows(self, name: &Name) -> bool {
        let name = name.as_bytes();
        match self {
            Names::Plain => name == b"a" || name == b"b",
            Names::Glob => {
                name == b"c"
                    || name == b"*.log"
                    || name == b".log"
                    || (name.ends_with(b".log") && !name.starts_with(b"."))
            }
        }
    }
}

#[derive(Debug)]
struct Model {
    target: Target,
    names: Option<Names>,
    recursive: bool,
    chunk_size: u32,
    next_id: u32,
    top: Option<Name>,
    dirs: HashSet<WirePath>,
    /// Directory entries accepted (the same directory may come twice).
    dir_entries: usize,
    files: BTreeMap<u32, FileModel>,
    ended: bool,
    totals: Totals,
    announced_bytes: u128,
}

impl Model {
    fn setup(input: &mut Input<'_>) -> Option<(Receiver, Model)> {
        let config = input.byte();
        let recursive = config & 1 != 0;
        let target = if config & 2 == 0 {
            Target::IntoDir(ROOT.into())
        } else {
            Target::AsName(Path::new(ROOT).join("new"))
        };
        let names = match (config >> 2) % 4 % 3 {
            0 => None,
            1 => Some(Names::Plain),
            _ => Some(Names::Glob),
        };
        let chunk_size = match (config >> 4) % 4 {
            0 => MIN_CHUNK_SIZE,
            1 => DEFAULT_CHUNK_SIZE,
            2 => MAX_CHUNK_SIZE,
            _ => input.u32(),
        };
        let filter =
            names.map(|n| NameFilter::for_requested(n.requested().iter().map(|r| r.as_bytes())));
        let rx = Receiver::new(target.clone(), filter, recursive, chunk_size);
        let valid = (MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE).contains(&chunk_size);
        assert_eq!(rx.is_ok(), valid, "chunk size {chunk_size}");
        let model = Model {
            target,
            names,
            recursive,
            chunk_size,
            next_id: 0,
            top: None,
            dirs: HashSet::new(),
            dir_entries: 0,
            files: BTreeMap::new(),
            ended: false,
            totals: Totals::default(),
            announced_bytes: 0,
        };
        Some((rx.ok()?, model))
    }

    fn id(&self, input: &mut Input<'_>) -> u32 {
        match input.byte() {
            ID_MAX => u32::MAX,
            ID_NEXT => self.next_id,
            b => u32::from(b % 16),
        }
    }

    fn size(&self, input: &mut Input<'_>) -> u64 {
        file_size(input, self.chunk_size)
    }

    fn path(&self, input: &mut Input<'_>) -> WirePath {
        wire_path(input)
    }

    fn header(&self, input: &mut Input<'_>) -> ChunkHeader {
        let file = self.id(input);
        let index = match input.byte() {
            255 => u32::MAX,
            b => u32::from(b % 8),
        };
        let compressed = input.byte() % 2 == 1;
        let plain =
            self.files.get(&file).and_then(|f| f.plan.span(index)).map_or(0, |(_, len)| len);
        let wire_len = match input.byte() % 8 {
            1 => max_wire_len(plain, true),
            2 => plain.wrapping_add(1),
            3 => input.u32(),
            _ => plain,
        };
        let hash = [input.byte(); 32];
        ChunkHeader { file, index, wire_len, compressed, hash }
    }

    fn open_file(&mut self, id: u32) -> Option<&mut FileModel> {
        self.files.get_mut(&id).filter(|f| f.state == State::Open)
    }

    fn state(&self, id: u32) -> Option<State> {
        self.files.get(&id).map(|f| f.state)
    }

    /// The root the sender would send if every chunk not verified yet arrives with the
    /// hash `fill` (for a file of too many chunks to list: the root over the verified
    /// ones).
    fn right_root(&self, id: u32, fill: [u8; 32]) -> [u8; 32] {
        let Some(f) = self.files.get(&id) else { return [0; 32] };
        let count = u32::try_from(f.plan.count()).unwrap_or(u32::MAX);
        if count > 256 {
            return root_hash(f.size, f.verified.values());
        }
        let hashes: Vec<[u8; 32]> =
            (0..count).map(|i| f.verified.get(&i).copied().unwrap_or(fill)).collect();
        root_hash(f.size, &hashes)
    }

    /// `on_entry`, with the model's verdict: accepted exactly when the path is safe (and
    /// spelled on this platform), its
    /// top-level name allowed, its parent announced (with -r), and a file's id the next.
    fn entry(&mut self, rx: &mut Receiver, entry: Entry) {
        let result = rx.on_entry(entry.clone());
        let path = entry.path();
        let depth = path.0.len();
        // A single-name target lands the top name under the target's own.
        let landing = match self.target {
            Target::AsName(_) => path.0.get(1..).unwrap_or_default(),
            _ => &path.0[..],
        };
        let mut ok = !self.ended && is_safe_path(path) && is_spelled_here(landing);
        if ok {
            let top = &path.0[0];
            ok &= self.names.is_none_or(|names| names.allows(top));
            if let Target::AsName(_) = self.target {
                ok &= self.top.as_ref().is_none_or(|first| first == top);
            }
            if depth > 1 {
                let parent = WirePath(path.0[..depth - 1].to_vec());
                ok &= self.recursive && self.dirs.contains(&parent);
            }
        }
        match &entry {
            Entry::Dir { .. } => ok &= self.recursive,
            Entry::File { id, size, .. } => {
                ok &= *id == self.next_id
                    && *id != u32::MAX
                    && ChunkPlan::new(*size, self.chunk_size).count() <= u64::from(u32::MAX);
            }
        }
        assert_eq!(result.is_ok(), ok, "on_entry({entry:?}): {result:?}");
        let Ok(action) = result else { return };
        let local = expected_local(&self.target, path);
        if let Target::AsName(_) = self.target {
            self.top.get_or_insert_with(|| path.0[0].clone());
        }
        match (entry, action) {
            (Entry::Dir { path, .. }, EntryAction::MakeDir { local: made }) => {
                assert_eq!(made, local);
                self.dirs.insert(path);
                self.dir_entries += 1;
            }
            (Entry::File { id, path, size, meta }, action) => {
                let plan = ChunkPlan::new(size, self.chunk_size);
                let chunks = u32::try_from(plan.count()).expect("an accepted file's chunks fit");
                let expected =
                    EntryAction::CreateFile { id, local: local.clone(), size, meta, chunks };
                assert_eq!(action, expected);
                self.next_id += 1;
                self.announced_bytes += u128::from(size);
                let file = FileModel {
                    path,
                    local,
                    size,
                    meta,
                    plan,
                    opened: false,
                    checked: BTreeSet::new(),
                    verified: BTreeMap::new(),
                    summary: None,
                    state: State::Open,
                };
                assert!(self.files.insert(id, file).is_none(), "file id {id} accepted twice");
            }
            (entry, action) => panic!("{entry:?} answered with {action:?}"),
        }
    }

    /// `check_chunk`, with the model's verdict.
    fn check(&mut self, rx: &mut Receiver, header: &ChunkHeader) -> Result<ChunkCheck, ()> {
        let result = rx.check_chunk(header).map_err(|_| ());
        let expected = match self.files.get(&header.file) {
            Some(f) if f.state == State::Failed => Ok(ChunkCheck::Discard),
            Some(f) if f.state == State::Open => {
                if !f.opened {
                    Ok(ChunkCheck::NotYetAnnounced)
                } else {
                    match f.plan.span(header.index) {
                        Some((offset, plain_len))
                            if wire_len_fits(header, plain_len)
                                && !f.checked.contains(&header.index) =>
                        {
                            Ok(ChunkCheck::Accept { offset, plain_len })
                        }
                        _ => Err(()),
                    }
                }
            }
            Some(_) => Err(()),
            None if header.file >= self.next_id && !self.ended => Ok(ChunkCheck::NotYetAnnounced),
            None => Err(()),
        };
        assert_eq!(result, expected, "check_chunk({header:?})");
        if let Ok(ChunkCheck::Accept { .. }) = result {
            if let Some(f) = self.open_file(header.file) {
                f.checked.insert(header.index);
            }
        }
        result
    }

    /// `on_chunk_written`, with the model's verdict.
    fn written(&mut self, rx: &mut Receiver, header: &ChunkHeader, hash: [u8; 32]) {
        let result = rx.on_chunk_written(header, hash);
        let id = header.file;
        let expected = match self.state(id) {
            Some(State::Failed) => Ok(FileOutcome::Pending),
            Some(State::Open) => self.write_chunk(header, hash),
            _ => Err(()),
        };
        assert_eq!(result.map_err(|_| ()), expected, "on_chunk_written({header:?}, {hash:?})");
    }

    fn write_chunk(&mut self, header: &ChunkHeader, hash: [u8; 32]) -> Result<FileOutcome, ()> {
        let id = header.file;
        let f = self.open_file(id).ok_or(())?;
        if !f.checked.contains(&header.index) || f.verified.contains_key(&header.index) {
            return Err(());
        }
        if hash != header.hash {
            let error =
                ProtoError::ChunkHashMismatch { path: f.path.to_string(), index: header.index };
            let local = f.local.clone();
            self.fail(id);
            return Ok(FileOutcome::Failed { id, local, error });
        }
        let (_, plain_len) = f.plan.span(header.index).ok_or(())?;
        f.verified.insert(header.index, hash);
        self.totals.bytes += u64::from(plain_len);
        Ok(self.settle(id))
    }

    /// `on_summary`, with the model's verdict. The summary says every chunk was sent,
    /// as a sender's does without resume.
    fn summary(&mut self, rx: &mut Receiver, id: u32, root: [u8; 32]) {
        let sent = self.files.get(&id).map_or(0, |f| u32::try_from(f.plan.count()).unwrap_or(0));
        let result = rx.on_summary(id, root, sent);
        let expected = match self.files.get_mut(&id) {
            Some(f) if f.state == State::Failed => Ok(FileOutcome::Pending),
            Some(f) if f.state == State::Open && f.summary.is_none() => {
                f.summary = Some(root);
                Ok(self.settle(id))
            }
            _ => Err(()),
        };
        assert_eq!(result.map_err(|_| ()), expected, "on_summary({id}, {root:?})");
    }

    /// What an open file comes to once its chunks or summary changed.
    fn settle(&mut self, id: u32) -> FileOutcome {
        let Some(f) = self.open_file(id) else { return FileOutcome::Pending };
        if !f.opened {
            return FileOutcome::Pending;
        }
        let Some(summary) = f.summary else { return FileOutcome::Pending };
        if (f.verified.len() as u64) < f.plan.count() {
            return FileOutcome::Pending;
        }
        // A file is ready only with every one of its chunks verified.
        assert!(f.verified.keys().copied().eq(0..f.verified.len() as u32));
        assert_eq!(f.verified.len() as u64, f.plan.count());
        if root_hash(f.size, f.verified.values()) != summary {
            let error = ProtoError::FileHashMismatch { path: f.path.to_string() };
            let local = f.local.clone();
            self.fail(id);
            return FileOutcome::Failed { id, local, error };
        }
        f.state = State::Ready;
        let ready =
            Ready { id, local: f.local.clone(), meta: f.meta, size: f.size, in_place: false };
        self.totals.files += 1;
        FileOutcome::Ready(ready)
    }

    fn fail(&mut self, id: u32) {
        if let Some(f) = self.open_file(id) {
            f.state = State::Failed;
            self.totals.failures += 1;
        }
    }

    fn check_invariants(&self, rx: &Receiver) {
        let totals = rx.totals();
        assert_eq!(totals, self.totals, "totals");
        // Totals never exceed what was announced.
        assert!(u64::from(totals.files) + u64::from(totals.failures) <= u64::from(self.next_id));
        assert!(u128::from(totals.bytes) <= self.announced_bytes, "more bytes than announced");
        let open: BTreeSet<u32> =
            self.files.iter().filter(|(_, f)| f.state == State::Open).map(|(id, _)| *id).collect();
        let rx_open: BTreeSet<u32> = rx.open_files().map(|(id, _)| id).collect();
        assert_eq!(rx_open, open, "open files");
        // Finished only after the end of the manifest, and once nothing is open.
        assert_eq!(rx.is_finished(), self.ended && open.is_empty(), "is_finished");
        assert_eq!(rx.directories().len(), self.dir_entries, "directories");
    }
}

/// A file size argument (see [`SIZES`]) for files cut into `chunk_size` chunks.
pub(super) fn file_size(input: &mut Input<'_>, chunk_size: u32) -> u64 {
    let cs = u64::from(chunk_size);
    match input.byte() % SIZES {
        0 => 0,
        1 => 1,
        2 => cs - 1,
        3 => cs,
        4 => cs + 1,
        5 => 2 * cs,
        6 => 3 * cs - 7,
        7 => u64::from(u32::MAX) * cs,
        8 => u64::MAX,
        _ => input.u64(),
    }
}

/// A path argument: a depth byte (`% 4`; 254 and 255: `MAX_DEPTH` and one more levels of
/// `a`), then a component argument per level (see [`PARTS`]).
pub(super) fn wire_path(input: &mut Input<'_>) -> WirePath {
    let depth = match input.byte() {
        255 => MAX_DEPTH + 1,
        254 => MAX_DEPTH,
        b => usize::from(b % 4),
    };
    if depth > 4 {
        return WirePath(vec![Name::from("a"); depth]);
    }
    let parts = (0..depth).map(|_| match input.byte() % 16 {
        PART_LONGEST => Name::from("z".repeat(MAX_COMPONENT)),
        PART_TOO_LONG => Name::from("z".repeat(MAX_COMPONENT + 1)),
        // Bytes as they come, UTF-8 or not: names are bytes.
        PART_RAW => {
            let len = usize::from(input.byte() % 8);
            Name::from_bytes(input.take(len))
        }
        b => Name::from(PARTS[usize::from(b)]),
    });
    WirePath(parts.collect())
}

fn wire_len_fits(header: &ChunkHeader, plain_len: u32) -> bool {
    if header.compressed {
        header.wire_len <= max_wire_len(plain_len, true)
    } else {
        header.wire_len == plain_len
    }
}
