//! The sender's rules with resume: chunks wait for the receiver's held reports, held
//! chunks come with the receiver's hash, and the reports are checked.

use super::{announce, is_violation, wp, CS};
use crate::manifest::Meta;
use crate::message::{Held, HeldBase, HeldChunk, Message};
use crate::send::{Report, Sender};

fn resuming() -> Sender {
    let mut tx = Sender::new(CS, true).expect("valid chunk size");
    tx.plan(1, 100).expect("first plan");
    tx
}

fn held(file: u32, base: HeldBase, range: (u32, u32), chunks: &[u32]) -> Message {
    let chunks = chunks.iter().map(|&index| HeldChunk { index, hash: [index as u8; 32] }).collect();
    Message::Held(Held { file, base, from: range.0, to: range.1, chunks })
}

#[test]
fn chunks_wait_for_the_receivers_report_and_held_ones_carry_its_hash() {
    let mut tx = resuming();
    let start = announce(&mut tx, "f", 4 * u64::from(CS));
    assert_eq!(tx.next_chunk(start.id), None, "nothing before the receiver's report");
    assert!(tx.waits_for_receiver(start.id));
    let first = tx.on_report(held(0, HeldBase::Partial, (0, 2), &[1]));
    assert_eq!(first, Ok(Report::Held { file: 0, base: HeldBase::Partial }));
    let a = tx.next_chunk(0).expect("chunk 0 decided");
    let b = tx.next_chunk(0).expect("chunk 1 decided");
    assert_eq!((a.index, a.claimed), (0, None));
    assert_eq!((b.index, b.claimed), (1, Some([1; 32])));
    assert_eq!(tx.next_chunk(0), None, "chunk 2 is not covered yet");
    assert_eq!(tx.on_report(held(0, HeldBase::Partial, (2, 4), &[])), Ok(Report::Noted));
    assert!(!tx.waits_for_receiver(0));
    let rest: Vec<u32> = std::iter::from_fn(|| tx.next_chunk(0)).map(|s| s.index).collect();
    assert_eq!(rest, [2, 3]);
    for index in 0..4 {
        let summary = tx.on_chunk_sent(0, index, [index as u8; 32]).expect("once");
        assert_eq!(summary.is_some(), index == 3, "summary with the last chunk");
    }
}

#[test]
fn held_reports_out_of_turn_are_violations() {
    let mut tx = resuming();
    announce(&mut tx, "f", 4 * u64::from(CS));
    let partial = HeldBase::Partial;
    assert!(is_violation(tx.on_report(held(0, partial.clone(), (1, 2), &[]))), "not from 0");
    assert!(is_violation(tx.on_report(held(0, partial.clone(), (0, 5), &[]))), "past the end");
    assert!(is_violation(tx.on_report(held(0, partial.clone(), (0, 0), &[]))), "empty range");
    assert!(is_violation(tx.on_report(held(0, partial.clone(), (0, 2), &[1, 0]))), "order");
    assert!(is_violation(tx.on_report(held(0, partial.clone(), (0, 2), &[2]))), "outside");
    assert!(is_violation(tx.on_report(held(0, HeldBase::Nothing, (0, 2), &[1]))), "base");
    assert!(is_violation(tx.on_report(held(1, partial.clone(), (0, 1), &[]))), "unknown file");
    assert_eq!(tx.next_chunk(0), None, "refused reports decided nothing");
    tx.on_report(held(0, partial.clone(), (0, 2), &[0])).expect("in turn");
    assert!(is_violation(tx.on_report(held(0, partial, (0, 2), &[]))), "again");
    assert!(is_violation(tx.on_report(held(0, HeldBase::Complete, (2, 4), &[]))), "new base");
    let mut plain = Sender::new(CS, false).expect("valid");
    plain.plan(1, 1).expect("plan");
    announce(&mut plain, "g", 1);
    assert!(is_violation(plain.on_report(held(0, HeldBase::Nothing, (0, 1), &[]))));
}

#[test]
fn a_file_the_receiver_failed_is_not_sent_further() {
    let mut tx = resuming();
    let id = announce(&mut tx, "f", 3 * u64::from(CS)).id;
    tx.on_report(held(id, HeldBase::Nothing, (0, 3), &[])).expect("in turn");
    let first = tx.next_chunk(id).expect("decided");
    let failed = Message::FileFailed { file: id, message: "disk full".into() };
    assert!(matches!(tx.on_report(failed), Ok(Report::FileFailed { .. })));
    assert_eq!(tx.next_chunk(id), None, "no more chunks of a failed file");
    assert_eq!(tx.on_chunk_sent(id, first.index, [0; 32]), Ok(None), "in flight: dropped");
    assert_eq!(tx.on_report(held(id, HeldBase::Nothing, (0, 3), &[])), Ok(Report::Noted));
    tx.end().expect("a failed file needs no summary");
}

