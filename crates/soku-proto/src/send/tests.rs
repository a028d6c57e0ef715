use super::*;
use crate::chunk::{chunk_hash, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE};

mod plain_loop;
mod resume;

const CS: u32 = MIN_CHUNK_SIZE;

fn wp(parts: &[&str]) -> WirePath {
    WirePath(parts.iter().map(|s| crate::name::Name::from(*s)).collect())
}

fn planned() -> Sender {
    let mut tx = Sender::new(CS, false).expect("valid chunk size");
    tx.plan(3, 100).expect("first plan");
    tx
}

fn announce(tx: &mut Sender, name: &str, size: u64) -> FileStart {
    tx.file(wp(&[name]), size, Meta::default()).expect("announced")
}

fn is_violation<T: std::fmt::Debug>(result: Result<T, ProtoError>) -> bool {
    matches!(result, Err(ProtoError::Violation(_)))
}

/// Hands out every chunk of `file` and sends them in `order` (positions in index order);
/// returns what the last send returned.
fn send_all(tx: &mut Sender, file: u32, order: &[usize]) -> Option<Message> {
    let spans: Vec<ChunkSpan> = std::iter::from_fn(|| tx.next_chunk(file)).collect();
    let mut last = None;
    for &i in order {
        let span = spans[i];
        last = tx.on_chunk_sent(file, span.index, [span.index as u8; 32]).expect("sent once");
    }
    last
}

#[test]
fn the_chunk_size_is_checked() {
    assert!(is_violation(Sender::new(0, false)));
    assert!(is_violation(Sender::new(MAX_CHUNK_SIZE + 1, false)));
    assert_eq!(Sender::new(CS, false).expect("valid").chunk_size(), CS);
}

#[test]
fn the_plan_comes_first() {
    let mut tx = Sender::new(CS, false).expect("valid");
    assert!(is_violation(tx.dir(wp(&["d"]), Meta::default())));
    assert!(is_violation(tx.file(wp(&["f"]), 1, Meta::default())));
    assert!(is_violation(tx.source_error("x".into(), "gone".into())));
    assert!(is_violation(tx.end()));
    assert_eq!(tx.plan(2, 9), Ok(Message::Plan { files: 2, bytes: 9 }));
    assert!(tx.dir(wp(&["d"]), Meta::default()).is_ok());
}

#[test]
fn the_plan_comes_once() {
    let mut tx = planned();
    assert!(is_violation(tx.plan(3, 100)));
}

#[test]
fn nothing_is_announced_after_the_end() {
    let mut tx = planned();
    tx.end().expect("nothing open");
    assert!(is_violation(tx.dir(wp(&["d"]), Meta::default())));
    assert!(is_violation(tx.file(wp(&["f"]), 1, Meta::default())));
    assert!(is_violation(tx.source_error("x".into(), "gone".into())));
    assert!(is_violation(tx.end()), "second end");
}

#[test]
fn file_ids_count_up_from_zero() {
    let mut tx = planned();
    for expected in 0..3 {
        let start = announce(&mut tx, &format!("f{expected}"), 10);
        assert_eq!(start.id, expected);
        assert!(matches!(start.entry, Message::Entry(Entry::File { id, .. }) if id == expected));
        assert_eq!(tx.next_chunk(expected).map(|span| span.file), Some(expected));
    }
}

#[test]
fn a_refused_entry_uses_no_id() {
    let mut tx = planned();
    assert!(matches!(tx.file(wp(&[".."]), 1, Meta::default()), Err(ProtoError::UnsafePath(_))));
    assert!(matches!(tx.dir(wp(&["a/b"]), Meta::default()), Err(ProtoError::UnsafePath(_))));
    let too_many_chunks = (u64::from(u32::MAX) + 1) * u64::from(CS);
    assert!(is_violation(tx.file(wp(&["huge"]), too_many_chunks, Meta::default())));
    assert_eq!(announce(&mut tx, "f", 1).id, 0);
    send_all(&mut tx, 0, &[0]);
    assert_eq!(tx.end(), Ok(Message::EndOfManifest { files: 1, bytes: 1 }));
}

#[test]
fn end_of_manifest_counts_the_files_and_sums_their_sizes() {
    let mut tx = planned();
    tx.dir(wp(&["d"]), Meta::default()).expect("dir");
    tx.source_error("missing".into(), "no such file".into()).expect("source error");
    for (id, size) in [(0, 0), (1, 5), (2, u64::from(CS) + 1)] {
        let start = announce(&mut tx, &format!("f{id}"), size);
        let order: Vec<usize> = (0..start.chunks as usize).collect();
        send_all(&mut tx, id, &order);
    }
    let total = 5 + u64::from(CS) + 1;
    assert_eq!(tx.end(), Ok(Message::EndOfManifest { files: 3, bytes: total }));
}

