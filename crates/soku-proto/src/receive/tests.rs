use std::path::Path;

use super::*;
use crate::chunk::{chunk_hash, MIN_CHUNK_SIZE};
use crate::message::{Held, HeldBase, HeldChunk, Message};

const CS: u32 = MIN_CHUNK_SIZE;

fn wp(parts: &[&str]) -> WirePath {
    WirePath(parts.iter().map(|s| crate::name::Name::from(*s)).collect())
}

fn file(id: u32, parts: &[&str], size: u64) -> Entry {
    Entry::File { id, path: wp(parts), size, meta: Meta::default() }
}

fn dir(parts: &[&str]) -> Entry {
    Entry::Dir { path: wp(parts), meta: Meta::default() }
}

fn into_dir(recursive: bool) -> Receiver {
    let target = Target::IntoDir("/t".into());
    Receiver::new(target, None, recursive, CS).expect("valid chunk size")
}

/// Announces a file and opens its storage, as the caller does.
fn announce(rx: &mut Receiver, entry: Entry) -> Result<EntryAction, ProtoError> {
    let action = rx.on_entry(entry)?;
    if let EntryAction::CreateFile { id, .. } = action {
        rx.on_file_opened(id);
    }
    Ok(action)
}

/// Drives one whole file through the receiver, as the caller would.
fn deliver(rx: &mut Receiver, id: u32, data: &[u8]) -> FileOutcome {
    let plan = ChunkPlan::new(data.len() as u64, CS);
    let mut hashes = Vec::new();
    let mut last = FileOutcome::Pending;
    for index in 0..plan.count() as u32 {
        let (offset, len) = plan.span(index).expect("in range");
        let plain = &data[offset as usize..offset as usize + len as usize];
        let hash = chunk_hash(plain);
        hashes.push(hash);
        let header = ChunkHeader { file: id, index, wire_len: len, compressed: false, hash };
        assert_eq!(rx.check_chunk(&header), Ok(ChunkCheck::Accept { offset, plain_len: len }));
        last = rx.on_chunk_written(&header, chunk_hash(plain)).expect("accepted");
        assert_eq!(last, FileOutcome::Pending, "not ready before the summary");
    }
    let _ = last;
    rx.on_summary(id, root_hash(data.len() as u64, &hashes), plan.count() as u32)
        .expect("summary accepted")
}

#[test]
fn a_file_becomes_ready_only_after_all_chunks_and_the_summary() {
    let mut rx = into_dir(false);
    let data = vec![7u8; CS as usize * 2 + 5];
    let action = announce(&mut rx, file(0, &["f"], data.len() as u64)).expect("accepted");
    assert_eq!(
        action,
        EntryAction::CreateFile {
            id: 0,
            local: "/t/f".into(),
            size: data.len() as u64,
            meta: Meta::default(),
            chunks: 3
        }
    );
    let FileOutcome::Ready(ready) = deliver(&mut rx, 0, &data) else { panic!("not ready") };
    assert_eq!(ready.local, Path::new("/t/f"));
    rx.on_end(1, data.len() as u64).expect("end accepted");
    assert!(rx.is_finished());
    assert_eq!(
        rx.totals(),
        Totals {
            files: 1,
            bytes: data.len() as u64,
            failures: 0,
            resumed: 0,
            skipped: 0,
            resumed_files: 0
        }
    );
}

#[test]
fn an_empty_file_is_ready_on_its_summary() {
    let mut rx = into_dir(false);
    announce(&mut rx, file(0, &["empty"], 0)).expect("accepted");
    assert!(matches!(rx.on_summary(0, root_hash(0, []), 0), Ok(FileOutcome::Ready(_))));
}

#[test]
fn a_wrong_root_hash_fails_the_file() {
    let mut rx = into_dir(false);
    announce(&mut rx, file(0, &["f"], 10)).expect("accepted");
    let header = ChunkHeader {
        file: 0,
        index: 0,
        wire_len: 10,
        compressed: false,
        hash: chunk_hash(&[1; 10]),
    };
    rx.check_chunk(&header).expect("accepted");
    rx.on_chunk_written(&header, chunk_hash(&[1; 10])).expect("ok");
    let outcome = rx.on_summary(0, [0; 32], 1).expect("no violation");
    assert!(matches!(
        outcome,
        FileOutcome::Failed { error: ProtoError::FileHashMismatch { .. }, .. }
    ));
    assert_eq!(rx.totals().failures, 1);
}

