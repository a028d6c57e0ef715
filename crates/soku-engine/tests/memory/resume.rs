//! Resume: an interrupted copy continues from what the receiver holds, verified by hash,
//! sending only the rest; a changed source or a damaged partial file is noticed.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use soku_engine::events::TransferEvent;
use soku_engine::link::{memory, Inbound};
use soku_engine::Outcome;
use soku_proto::chunk::{chunk_hash, ChunkHeader};

use crate::harness::*;

const CS: usize = SMALL_CHUNKS as usize;

fn partial_of(dir: &Path, name: &str) -> std::path::PathBuf {
    dir.join(format!(".{name}.soku-part"))
}

fn warnings(events: &Recorder) -> Vec<String> {
    let events = events.0.lock().unwrap();
    events
        .iter()
        .filter_map(|e| match e {
            TransferEvent::Warning(w) => Some(w.clone()),
            _ => None,
        })
        .collect()
}

/// Copies `source` into the scene's target over a fresh pair; both sides must succeed.
async fn copy(scene: &Scene, source: &Path, resume: bool) -> (Outcome, Ran) {
    let opts = if resume { options(false) } else { no_resume(false) };
    let send = sender(&[source.to_path_buf()], false).await;
    let receive = receiver(&scene.dst(), 1, false, None);
    let ran = run_pair(memory::streams_pair(Duration::ZERO), send, receive, opts).await;
    let sent = ran.sent.as_ref().map_err(|e| e.to_string()).expect("sender");
    let received = ran.received.as_ref().map_err(|e| e.to_string()).expect("receiver");
    assert_eq!(sent.resumed, received.resumed, "both sides count the same held bytes");
    (*sent, ran)
}

/// Starts a rate-limited copy of `source` and cancels it partway.
async fn interrupt(scene: &Scene, source: &Path, after: Duration) {
    let send = sender(&[source.to_path_buf()], false).await;
    let receive = receiver(&scene.dst(), 1, false, None);
    let mut opts = options(false);
    // 8 Mbit/s: 1 MB a second; cancelled at `after`.
    opts.flags.rate_limit_bps = Some(8_000_000);
    let run = run_pair(memory::ordered_pair(), send, receive, opts);
    assert!(tokio::time::timeout(after, run).await.is_err(), "interrupted");
}

#[tokio::test]
async fn an_interrupted_copy_continues_and_sends_only_the_rest() {
    let scene = Scene::new();
    let big = scene.file("big.bin", 64 * CS, 1);
    interrupt(&scene, &big, Duration::from_millis(400)).await;
    assert!(partial_of(&scene.dst(), "big.bin").exists(), "the partial file is kept");
    assert!(!scene.dst().join("big.bin").exists(), "nothing at the final name");

    let (outcome, ran) = copy(&scene, &big, true).await;
    assert_same(&big, &scene.dst().join("big.bin"));
    assert_eq!(outcome.bytes, 64 * CS as u64);
    assert!(outcome.resumed > 0, "something was held");
    assert!(outcome.resumed < outcome.bytes, "something was still to send");
    // The meter hears how much was already there while the copy runs, from the sender
    // as it goes (all of it) and from the receiver with its progress (never more).
    let told = |events: &Recorder| {
        let events = events.0.lock().unwrap();
        events
            .iter()
            .filter_map(|e| match e {
                TransferEvent::Resumed { bytes } => Some(*bytes),
                _ => None,
            })
            .max()
    };
    assert_eq!(told(&ran.sender_events), Some(outcome.resumed));
    assert!(told(&ran.receiver_events).unwrap_or(0) <= outcome.resumed);
    assert_eq!(listing(&scene.dst()), ["big.bin"], "the partial file became the file");
}