#[test]
fn chunks_are_handed_out_in_index_order_and_cover_the_file() {
    let mut tx = planned();
    let size = u64::from(CS) * 2 + 7;
    let start = announce(&mut tx, "f", size);
    assert_eq!(start.chunks, 3);
    let spans: Vec<ChunkSpan> = std::iter::from_fn(|| tx.next_chunk(0)).collect();
    let cs = u64::from(CS);
    assert_eq!(
        spans,
        [
            ChunkSpan { file: 0, index: 0, offset: 0, len: CS, claimed: None },
            ChunkSpan { file: 0, index: 1, offset: cs, len: CS, claimed: None },
            ChunkSpan { file: 0, index: 2, offset: 2 * cs, len: 7, claimed: None },
        ]
    );
    assert_eq!(tx.next_chunk(0), None, "all handed out");
    assert_eq!(tx.next_chunk(1), None, "never announced");
}

#[test]
fn the_summary_comes_with_the_last_outstanding_chunk_in_any_order() {
    let mut tx = planned();
    let size = u64::from(CS) * 2 + 7;
    announce(&mut tx, "f", size);
    let spans: Vec<ChunkSpan> = std::iter::from_fn(|| tx.next_chunk(0)).collect();
    let hashes: Vec<[u8; 32]> = (0..3u8).map(|i| chunk_hash(&[i])).collect();
    assert_eq!(tx.on_chunk_sent(0, spans[2].index, hashes[2]), Ok(None));
    assert_eq!(tx.on_chunk_sent(0, spans[0].index, hashes[0]), Ok(None));
    let root = root_hash(size, &hashes);
    assert_eq!(
        tx.on_chunk_sent(0, spans[1].index, hashes[1]),
        Ok(Some(Message::FileSummary { file: 0, root, sent: 3 }))
    );
}

#[test]
fn an_empty_file_is_summarised_with_its_entry() {
    let mut tx = planned();
    let start = announce(&mut tx, "empty", 0);
    assert_eq!(start.chunks, 0);
    assert_eq!(
        start.summary,
        Some(Message::FileSummary { file: 0, root: root_hash(0, []), sent: 0 })
    );
    assert_eq!(tx.next_chunk(0), None);
    assert!(tx.end().is_ok(), "nothing outstanding");
}

#[test]
fn a_chunk_never_handed_out_is_an_error() {
    let mut tx = planned();
    announce(&mut tx, "f", u64::from(CS) * 2);
    assert!(is_violation(tx.on_chunk_sent(0, 0, [0; 32])), "nothing handed out yet");
    tx.next_chunk(0);
    assert!(is_violation(tx.on_chunk_sent(0, 1, [0; 32])), "only chunk 0 was");
    assert!(is_violation(tx.on_chunk_sent(7, 0, [0; 32])), "file never announced");
}

#[test]
fn a_chunk_sent_twice_is_an_error() {
    let mut tx = planned();
    announce(&mut tx, "f", u64::from(CS) * 3);
    for _ in 0..3 {
        tx.next_chunk(0);
    }
    tx.on_chunk_sent(0, 2, [2; 32]).expect("first time");
    assert!(is_violation(tx.on_chunk_sent(0, 2, [2; 32])), "twice while waiting for chunk 0");
    tx.on_chunk_sent(0, 0, [0; 32]).expect("first time");
    assert!(is_violation(tx.on_chunk_sent(0, 0, [0; 32])), "twice once folded");
    assert!(tx.on_chunk_sent(0, 1, [1; 32]).expect("first time").is_some(), "summary");
    assert!(is_violation(tx.on_chunk_sent(0, 1, [1; 32])), "twice after the summary");
}

#[test]
fn a_read_failure_aborts_the_file_once() {
    let mut tx = planned();
    announce(&mut tx, "f", u64::from(CS) * 4);
    let first = tx.next_chunk(0).expect("chunk 0");
    let second = tx.next_chunk(0).expect("chunk 1");
    assert_eq!(
        tx.on_read_failed(0, "input/output error".into()),
        Some(Message::FileAborted { file: 0, message: "input/output error".into() })
    );
    assert_eq!(tx.on_read_failed(0, "again".into()), None, "aborted once");
    assert_eq!(tx.next_chunk(0), None, "no more chunks of it");
    // Chunks in flight at the abort come back quietly, and never bring a summary.
    assert_eq!(tx.on_chunk_sent(0, first.index, [0; 32]), Ok(None));
    assert_eq!(tx.on_chunk_sent(0, second.index, [1; 32]), Ok(None));
    assert!(tx.end().is_ok(), "an aborted file does not hold up the end");
    assert_eq!(tx.on_read_failed(1, "never announced".into()), None);
}