#[test]
fn a_chunk_whose_bytes_do_not_match_its_hash_fails_the_file() {
    let mut rx = into_dir(false);
    announce(&mut rx, file(0, &["f"], 10)).expect("accepted");
    let header = ChunkHeader { file: 0, index: 0, wire_len: 10, compressed: false, hash: [9; 32] };
    rx.check_chunk(&header).expect("accepted");
    let outcome = rx.on_chunk_written(&header, chunk_hash(&[1; 10])).expect("no violation");
    assert!(matches!(
        outcome,
        FileOutcome::Failed { error: ProtoError::ChunkHashMismatch { .. }, .. }
    ));
    // Later chunks of the failed file are read and dropped, not errors.
    assert_eq!(rx.check_chunk(&header), Ok(ChunkCheck::Discard));
}

#[test]
fn chunks_that_do_not_fit_the_manifest_are_violations() {
    let mut rx = into_dir(false);
    announce(&mut rx, file(0, &["f"], 100)).expect("accepted");
    let ok = ChunkHeader { file: 0, index: 0, wire_len: 100, compressed: false, hash: [0; 32] };
    let past_end = ChunkHeader { index: 1, ..ok };
    let too_long = ChunkHeader { wire_len: 101, ..ok };
    let bomb = ChunkHeader { wire_len: u32::MAX, compressed: true, ..ok };
    for bad in [past_end, too_long, bomb] {
        assert!(matches!(rx.check_chunk(&bad), Err(ProtoError::Violation(_))), "{bad:?}");
    }
    rx.check_chunk(&ok).expect("first time");
    assert!(matches!(rx.check_chunk(&ok), Err(ProtoError::Violation(_))), "duplicate");
}

#[test]
fn a_chunk_may_arrive_before_its_entry() {
    let mut rx = into_dir(false);
    let early = ChunkHeader { file: 0, index: 0, wire_len: 1, compressed: false, hash: [0; 32] };
    assert_eq!(rx.check_chunk(&early), Ok(ChunkCheck::NotYetAnnounced));
    assert!(rx.awaits_file(0));
    rx.on_end(0, 0).expect("end");
    assert!(!rx.awaits_file(0), "after the end nothing more is announced");
    assert!(rx.check_chunk(&early).is_err(), "after the end nothing more is announced");
}

#[test]
fn huge_announced_sizes_cost_no_memory_up_front() {
    let mut rx = into_dir(false);
    announce(&mut rx, file(0, &["big"], u64::from(u32::MAX) * u64::from(CS))).expect("accepted");
    assert!(announce(&mut rx, file(1, &["bigger"], u64::MAX)).is_err());
}

#[test]
fn nested_entries_need_r_and_an_announced_parent() {
    let mut flat = into_dir(false);
    assert!(flat.on_entry(dir(&["d"])).is_err());
    let mut rx = into_dir(true);
    assert!(announce(&mut rx, file(0, &["d", "f"], 1)).is_err(), "parent not announced");
    let mut rx = into_dir(true);
    assert_eq!(rx.on_entry(dir(&["d"])), Ok(EntryAction::MakeDir { local: "/t/d".into() }));
    assert!(announce(&mut rx, file(0, &["d", "f"], 1)).is_ok());
}

#[test]
fn file_ids_must_count_up() {
    let mut rx = into_dir(false);
    assert!(announce(&mut rx, file(1, &["f"], 1)).is_err());
}

#[test]
fn a_single_name_target_takes_one_top_level_name() {
    let target = Target::AsName("/t/new".into());
    let mut rx = Receiver::new(target, None, true, CS).expect("ok");
    rx.on_entry(dir(&["src"])).expect("first top-level");
    assert!(announce(&mut rx, file(0, &["other"], 1)).is_err());
}