#[tokio::test]
async fn a_complete_identical_file_is_not_sent_again() {
    let scene = Scene::new();
    let a = scene.file("a.bin", 5 * CS + 3, 2);
    copy(&scene, &a, true).await;
    let before = std::fs::metadata(scene.dst().join("a.bin")).unwrap();
    let (outcome, _) = copy(&scene, &a, true).await;
    assert_eq!((outcome.files, outcome.resumed), (1, outcome.bytes), "all held");
    let after = std::fs::metadata(scene.dst().join("a.bin")).unwrap();
    assert_eq!(before.modified().unwrap(), after.modified().unwrap(), "not rewritten");
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(before.ino(), after.ino(), "left in place, not renamed over");
    }
    assert_same(&a, &scene.dst().join("a.bin"));

    let (outcome, _) = copy(&scene, &a, false).await;
    assert_eq!(outcome.resumed, 0, "--no-resume sends everything");
}

#[tokio::test]
async fn a_target_that_differs_in_one_chunk_gets_that_chunk_only() {
    let scene = Scene::new();
    let a = scene.file("a.bin", 8 * CS, 3);
    copy(&scene, &a, true).await;
    let target = scene.dst().join("a.bin");
    write_at(&target, b"X", 5);
    let (outcome, ran) = copy(&scene, &a, true).await;
    assert_eq!(outcome.bytes - outcome.resumed, CS as u64, "one chunk sent");
    assert_same(&a, &target);
    assert!(warnings(&ran.sender_events).is_empty(), "updating a file is no surprise");
}

#[tokio::test]
async fn a_changed_source_restarts_its_file_and_says_so() {
    let scene = Scene::new();
    let big = scene.file("big.bin", 64 * CS, 4);
    interrupt(&scene, &big, Duration::from_millis(300)).await;
    assert!(partial_of(&scene.dst(), "big.bin").exists());
    let newer = std::time::SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options().write(true).open(&big).unwrap().set_modified(newer).unwrap();
    let (outcome, ran) = copy(&scene, &big, true).await;
    assert_eq!(outcome.resumed, 0);
    assert_same(&big, &scene.dst().join("big.bin"));
    let said = warnings(&ran.sender_events);
    assert!(
        said.iter().any(|w| w.contains("modified") && w.contains("from the start")),
        "{said:?}"
    );
}

#[tokio::test]
async fn a_damaged_partial_file_gets_its_bad_chunks_again_and_says_so() {
    let scene = Scene::new();
    let big = scene.file("big.bin", 64 * CS, 5);
    interrupt(&scene, &big, Duration::from_millis(400)).await;
    let part = partial_of(&scene.dst(), "big.bin");
    // Damage the first chunk, which was written early in the interrupted run.
    write_at(&part, b"rot", 10);
    let (outcome, ran) = copy(&scene, &big, true).await;
    assert_same(&big, &scene.dst().join("big.bin"));
    assert!(outcome.resumed > 0);
    let said = warnings(&ran.sender_events);
    assert!(said.iter().any(|w| w.contains(": 1 chunk of") && w.contains("differed")), "{said:?}");
}