#[test]
fn an_empty_file_needs_no_report() {
    let mut tx = resuming();
    let start = tx.file(wp(&["e"]), 0, Meta::default()).expect("announced");
    assert!(start.summary.is_some());
    assert!(!tx.waits_for_receiver(start.id));
    assert!(is_violation(tx.on_report(held(0, HeldBase::Nothing, (0, 1), &[]))));
    tx.end().expect("nothing open");
}

mod props {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::{announce, held, resuming, CS};
    use crate::message::HeldBase;
    use crate::send::Report;

    #[derive(Debug, Clone)]
    enum Op {
        /// A held report `from..to` listing `listed` (shifted into range or not).
        Report { from: u32, to: u32, listed: Vec<u32>, partial: bool },
        /// A report that follows on from what was decided, `span` chunks long, listing
        /// chunks at these offsets into it.
        InTurn { span: u32, offsets: Vec<u32> },
        /// The caller asks for the next chunk.
        Take,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u32..24, 0u32..24, prop::collection::vec(0u32..24, 0..6), any::<bool>())
                .prop_map(|(from, to, listed, partial)| Op::Report { from, to, listed, partial }),
            (1u32..8, prop::collection::vec(0u32..8, 0..4))
                .prop_map(|(span, offsets)| Op::InTurn { span, offsets }),
            Just(Op::Take),
            Just(Op::Take),
        ]
    }

    proptest! {
        /// Whatever held reports arrive, in turn or not, the sender hands out each chunk
        /// at most once, in index order, only once a report it accepted covered it, and
        /// with a claimed hash exactly for the chunks such a report listed.
        #[test]
        fn no_report_makes_a_chunk_go_early_twice_or_with_a_wrong_claim(
            count in 1u32..20,
            ops in prop::collection::vec(op(), 0..80),
        ) {
            let mut tx = resuming();
            let id = announce(&mut tx, "f", u64::from(count) * u64::from(CS)).id;
            let mut decided = 0u32;
            let mut claims: BTreeMap<u32, [u8; 32]> = BTreeMap::new();
            let mut handed = BTreeSet::new();
            // The base of the first report taken: later ones must keep it.
            let mut first_base: Option<bool> = None;
            for op in ops {
                let in_turn = matches!(op, Op::InTurn { .. });
                let op = match op {
                    Op::InTurn { span, offsets } => {
                        let partial = first_base.unwrap_or(true);
                        let listed = if partial {
                            offsets.iter().map(|o| decided + o % span).collect()
                        } else {
                            Vec::new()
                        };
                        Op::Report { from: decided, to: decided + span, listed, partial }
                    }
                    other => other,
                };
                match op {
                    Op::Report { from, to, listed, partial } => {
                        let mut listed = listed;
                        listed.sort_unstable();
                        listed.dedup();
                        let base = if partial { HeldBase::Partial } else { HeldBase::Nothing };
                        let accepted = tx.on_report(held(id, base, (from, to), &listed));
                        let ok = matches!(accepted, Ok(Report::Held { .. } | Report::Noted));
                        // The other half: a report in turn, within the file, is taken.
                        prop_assert!(ok || !in_turn || to > count, "refused in turn: {:?}", accepted);
                        if ok {
                            first_base.get_or_insert(partial);
                            prop_assert_eq!(from, decided, "accepted out of turn");
                            prop_assert!(to > from && to <= count);
                            for index in &listed {
                                prop_assert!((from..to).contains(index));
                                claims.insert(*index, [*index as u8; 32]);
                            }
                            decided = to;
                        }
                    }
                    Op::InTurn { .. } => unreachable!("turned into a report above"),
                    Op::Take => match tx.next_chunk(id) {
                        Some(span) => {
                            prop_assert!(span.index < decided, "chunk {} before its report", span.index);
                            prop_assert_eq!(span.index as usize, handed.len(), "index order");
                            prop_assert!(handed.insert(span.index), "handed out twice");
                            prop_assert_eq!(span.claimed, claims.get(&span.index).copied());
                        }
                        None => prop_assert_eq!(handed.len() as u32, decided, "a decided chunk held back"),
                    },
                }
            }
        }
    }
}

#[test]
fn a_receiver_that_said_it_holds_nothing_is_sent_every_chunk_at_once() {
    let mut tx = Sender::new(CS, true).expect("valid chunk size").with_nothing_held(true);
    tx.plan(1, 100).expect("first plan");
    let start = announce(&mut tx, "f", 2 * u64::from(CS));
    assert!(!tx.waits_for_receiver(start.id), "no report to wait for");
    let chunks: Vec<_> = std::iter::from_fn(|| tx.next_chunk(start.id)).collect();
    assert_eq!(
        chunks.iter().map(|c| (c.index, c.claimed)).collect::<Vec<_>>(),
        [(0, None), (1, None)]
    );
    let report = tx.on_report(held(0, HeldBase::Nothing, (0, 2), &[]));
    assert!(is_violation(report), "a report after the receiver said it holds nothing");
}