#[test]
fn a_resumed_directory_takes_its_own_source_as_it_was_made_and_others_inside() {
    let resumed = || Target::Resumed { dir: "/t/rr".into(), name: "src".into() };
    let mut rx = Receiver::new(resumed(), None, true, CS).expect("ok");
    assert_eq!(rx.made_target(), None, "nothing came yet");
    assert_eq!(rx.on_entry(dir(&["src"])), Ok(EntryAction::MakeDir { local: "/t/rr".into() }));
    assert_eq!(rx.made_target(), Some(("/t/rr".into(), &"src".into())));
    let action = announce(&mut rx, file(0, &["src", "f"], 1)).expect("below the source");
    assert!(
        matches!(action, EntryAction::CreateFile { local, .. } if local == Path::new("/t/rr/f"))
    );
    assert!(rx.on_entry(dir(&["other"])).is_err(), "a second top-level name");

    let mut rx = Receiver::new(resumed(), None, true, CS).expect("ok");
    assert_eq!(
        rx.on_entry(dir(&["other"])),
        Ok(EntryAction::MakeDir { local: "/t/rr/other".into() })
    );
    assert_eq!(rx.made_target(), None, "another source goes inside, as into any directory");
    assert!(rx.on_entry(dir(&["third"])).is_ok());
    assert!(rx.on_entry(dir(&["src"])).is_err(), "the made-for name after another");

    let mut rx = Receiver::new(Target::AsName("/t/new".into()), None, true, CS).expect("ok");
    rx.on_entry(dir(&["src"])).expect("the single source");
    assert_eq!(rx.made_target(), Some(("/t/new".into(), &"src".into())));
    let mut rx = into_dir(true);
    rx.on_entry(dir(&["src"])).expect("into the target");
    assert_eq!(rx.made_target(), None, "an existing directory is not made");
}

#[test]
fn names_outside_the_request_are_refused() {
    let names = NameFilter::for_requested([&b"report.pdf"[..]]);
    let mut rx = Receiver::new(Target::IntoDir("/t".into()), Some(names), false, CS).expect("ok");
    assert!(matches!(
        announce(&mut rx, file(0, &[".ssh"], 1)),
        Err(ProtoError::UnexpectedName { .. })
    ));
    assert!(announce(&mut rx, file(0, &["report.pdf"], 1)).is_ok());
}

#[test]
fn end_of_manifest_must_match_what_was_announced() {
    let mut rx = into_dir(false);
    announce(&mut rx, file(0, &["f"], 1)).expect("ok");
    assert!(rx.on_end(2, 1).is_err());
}

#[test]
fn chunks_wait_until_the_file_is_opened() {
    let mut rx = into_dir(false);
    rx.on_entry(file(0, &["f"], 10)).expect("accepted");
    let header = ChunkHeader { file: 0, index: 0, wire_len: 10, compressed: false, hash: [0; 32] };
    assert_eq!(rx.check_chunk(&header), Ok(ChunkCheck::NotYetAnnounced));
    assert!(rx.awaits_file(0) && rx.awaits_file(0), "asking changes nothing");
    rx.on_file_opened(0);
    assert!(!rx.awaits_file(0));
    assert!(matches!(rx.check_chunk(&header), Ok(ChunkCheck::Accept { .. })));
}

/// What a resumed copy will ask: which chunks of a file are verified here. A chunk
/// whose bytes were checked but failed, or only announced, does not count.
#[test]
fn the_receiver_says_which_chunks_it_holds() {
    let mut rx = into_dir(false);
    let data: Vec<u8> = (0..CS as usize * 3).map(|i| (i % 251) as u8).collect();
    announce(&mut rx, file(0, &["f"], data.len() as u64)).expect("accepted");
    assert_eq!(rx.verified_chunks(0), Vec::<u32>::new());
    for index in [2u32, 0] {
        let (offset, len) = ChunkPlan::new(data.len() as u64, CS).span(index).expect("in range");
        let plain = &data[offset as usize..offset as usize + len as usize];
        let header = ChunkHeader {
            file: 0,
            index,
            wire_len: len,
            compressed: false,
            hash: chunk_hash(plain),
        };
        rx.check_chunk(&header).expect("accepted");
        rx.on_chunk_written(&header, chunk_hash(plain)).expect("written");
    }
    // Chunk 1 is checked (its bytes are being read) but not yet verified.
    let (_, len) = ChunkPlan::new(data.len() as u64, CS).span(1).expect("in range");
    let pending =
        ChunkHeader { file: 0, index: 1, wire_len: len, compressed: false, hash: [0; 32] };
    rx.check_chunk(&pending).expect("accepted");
    assert_eq!(rx.verified_chunks(0), [0, 2]);
    assert_eq!(rx.verified_chunks(7), Vec::<u32>::new(), "no such file");
}

/// A resuming receiver with one file of `chunks` full chunks announced and opened.
fn resuming_with_file(chunks: u32) -> (Receiver, Vec<u8>) {
    let mut rx = into_dir(false).with_resume(true);
    let data: Vec<u8> = (0..chunks as usize * CS as usize).map(|i| (i % 251) as u8).collect();
    announce(&mut rx, file(0, &["f"], data.len() as u64)).expect("accepted");
    (rx, data)
}