#[tokio::test]
async fn without_resume_an_interrupted_copy_leaves_nothing() {
    let scene = Scene::new();
    let big = scene.file("big.bin", 64 * CS, 6);
    let send = sender(std::slice::from_ref(&big), false).await;
    let receive = receiver(&scene.dst(), 1, false, None);
    let mut opts = no_resume(false);
    opts.flags.rate_limit_bps = Some(8_000_000);
    let run = run_pair(memory::ordered_pair(), send, receive, opts);
    assert!(tokio::time::timeout(Duration::from_millis(300), run).await.is_err());
    // On Windows a file removed while a write on the blocking pool still holds it stays
    // listed (delete pending) until that write ends and closes it: wait, bounded.
    let dst = scene.dst();
    let empty = async {
        for _ in 0..1000 {
            if listing(&dst).is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    empty.await;
    assert_eq!(listing(&dst), Vec::<String>::new());
}

#[tokio::test]
async fn a_tree_copied_again_sends_only_what_changed_or_is_missing() {
    let scene = Scene::new();
    let top = scene.src().join("tree");
    for (n, rel) in ["a.bin", "b.bin", "sub/c.bin", "sub/d.bin"].iter().enumerate() {
        scene.file(&format!("tree/{rel}"), 3 * CS + n, n as u8 + 10);
    }
    let tree = |dst: &Path| dst.join("tree");
    let copy_tree = || async {
        let send = sender(std::slice::from_ref(&top), true).await;
        let receive = receiver(&scene.dst(), 1, true, None);
        let ran =
            run_pair(memory::streams_pair(Duration::ZERO), send, receive, options(true)).await;
        ran.sent.map_err(|e| e.to_string()).expect("sender")
    };
    let first = copy_tree().await;
    assert_eq!((first.files, first.resumed), (4, 0));
    // One file gone at the target, one changed in one chunk at the source.
    std::fs::remove_file(tree(&scene.dst()).join("b.bin")).unwrap();
    let changed = top.join("sub/c.bin");
    write_at(&changed, b"new", 0);
    let again = copy_tree().await;
    let b_len = (3 * CS + 1) as u64;
    assert_eq!(again.files, 4);
    assert_eq!(again.bytes - again.resumed, b_len + CS as u64, "b.bin whole, one chunk of c.bin");
    for rel in ["a.bin", "b.bin", "sub/c.bin", "sub/d.bin"] {
        assert_same(&top.join(rel), &tree(&scene.dst()).join(rel));
    }
}

/// A session that fails while a chunk is being written counts that chunk as sent: the
/// write lands anyway and the next session finds it held, so a count taken before it
/// landed would make the command call it resumed. The only blocking thread is kept busy
/// so that the write is certainly still waiting when the link is lost. The file is
/// larger than the small files whose writes run in place (`small_steps.rs`).
#[test]
fn a_chunk_still_being_written_when_the_link_is_lost_is_counted_as_sent() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let scene = Scene::new();
        let (mut peer, mut ours) = memory::streams_pair(Duration::ZERO);
        let events = Arc::new(Recorder::default());
        let receive = receiver(&scene.dst(), 1, false, None);
        let sink = events.clone();
        let receiving = tokio::spawn(async move {
            soku_engine::run(receive, &mut ours, options(false), sink).await
        });
        peer.tx.send_control(file_entry(0, "f.bin", 5 * CS as u64)).await.unwrap();
        // What the receiver holds of the file (nothing) comes once its storage is made.
        let told = tokio::time::timeout(Duration::from_secs(10), peer.recv()).await;
        assert!(matches!(told, Ok(Some(Ok(Inbound::Control(_))))), "held report: {told:?}");

        let (started, running) = tokio::sync::oneshot::channel();
        let (release, held) = std::sync::mpsc::channel::<()>();
        let blocker = tokio::task::spawn_blocking(move || {
            let _ = started.send(());
            let _ = held.recv_timeout(Duration::from_secs(20));
        });
        running.await.unwrap();
        let data = pattern(CS, 7);
        let hash = chunk_hash(&data);
        let header =
            ChunkHeader { file: 0, index: 0, wire_len: CS as u32, compressed: false, hash };
        peer.tx.send_chunk(header, Bytes::from(data.clone()), 0).await.unwrap();
        // The chunk reaches its write, which waits for the blocking thread; then the
        // sender is gone.
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(peer);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut held = vec![0; CS];
        let partial = std::fs::File::open(partial_of(&scene.dst(), "f.bin")).unwrap();
        read_at(&partial, &mut held, 0);
        assert!(held != data, "the chunk was written before the link was lost: no race");
        release.send(()).unwrap();
        blocker.await.unwrap();
        let received = tokio::time::timeout(Duration::from_secs(10), receiving).await;
        let received = received.expect("the receiver stops").unwrap();
        assert!(received.is_err(), "the session failed: {received:?}");

        read_at(&partial, &mut held, 0);
        // The race took place: the write landed after the link was lost.
        assert!(
            held == data,
            "the chunk was not written: the race this test sets up did not happen"
        );
        let last_sent = events.0.lock().unwrap().iter().rev().find_map(|e| match e {
            TransferEvent::Sent { bytes } => Some(*bytes),
            _ => None,
        });
        assert_eq!(last_sent, Some(CS as u64), "the session's last count holds the chunk");
    });
}

