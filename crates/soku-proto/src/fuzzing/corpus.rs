//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) and the seed inputs
//! through the fuzz harnesses of `crate::fuzzing`, on stable Rust: every input the
//! fuzzer kept, or that once crashed a harness, stays a regression test.
//!
//! A missing or empty corpus directory fails the test, so it cannot pass by running
//! nothing.

use std::path::{Path, PathBuf};

use super::{seeds, TARGETS};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target)
}

/// Runs `harness` on every file of `dir`; returns how many there were.
fn replay(dir: &Path, harness: fn(&[u8])) -> usize {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("corpus directory {} is missing: {e}", dir.display()));
    let mut files: Vec<PathBuf> =
        entries.map(|entry| entry.expect("readable directory").path()).collect();
    files.sort();
    for file in &files {
        let data = std::fs::read(file)
            .unwrap_or_else(|e| panic!("cannot read corpus file {}: {e}", file.display()));
        let outcome = std::panic::catch_unwind(|| harness(&data));
        assert!(outcome.is_ok(), "harness panicked on {}", file.display());
    }
    files.len()
}

#[test]
fn every_corpus_replays_without_a_panic() {
    for (target, harness) in TARGETS {
        let count = replay(&corpus_dir(target), *harness);
        assert!(count > 0, "corpus of {target} is empty: {}", corpus_dir(target).display());
        println!("{target}: {count} corpus files replayed");
    }
}

#[test]
fn every_seed_runs_without_a_panic() {
    for (target, harness) in TARGETS {
        let inputs = seeds(target);
        assert!(!inputs.is_empty(), "no seeds for {target}");
        for input in &inputs {
            harness(input);
        }
    }
}

#[test]
fn the_harnesses_accept_empty_and_tiny_inputs() {
    for (_, harness) in TARGETS {
        for input in [&[][..], &[0], &[0xff; 3], &[1, 0, 0, 0, 0]] {
            harness(input);
        }
    }
}

/// Inputs that crashed the `receiver` harness (minimised with `cargo fuzz tmin`; the
/// byte format is described in `src/fuzzing/receiver.rs`), each with the fix it
/// documents. The tests below show each bug through the receiver's API.
const RECEIVER_CRASHES: &[(&str, &[u8])] = &[
    // A refused end of manifest was recorded: the receiver said it was finished.
    ("refused end", &[0x00, 0x07, 0x05]),
    // A refused (too large) file used up its id.
    ("refused file", &[0x00, 0x01, 0xfe, 0x01, 0x00, 0x62, 0x00, 0x62]),
    // A chunk written twice was counted twice.
    (
        "chunk written twice",
        &[
            0x00, 0x01, 0xfe, 0x01, 0x00, 0x04, 0xa4, 0x02, 0x00, 0x08, 0x00, 0x00, 0x07, 0xfe,
            0x00, 0x31, 0x00,
        ],
    ),
    // A chunk header sent again forgot the verified chunk's hash.
    (
        "duplicate header",
        &[
            0x00, 0x01, 0xfe, 0x01, 0x00, 0x04, 0xa4, 0x02, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00,
            0x01, 0x08, 0x00, 0x01, 0x00, 0x00, 0x02, 0x3c, 0xff, 0xff, 0x30, 0x00, 0x00, 0x00,
            0x11, 0x05,
        ],
    ),
    // A second summary replaced the first root.
    (
        "second summary",
        &[
            0x00, 0x01, 0xfe, 0x01, 0xa4, 0x20, 0x04, 0x20, 0x00, 0x00, 0x20, 0x20, 0x20, 0x02,
            0x00, 0x08, 0x00, 0x00,
        ],
    ),
];

#[test]
fn receiver_crash_inputs_stay_fixed() {
    for (name, input) in RECEIVER_CRASHES {
        let outcome = std::panic::catch_unwind(|| super::receiver(input));
        assert!(outcome.is_ok(), "receiver harness crashed again on {name}");
    }
}

mod receiver_findings {
    use crate::chunk::{chunk_hash, root_hash, ChunkHeader, MIN_CHUNK_SIZE};
    use crate::manifest::{Entry, Meta};
    use crate::path::{Target, WirePath};
    use crate::receive::{ChunkCheck, FileOutcome, Receiver};

    const CS: u32 = MIN_CHUNK_SIZE;

    fn receiver(target: Target) -> Receiver {
        Receiver::new(target, None, false, CS).expect("valid chunk size")
    }

    fn file(id: u32, name: &str, size: u64) -> Entry {
        Entry::File { id, path: WirePath(vec![name.into()]), size, meta: Meta::default() }
    }

    fn header(index: u32, len: u32, hash: [u8; 32]) -> ChunkHeader {
        ChunkHeader { file: 0, index, wire_len: len, compressed: false, hash }
    }

    /// Announces and opens file 0, `size` bytes.
    fn open(size: u64) -> Receiver {
        let mut rx = receiver(Target::IntoDir("/t".into()));
        rx.on_entry(file(0, "f", size)).expect("accepted");
        rx.on_file_opened(0);
        rx
    }