fn header_of(data: &[u8], index: u32) -> (ChunkHeader, [u8; 32]) {
    let at = index as usize * CS as usize;
    let hash = chunk_hash(&data[at..at + CS as usize]);
    (ChunkHeader { file: 0, index, wire_len: CS, compressed: false, hash }, hash)
}

fn root_of(data: &[u8]) -> [u8; 32] {
    let hashes: Vec<[u8; 32]> = data.chunks(CS as usize).map(chunk_hash).collect();
    root_hash(data.len() as u64, &hashes)
}

#[test]
fn held_chunks_count_and_only_the_rest_is_received() {
    let (mut rx, data) = resuming_with_file(3);
    let (h0, hash0) = header_of(&data, 0);
    assert!(matches!(rx.check_chunk(&h0), Err(ProtoError::Violation(_))), "before the report");
    let held = vec![HeldChunk { index: 1, hash: header_of(&data, 1).1 }];
    let report = rx.on_held(0, HeldBase::Partial, 0, 3, held).expect("in turn");
    assert!(matches!(report, Some(Message::Held(Held { from: 0, to: 3, .. }))));
    assert_eq!(rx.totals().resumed, u64::from(CS));
    assert_eq!(rx.verified_chunks(0), [1]);
    for (header, hash) in [(h0, hash0), header_of(&data, 2)] {
        rx.check_chunk(&header).expect("accepted");
        assert_eq!(rx.on_chunk_written(&header, hash), Ok(FileOutcome::Pending));
    }
    let FileOutcome::Ready(ready) = rx.on_summary(0, root_of(&data), 2).expect("summary") else {
        panic!("held and received chunks make the file")
    };
    assert!(!ready.in_place);
    assert_eq!(rx.totals().bytes, data.len() as u64);
    assert_eq!(rx.totals().resumed, u64::from(CS));
}

#[test]
fn a_held_chunk_sent_again_replaces_it_once() {
    let (mut rx, data) = resuming_with_file(2);
    let stale = HeldChunk { index: 0, hash: [0xEE; 32] };
    rx.on_held(0, HeldBase::Partial, 0, 2, vec![stale]).expect("in turn");
    let (h0, hash0) = header_of(&data, 0);
    rx.check_chunk(&h0).expect("a held chunk may be sent once");
    assert_eq!(rx.totals().resumed, 0, "no longer counted as resumed");
    assert!(matches!(rx.check_chunk(&h0), Err(ProtoError::Violation(_))), "but not twice");
    rx.on_chunk_written(&h0, hash0).expect("written");
    let (h1, hash1) = header_of(&data, 1);
    rx.check_chunk(&h1).expect("accepted");
    rx.on_chunk_written(&h1, hash1).expect("written");
    assert!(matches!(rx.on_summary(0, root_of(&data), 2), Ok(FileOutcome::Ready(_))));
}

#[test]
fn a_held_chunk_that_differs_and_is_not_sent_fails_the_root() {
    let (mut rx, data) = resuming_with_file(2);
    let stale = HeldChunk { index: 0, hash: [0xEE; 32] };
    rx.on_held(0, HeldBase::Partial, 0, 2, vec![stale]).expect("in turn");
    let (h1, hash1) = header_of(&data, 1);
    rx.check_chunk(&h1).expect("accepted");
    rx.on_chunk_written(&h1, hash1).expect("written");
    let outcome = rx.on_summary(0, root_of(&data), 1).expect("summary");
    assert!(matches!(
        outcome,
        FileOutcome::Failed { error: ProtoError::FileHashMismatch { .. }, .. }
    ));
}

#[test]
fn a_complete_file_with_nothing_sent_stays_in_place() {
    let (mut rx, data) = resuming_with_file(2);
    let held = (0..2).map(|i| HeldChunk { index: i, hash: header_of(&data, i).1 }).collect();
    rx.on_held(0, HeldBase::Complete, 0, 2, held).expect("in turn");
    let FileOutcome::Ready(ready) = rx.on_summary(0, root_of(&data), 0).expect("summary") else {
        panic!("everything was held")
    };
    assert!(ready.in_place);
    assert_eq!(rx.totals().resumed, data.len() as u64);
}