#[test]
fn the_end_waits_for_every_file() {
    let mut tx = planned();
    announce(&mut tx, "f", u64::from(CS) + 1);
    assert!(is_violation(tx.end()), "nothing sent");
    send_all(&mut tx, 0, &[1]);
    assert!(is_violation(tx.end()), "chunk 0 outstanding");
    assert!(tx.on_chunk_sent(0, 0, [0; 32]).expect("first time").is_some());
    assert!(tx.end().is_ok());
}

#[test]
fn memory_grows_only_with_chunks_sent_ahead_and_is_released() {
    let mut tx = planned();
    // The largest file the receiver accepts costs nothing up front.
    announce(&mut tx, "huge", u64::from(u32::MAX) * u64::from(CS));
    for _ in 0..4 {
        tx.next_chunk(0);
    }
    assert_eq!(tx.held_hashes(), 0, "handing out chunks costs nothing");
    tx.on_chunk_sent(0, 3, [3; 32]).expect("first time");
    tx.on_chunk_sent(0, 1, [1; 32]).expect("first time");
    assert_eq!(tx.held_hashes(), 2, "chunks 1 and 3 wait for chunk 0");
    tx.on_chunk_sent(0, 0, [0; 32]).expect("first time");
    assert_eq!(tx.held_hashes(), 1, "chunks 0 and 1 folded, 3 waits for 2");
    tx.on_read_failed(0, "gone".into());
    assert_eq!((tx.open_files(), tx.held_hashes()), (0, 0), "released at the abort");

    announce(&mut tx, "small", u64::from(CS) * 2);
    send_all(&mut tx, 1, &[1, 0]);
    assert_eq!((tx.open_files(), tx.held_hashes()), (0, 0), "released at the summary");
}

#[test]
fn reports_say_what_they_mean() {
    let mut tx = planned();
    announce(&mut tx, "f", 0);
    assert_eq!(
        tx.on_report(Message::Progress { verified_bytes: 5 }),
        Ok(Report::Progress { verified_bytes: 5 })
    );
    let failed = Message::FileFailed { file: 0, message: "disk full".into() };
    assert_eq!(
        tx.on_report(failed),
        Ok(Report::FileFailed { file: 0, message: "disk full".into() })
    );
    let unknown = Message::FileFailed { file: 1, message: "disk full".into() };
    assert!(is_violation(tx.on_report(unknown)), "file 1 was never announced");
    assert_eq!(
        tx.on_report(Message::Fatal { message: "no space".into() }),
        Ok(Report::Fatal { message: "no space".into() })
    );
}

#[test]
fn the_finish_report_comes_after_the_end_and_last() {
    let mut tx = planned();
    let finished = Message::Finished { files: 1, bytes: 2, failures: 3 };
    assert!(is_violation(tx.on_report(finished.clone())), "before the end");
    assert!(!tx.is_finished());
    tx.end().expect("nothing open");
    assert_eq!(
        tx.on_report(finished.clone()),
        Ok(Report::Finished(Totals {
            files: 1,
            bytes: 2,
            failures: 3,
            resumed: 0,
            skipped: 0,
            resumed_files: 0
        }))
    );
    assert!(tx.is_finished());
    assert!(is_violation(tx.on_report(finished)), "second finish report");
    assert!(is_violation(tx.on_report(Message::Progress { verified_bytes: 1 })));
    assert!(is_violation(tx.on_report(Message::Fatal { message: "late".into() })));
}

#[test]
fn a_sender_message_from_the_receiver_is_named_by_its_kind_only() {
    let mut tx = planned();
    let hostile = Message::SourceError { path: "SECRET".into(), message: "SECRET".into() };
    let Err(ProtoError::Violation(why)) = tx.on_report(hostile) else { panic!("accepted") };
    assert_eq!(why, "the receiver sent a source error");
    for msg in [
        Message::Plan { files: 0, bytes: 0 },
        Message::Entry(Entry::Dir { path: wp(&["d"]), meta: Meta::default() }),
        Message::FileSummary { file: 0, root: [0; 32], sent: 0 },
        Message::FileAborted { file: 0, message: String::new() },
        Message::EndOfManifest { files: 0, bytes: 0 },
    ] {
        let kind = msg.kind();
        assert_eq!(
            tx.on_report(msg),
            Err(ProtoError::Violation(format!("the receiver sent {kind}")))
        );
    }
}

mod sync;