/// A tree copied to a new name and interrupted resumes in the directory it made, as
/// the first run laid it out, not in a copy of the tree inside it (scp's rule for a
/// target that exists); the receiver's mark in it goes once the copy is complete, and
/// the next copy to that name goes inside it, by scp's rule. Nothing held by the
/// interrupted copy (a small file's only chunk, a large one's unreceived last chunk
/// beside the partial file's trailer) is taken for a source that changed.
#[tokio::test]
async fn a_tree_interrupted_into_a_new_name_resumes_there() {
    let scene = Scene::new();
    let top = scene.src().join("tree");
    scene.file("tree/a.txt", 5, 20);
    scene.file("tree/big.bin", 64 * CS + 100, 21);
    scene.file("tree/sub/z.txt", 7, 22);
    let rr = scene.dst().join("rr");
    let copy_tree = |rate: Option<u64>| {
        let top = top.clone();
        let rr = rr.clone();
        async move {
            let send = sender(std::slice::from_ref(&top), true).await;
            let receive = receiver(&rr, 1, true, None);
            let mut opts = options(true);
            opts.flags.rate_limit_bps = rate;
            run_pair(memory::ordered_pair(), send, receive, opts).await
        }
    };
    let cut = tokio::time::timeout(Duration::from_millis(400), copy_tree(Some(8_000_000))).await;
    assert!(cut.is_err(), "interrupted");
    assert!(rr.join(".soku-part").is_file(), "the directory made is marked");
    assert!(partial_of(&rr, "big.bin").exists(), "{:?}", listing(&rr));

    let ran = copy_tree(None).await;
    let sent = ran.sent.as_ref().map_err(|e| e.to_string()).expect("sender");
    assert!(sent.resumed > 0, "what the first run left was used");
    assert_eq!(warnings(&ran.sender_events), Vec::<String>::new());
    assert_eq!(listing(&rr), ["a.txt", "big.bin", "sub/", "sub/z.txt"], "the first layout");
    for rel in ["a.txt", "big.bin", "sub/z.txt"] {
        assert_same(&top.join(rel), &rr.join(rel));
    }

    let ran = copy_tree(None).await;
    ran.sent.map_err(|e| e.to_string()).expect("sender");
    assert!(rr.join("tree/big.bin").is_file(), "complete: the next copy goes inside");
}

/// Chunks of partial files that differ from their sources are told once for the
/// whole copy, with how many and in how many files.
#[tokio::test]
async fn damaged_partial_files_are_told_in_one_line() {
    let scene = Scene::new();
    let top = scene.src().join("tree");
    scene.file("tree/a.bin", 4 * CS, 30);
    scene.file("tree/b.bin", 4 * CS, 31);
    let copy_tree = || async {
        let send = sender(std::slice::from_ref(&top), true).await;
        let receive = receiver(&scene.dst(), 1, true, None);
        run_pair(memory::streams_pair(Duration::ZERO), send, receive, options(true)).await
    };
    copy_tree().await.sent.map_err(|e| e.to_string()).expect("sender");
    // Both files back to partial files, each with a damaged chunk.
    for name in ["a.bin", "b.bin"] {
        let dir = scene.dst().join("tree");
        let (done, part) = (dir.join(name), partial_of(&dir, name));
        let mut bytes = std::fs::read(&done).unwrap();
        bytes[10] ^= 0xff;
        let source = std::fs::metadata(top.join(name)).unwrap();
        let modified = source.modified().unwrap();
        let mtime = modified.duration_since(std::time::UNIX_EPOCH).unwrap();
        let trailer = soku_engine::partial::Trailer::new(
            bytes.len() as u64,
            &soku_proto::manifest::Meta {
                mtime: mtime.as_secs() as i64,
                mtime_nsec: mtime.subsec_nanos(),
                ..meta()
            },
        );
        std::fs::write(&part, &bytes).unwrap();
        trailer.write_to(&std::fs::OpenOptions::new().write(true).open(&part).unwrap()).unwrap();
        std::fs::remove_file(&done).unwrap();
    }
    let ran = copy_tree().await;
    ran.sent.as_ref().map_err(|e| e.to_string()).expect("sender");
    let said = warnings(&ran.sender_events);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("2 chunks in 2 files of the interrupted copy differed"),
        "{said:?}"
    );
}