#[test]
fn held_reports_out_of_turn_are_internal_errors() {
    let (mut rx, _) = resuming_with_file(3);
    assert!(matches!(rx.on_held(0, HeldBase::Nothing, 1, 3, vec![]), Err(ProtoError::Internal(_))));
    let outside = vec![HeldChunk { index: 2, hash: [0; 32] }];
    assert!(matches!(
        rx.on_held(0, HeldBase::Partial, 0, 2, outside),
        Err(ProtoError::Internal(_))
    ));
    assert_eq!(rx.on_held(7, HeldBase::Nothing, 0, 1, vec![]), Ok(None), "not open");
    let mut plain = into_dir(false);
    announce(&mut plain, file(0, &["f"], 1)).expect("accepted");
    assert!(matches!(
        plain.on_held(0, HeldBase::Nothing, 0, 1, vec![]),
        Err(ProtoError::Internal(_))
    ));
}

/// The race CI found: a held chunk the sender replaces is still on its way (queued
/// behind the summary on a byte stream, or overtaken by it on QUIC) when the summary
/// arrives. The summary's count of chunks sent keeps the file pending until it is in,
/// instead of settling on the held bytes and failing the root hash.
#[test]
fn a_summary_that_overtakes_a_replacing_chunk_waits_for_it() {
    let (mut rx, data) = resuming_with_file(3);
    let stale = HeldChunk { index: 0, hash: [0xEE; 32] };
    let held = |i: u32| HeldChunk { index: i, hash: header_of(&data, i).1 };
    rx.on_held(0, HeldBase::Complete, 0, 3, vec![stale, held(1), held(2)]).expect("in turn");
    assert_eq!(rx.on_summary(0, root_of(&data), 1), Ok(FileOutcome::Pending), "chunk 0 is due");
    let (h0, hash0) = header_of(&data, 0);
    rx.check_chunk(&h0).expect("the replacing chunk");
    let FileOutcome::Ready(ready) = rx.on_chunk_written(&h0, hash0).expect("written") else {
        panic!("ready once the chunk the summary counted is in")
    };
    assert!(!ready.in_place, "a chunk replaced: the file is written, not left in place");
    // More chunks than the summary counted: a sender that lies.
    let (mut rx, data) = resuming_with_file(2);
    rx.on_held(0, HeldBase::Nothing, 0, 2, vec![]).expect("in turn");
    rx.on_summary(0, root_of(&data), 1).expect("pending");
    let (h0, hash0) = header_of(&data, 0);
    rx.check_chunk(&h0).expect("the one counted");
    rx.on_chunk_written(&h0, hash0).expect("written");
    let (h1, _) = header_of(&data, 1);
    assert!(matches!(rx.check_chunk(&h1), Err(ProtoError::Violation(_))));
}

#[test]
fn an_empty_file_settles_only_once_its_storage_exists() {
    let mut rx = into_dir(false);
    rx.on_entry(file(0, &["empty"], 0)).expect("accepted");
    assert!(rx.is_announced(0));
    assert!(!rx.is_announced(1));
    // The summary may come before the storage is made (files prepared concurrently).
    let root = crate::chunk::root_hash(0, []);
    assert_eq!(rx.on_summary(0, root, 0), Ok(FileOutcome::Pending));
    assert!(matches!(rx.on_file_opened(0), Some(FileOutcome::Ready(_))));
    // Settled: a second report is nothing to act on.
    assert_eq!(rx.on_file_opened(0), None);
}

#[test]
fn a_file_failed_before_its_storage_exists_says_so_when_opened() {
    let mut rx = into_dir(false);
    rx.on_entry(file(0, &["f"], 10)).expect("accepted");
    assert!(rx.on_file_failed(0).is_some());
    assert_eq!(rx.on_file_opened(0), None);
}

#[test]
fn a_receiver_that_said_it_holds_nothing_takes_chunks_without_reports() {
    let mut rx = into_dir(false).with_resume(true).with_nothing_held(true);
    assert!(rx.resumes() && !rx.reports_held());
    let data: Vec<u8> = (0..2 * CS as usize).map(|i| (i % 241) as u8).collect();
    announce(&mut rx, file(0, &["f"], data.len() as u64)).expect("accepted");
    let refused = rx.on_held(0, HeldBase::Nothing, 0, 2, Vec::new());
    assert!(matches!(refused, Err(ProtoError::Internal(_))), "it promised no reports");
    for index in 0..2 {
        let (header, hash) = header_of(&data, index);
        rx.check_chunk(&header).expect("no report comes first");
        assert_eq!(rx.on_chunk_written(&header, hash), Ok(FileOutcome::Pending));
    }
    let outcome = rx.on_summary(0, root_of(&data), 2).expect("summary");
    assert!(matches!(outcome, FileOutcome::Ready(_)), "{outcome:?}");
    assert_eq!(rx.totals().resumed, 0);
}