    #[test]
    fn a_refused_end_of_manifest_does_not_finish_the_receiver() {
        let mut rx = receiver(Target::IntoDir("/t".into()));
        assert!(rx.on_end(5, 0).is_err(), "no file was announced");
        assert!(!rx.is_finished());
        rx.on_end(0, 0).expect("the right end");
        assert!(rx.is_finished());
    }

    #[test]
    fn a_refused_entry_takes_no_file_id_and_no_top_level_name() {
        let mut rx = receiver(Target::IntoDir("/t".into()));
        assert!(rx.on_entry(file(0, "huge", u64::MAX)).is_err(), "too many chunks");
        rx.on_entry(file(0, "f", 1)).expect("id 0 is still the next");
        let mut rx = receiver(Target::AsName("/t/new".into()));
        let dir = Entry::Dir { path: WirePath(vec!["d".into()]), meta: Meta::default() };
        assert!(rx.on_entry(dir).is_err(), "a directory without -r");
        rx.on_entry(file(0, "f", 1)).expect("the refused name was not taken");
    }

    /// Before the fix, writing chunk 0 of two twice made the file's verified bytes reach
    /// its size, and a root over chunk 0 alone made it ready with chunk 1 never received.
    #[test]
    fn a_chunk_written_twice_is_refused() {
        let mut rx = open(2 * u64::from(CS));
        let hash = chunk_hash(&[1; CS as usize]);
        let first = header(0, CS, hash);
        assert!(matches!(rx.check_chunk(&first), Ok(ChunkCheck::Accept { .. })));
        assert_eq!(rx.on_chunk_written(&first, hash), Ok(FileOutcome::Pending));
        assert!(rx.on_chunk_written(&first, hash).is_err(), "written twice");
        assert_eq!(rx.totals().bytes, u64::from(CS));
        let forged = root_hash(2 * u64::from(CS), [&hash]);
        assert_eq!(rx.on_summary(0, forged, 2), Ok(FileOutcome::Pending), "chunk 1 is missing");
    }

    /// Before the fix, a header sent again for a verified chunk was refused only after it
    /// had reset the chunk to unverified: the file never became ready.
    #[test]
    fn a_duplicate_chunk_header_keeps_the_verified_chunk() {
        let size = u64::from(CS) + 1;
        let mut rx = open(size);
        let (a, b) = (chunk_hash(&[1; CS as usize]), chunk_hash(&[2]));
        for (index, len, hash) in [(0, CS, a), (1, 1, b)] {
            let h = header(index, len, hash);
            assert!(matches!(rx.check_chunk(&h), Ok(ChunkCheck::Accept { .. })));
            assert_eq!(rx.on_chunk_written(&h, hash), Ok(FileOutcome::Pending));
        }
        assert!(rx.check_chunk(&header(0, CS, a)).is_err(), "sent twice");
        assert!(matches!(
            rx.on_summary(0, root_hash(size, [&a, &b]), 2),
            Ok(FileOutcome::Ready(_))
        ));
    }

    /// Before the fix, a second summary was refused only after it had replaced the first.
    #[test]
    fn a_second_summary_keeps_the_first_root() {
        let mut rx = open(10);
        let hash = chunk_hash(&[3; 10]);
        assert_eq!(rx.on_summary(0, root_hash(10, [&hash]), 1), Ok(FileOutcome::Pending));
        assert!(rx.on_summary(0, [0; 32], 1).is_err(), "second summary");
        let h = header(0, 10, hash);
        assert!(matches!(rx.check_chunk(&h), Ok(ChunkCheck::Accept { .. })));
        assert!(matches!(rx.on_chunk_written(&h, hash), Ok(FileOutcome::Ready(_))));
    }
}

/// Found reading the scanner for the `hello` harness: it searched everything seen on
/// every read, so login noise trickled a byte per read cost time quadratic in its length
/// (up to the 1 MiB limit). This feeds the whole limit a byte at a time.
#[test]
fn noise_fed_a_byte_at_a_time_is_scanned_once() {
    use crate::hello::{HelloScanner, Scan, MAX_NOISE};
    let mut scanner = HelloScanner::default();
    for _ in 0..MAX_NOISE - crate::MAGIC.len() {
        assert_eq!(scanner.feed(b"x"), Ok(Scan::NeedMore));
    }
    let mut last = Scan::NeedMore;
    for byte in crate::MAGIC {
        last = scanner.feed(&[*byte]).expect("within the limit");
    }
    let Scan::Found { noise, rest } = last else { panic!("magic not found") };
    assert_eq!((noise.len(), rest.len()), (MAX_NOISE - crate::MAGIC.len(), 0));
}

/// Writes the seed inputs of every target into the corpus (`fuzz/corpus/<target>/`, or
/// the directory `FUZZ_SEEDS_OUT` names), for a first fuzzing run:
/// `cargo test -p soku-proto --lib write_the_seed_corpus -- --ignored`.
#[test]
#[ignore = "writes into fuzz/corpus; run by hand before a first fuzzing run"]
fn write_the_seed_corpus() {
    let out = std::env::var_os("FUZZ_SEEDS_OUT").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus"),
        PathBuf::from,
    );
    for (target, _) in TARGETS {
        let dir = out.join(target);
        std::fs::create_dir_all(&dir).expect("corpus directory");
        for (n, seed) in seeds(target).iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{n:02}")), seed).expect("seed file");
        }
    }
}
