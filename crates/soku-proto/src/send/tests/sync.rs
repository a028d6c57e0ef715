//! A sync's two state machines together: a file the receiver skips is never handed
//! out, an empty one skipped after its summary is settled at both ends, and reports a
//! sync alone may carry are refused outside one.

use super::*;
use crate::path::Target;
use crate::receive::{FileOutcome, Receiver};
use crate::sync::SkipReason;

fn pair() -> (Sender, Receiver) {
    let mut tx = Sender::new(CS, true).expect("valid").with_sync(true);
    tx.plan(2, u64::from(CS) * 3).expect("plan");
    let target = Target::IntoDir(std::path::PathBuf::from("/t"));
    let rx =
        Receiver::new(target, None, false, CS).expect("valid").with_resume(true).with_sync(true);
    (tx, rx)
}

#[test]
fn a_skipped_file_is_never_read_and_ends_settled() {
    let (mut tx, mut rx) = pair();
    let start = announce(&mut tx, "big", u64::from(CS) * 3);
    let Message::Entry(entry) = start.entry else { panic!("an entry") };
    rx.on_entry(entry).expect("accepted");
    assert!(tx.next_chunk(start.id).is_none(), "waits for the receiver");
    rx.on_file_opened(start.id);
    assert!(rx.may_skip(start.id));
    let told = rx.on_skipped(start.id, SkipReason::Unchanged).expect("skipped");
    assert_eq!(
        tx.on_report(told.clone()),
        Ok(Report::Skipped { file: start.id, reason: SkipReason::Unchanged })
    );
    assert!(tx.next_chunk(start.id).is_none(), "nothing of it is handed out");
    assert_eq!(tx.open_files(), 0);
    assert!(is_violation(tx.on_report(told)), "a second skip of the same file");
    let end = tx.end().expect("every file settled");
    let Message::EndOfManifest { files, bytes } = end else { panic!("{end:?}") };
    rx.on_end(files, bytes).expect("end");
    assert!(rx.is_finished());
    assert_eq!((rx.totals().files, rx.totals().skipped), (0, 1));
}

#[test]
fn an_empty_file_is_skipped_after_its_summary() {
    let (mut tx, mut rx) = pair();
    let start = announce(&mut tx, "empty", 0);
    let Message::Entry(entry) = start.entry else { panic!("an entry") };
    rx.on_entry(entry).expect("accepted");
    let told = rx.on_skipped(start.id, SkipReason::Unchanged).expect("an empty file is");
    let Some(Message::FileSummary { file, root, sent }) = start.summary else { panic!("summary") };
    assert_eq!(rx.on_summary(file, root, sent), Ok(FileOutcome::Pending), "dropped");
    assert!(matches!(tx.on_report(told), Ok(Report::Skipped { .. })));
}

#[test]
fn a_file_is_not_skipped_once_held_chunks_were_told() {
    let (mut tx, mut rx) = pair();
    let start = announce(&mut tx, "f", u64::from(CS) * 2);
    let Message::Entry(entry) = start.entry else { panic!("an entry") };
    rx.on_entry(entry).expect("accepted");
    rx.on_file_opened(start.id);
    let held = rx.on_held(start.id, HeldBase::Nothing, 0, 2, Vec::new()).expect("told");
    assert!(!rx.may_skip(start.id), "the sender may be sending it");
    assert!(rx.on_skipped(start.id, SkipReason::Unchanged).is_err());
    tx.on_report(held.expect("a report")).expect("held");
    let skip = Message::Skipped { file: start.id, reason: SkipReason::Unchanged };
    assert!(is_violation(tx.on_report(skip)), "after its held chunks");
}

#[test]
fn sync_reports_are_refused_outside_a_sync() {
    let mut tx = planned();
    let start = announce(&mut tx, "f", 5);
    let skip = Message::Skipped { file: start.id, reason: SkipReason::Unchanged };
    assert!(is_violation(tx.on_report(skip)));
    let deleted = Message::Deleted { path: wp(&["old"]) };
    assert!(is_violation(tx.on_report(deleted)));
    let target = Target::IntoDir(std::path::PathBuf::from("/t"));
    let mut rx = Receiver::new(target, None, false, CS).expect("valid").with_resume(true);
    let Message::Entry(entry) = start.entry else { panic!("an entry") };
    rx.on_entry(entry).expect("accepted");
    assert!(!rx.may_skip(start.id));
}

#[test]
fn a_deletion_is_told_after_the_manifest_and_its_path_checked() {
    let (mut tx, _) = pair();
    let early = Message::Deleted { path: wp(&["old"]) };
    assert!(is_violation(tx.on_report(early)), "before the end of the manifest");
    tx.end().expect("end");
    let bad = Message::Deleted { path: wp(&[".."]) };
    assert!(tx.on_report(bad).is_err(), "an unsafe path");
    let good = Message::Deleted { path: wp(&["d", "old"]) };
    assert_eq!(tx.on_report(good), Ok(Report::Deleted { path: wp(&["d", "old"]) }));
}
