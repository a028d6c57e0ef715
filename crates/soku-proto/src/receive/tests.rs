use std::path::Path;

use super::*;
use crate::chunk::{chunk_hash, MIN_CHUNK_SIZE};

const CS: u32 = MIN_CHUNK_SIZE;

fn wp(parts: &[&str]) -> WirePath {
    WirePath(parts.iter().map(|s| s.to_string()).collect())
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
    rx.on_summary(id, root_hash(data.len() as u64, &hashes)).expect("summary accepted")
}

#[test]
fn a_file_becomes_ready_only_after_all_chunks_and_the_summary() {
    let mut rx = into_dir(false);
    let data = vec![7u8; CS as usize * 2 + 5];
    let action = announce(&mut rx, file(0, &["f"], data.len() as u64)).expect("accepted");
    assert_eq!(
        action,
        EntryAction::CreateFile { id: 0, local: "/t/f".into(), size: data.len() as u64 }
    );
    let FileOutcome::Ready(ready) = deliver(&mut rx, 0, &data) else { panic!("not ready") };
    assert_eq!(ready.local, Path::new("/t/f"));
    rx.on_end(1, data.len() as u64).expect("end accepted");
    assert!(rx.is_finished());
    assert_eq!(rx.totals(), Totals { files: 1, bytes: data.len() as u64, failures: 0 });
}

#[test]
fn an_empty_file_is_ready_on_its_summary() {
    let mut rx = into_dir(false);
    announce(&mut rx, file(0, &["empty"], 0)).expect("accepted");
    assert!(matches!(rx.on_summary(0, root_hash(0, [])), Ok(FileOutcome::Ready(_))));
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
    let outcome = rx.on_summary(0, [0; 32]).expect("no violation");
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
    rx.on_end(0, 0).expect("end");
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
fn names_outside_the_request_are_refused() {
    let names = NameFilter::for_requested(["report.pdf"]);
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
    rx.on_file_opened(0);
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
