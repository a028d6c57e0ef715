//! Copies that must fail or lose one file, and say so, with nothing left behind: a
//! source that breaks mid-copy, a peer that sends garbage, lies about a chunk, stops
//! answering or hangs up, and a copy cancelled midway.

use std::path::Path;
use std::time::Duration;

use soku_engine::link::memory;
use soku_engine::{EngineError, LinkError};
use soku_proto::chunk::{chunk_hash, root_hash, ChunkHeader};
use soku_proto::frame;
use soku_proto::message::Message;
use soku_proto::ProtoError;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use crate::harness::*;

/// Writes messages as frames, as a (hostile) peer would.
async fn say(peer: &mut DuplexStream, msgs: &[Message]) {
    let mut wire = Vec::new();
    for msg in msgs {
        frame::encode(msg, &mut wire).unwrap();
    }
    peer.write_all(&wire).await.unwrap();
}

/// Everything the engine sent to the raw peer until it ended its side (bounded): its
/// control messages, a chunk's header standing for the chunk (its bytes are skipped).
/// A sender may have queued chunks before it read what it refuses, so a message it
/// sends after them must still be heard (on a loaded machine one was queued first, and
/// a decoder that took the chunk's bytes for a frame stopped there).
async fn heard(peer: &mut DuplexStream) -> Vec<Message> {
    let mut wire = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), peer.read_to_end(&mut wire)).await;
    let mut out = Vec::new();
    let mut rest = &wire[..];
    while rest.len() >= frame::PREFIX_LEN {
        let prefix = rest[..frame::PREFIX_LEN].try_into().expect("prefix");
        let Ok(len) = frame::payload_len(prefix, frame::MAX_CONTROL_FRAME) else { break };
        let Some(payload) = rest.get(frame::PREFIX_LEN..frame::PREFIX_LEN + len) else { break };
        let Ok(msg) = frame::decode_payload::<Message>(payload) else { break };
        rest = &rest[frame::PREFIX_LEN + len..];
        if let Message::Chunk(header) = &msg {
            let Some(after) = rest.get(header.wire_len as usize..) else { break };
            rest = after;
        }
        out.push(msg);
    }
    out
}

/// A plan and an entry for a file of three chunks, then its first chunk, honestly.
async fn first_of_three_chunks(peer: &mut DuplexStream, seed: u8) {
    let chunk = pattern(SMALL_CHUNKS as usize, seed);
    let hash = chunk_hash(&chunk);
    let header = ChunkHeader { file: 0, index: 0, wire_len: SMALL_CHUNKS, compressed: false, hash };
    let size = 3 * u64::from(SMALL_CHUNKS);
    say(peer, &[Message::Plan { files: 1, bytes: size }, file_entry(0, "a.bin", size)]).await;
    say(peer, &[Message::Chunk(header)]).await;
    peer.write_all(&chunk).await.unwrap();
}

#[tokio::test]
async fn a_source_that_shrinks_mid_copy_fails_alone() {
    for pair in
        [memory::ordered_pair, || memory::streams_pair(Duration::ZERO), || memory::striped_pair(2)]
    {
        let scene = Scene::new();
        let good = scene.file("good.bin", 100_000, 1);
        let bad = scene.file("bad.bin", 20 * SMALL_CHUNKS as usize, 2);
        let send = sender(&[bad.clone(), good.clone()], false).await;
        // Walked at full size, cut before the copy reads it: a read fails midway.
        std::fs::File::options().write(true).open(&bad).unwrap().set_len(5000).unwrap();
        let receive = receiver(&scene.dst(), 2, false, None);
        let ran = run_pair(pair(), send, receive, options(false)).await;
        let received = ran.received.unwrap();
        assert_eq!((received.files, received.failures), (1, 1));
        assert_eq!(ran.sent.unwrap(), received);
        assert_same(&good, &scene.dst().join("good.bin"));
        assert_eq!(listing(&scene.dst()), ["good.bin"]);
        assert_eq!(ran.sender_events.failed(), [bad.display().to_string()]);
        let heard = ran.receiver_events.source_failures();
        let want = format!("{}: it changed during the copy", bad.display());
        assert!(heard.len() == 1 && heard[0].starts_with(&want), "{heard:?}");
        assert!(heard[0].ends_with("run the same command again once nothing writes to it"));
    }
}

/// The sender's events, recorded, with `change` run (in the chunk task that tells it)
/// on the first `Sent` event that counts at least `at` bytes.
struct ChangeWhenSent {
    recorder: std::sync::Arc<Recorder>,
    at: u64,
    change: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl soku_engine::events::EventSink for ChangeWhenSent {
    fn event(&self, event: soku_engine::events::TransferEvent) {
        if let soku_engine::events::TransferEvent::Sent { bytes } = &event {
            if *bytes >= self.at {
                let change = self.change.lock().unwrap().take();
                if let Some(change) = change {
                    change();
                }
            }
        }
        self.recorder.event(event);
    }
}

/// Copies `bad` (200 small chunks) and `good` over `pair`, running `change` once the
/// sender has handed `at` bytes of `bad` to the link; returns both sides' outcomes and
/// events.
async fn copy_changing(
    pair: (soku_engine::link::Link, soku_engine::link::Link),
    scene: &Scene,
    files: &[std::path::PathBuf],
    at: u64,
    change: Box<dyn FnOnce() + Send>,
) -> Ran {
    // The last write to the files moves their times past the coarse clock tick some
    // kernels stamp them with: a change made within the same tick as the file's
    // creation would show no new time (a limit of any status check, not of this one).
    std::thread::sleep(Duration::from_millis(20));
    let send = sender(files, false).await;
    let receive = receiver(&scene.dst(), files.len() as u32, false, None);
    let (mut a, mut b) = pair;
    let (sender_events, receiver_events) =
        (std::sync::Arc::new(Recorder::default()), std::sync::Arc::new(Recorder::default()));
    let sink = std::sync::Arc::new(ChangeWhenSent {
        recorder: sender_events.clone(),
        at,
        change: std::sync::Mutex::new(Some(change)),
    });
    let re = receiver_events.clone();
    let (sent, received) = tokio::join!(
        async {
            let out = soku_engine::run(send, &mut a, options(false), sink).await;
            let _ = a.close(Duration::from_secs(5)).await;
            out
        },
        async {
            let out = soku_engine::run(receive, &mut b, options(false), re).await;
            let _ = b.close(Duration::from_secs(5)).await;
            out
        },
    );
    Ran { sent, received, sender_events, receiver_events }
}

/// The pairs every copy runs over: ordered bytes, QUIC-like streams, striped lanes.
fn pairs() -> [fn() -> (soku_engine::link::Link, soku_engine::link::Link); 3] {
    [memory::ordered_pair, || memory::streams_pair(Duration::ZERO), || memory::striped_pair(2)]
}

/// Bytes of the file changed during the copy: far more than any link keeps in flight
/// (64 chunks at most), so most of its chunks are read after the change.
const CHANGING: usize = 200 * SMALL_CHUNKS as usize;

/// `bad` failed alone with the one line about a change (`how`), and nothing of it took
/// a name at the target: neither the final name nor a partial file.
fn assert_changed_alone(ran: Ran, scene: &Scene, bad: &Path, good: &Path, how: &str) {
    let received = ran.received.unwrap();
    assert_eq!((received.files, received.failures), (1, 1));
    assert_eq!(ran.sent.unwrap(), received);
    assert_same(good, &scene.dst().join("good.bin"));
    assert_eq!(listing(&scene.dst()), ["good.bin"]);
    assert_eq!(ran.sender_events.failed(), [bad.display().to_string()]);
    let heard = ran.receiver_events.source_failures();
    let want = format!(
        "{}: it changed during the copy ({how} while it was read): run the same command \
         again once nothing writes to it",
        bad.display()
    );
    assert_eq!(heard, [want]);
}

#[tokio::test]
async fn a_source_rewritten_in_place_at_the_same_size_mid_copy_fails_alone() {
    for pair in pairs() {
        let scene = Scene::new();
        let bad = scene.file("bad.bin", CHANGING, 3);
        let good = scene.file("good.bin", 100_000, 4);
        let at = bad.clone();
        // Every byte replaced, the size kept at every moment (no truncation, which a
        // read in between would see as a shrink): only the file's times tell.
        let change = Box::new(move || {
            use std::io::Write as _;
            let mut file = std::fs::OpenOptions::new().write(true).open(&at).unwrap();
            file.write_all(&pattern(CHANGING, 5)).unwrap();
        });
        let ran = copy_changing(pair(), &scene, &[bad.clone(), good.clone()], 1, change).await;
        assert_changed_alone(ran, &scene, &bad, &good, "it was written to");
    }
}

#[tokio::test]
async fn a_source_that_grows_mid_copy_fails_alone() {
    for pair in pairs() {
        let scene = Scene::new();
        let bad = scene.file("bad.bin", CHANGING, 6);
        let good = scene.file("good.bin", 100_000, 7);
        let at = bad.clone();
        // A log appended to: what was there is untouched, the file is longer.
        let change = Box::new(move || {
            use std::io::Write;
            let mut log = std::fs::OpenOptions::new().append(true).open(&at).unwrap();
            log.write_all(b"one more line\n").unwrap();
        });
        let ran = copy_changing(pair(), &scene, &[bad.clone(), good.clone()], 1, change).await;
        assert_changed_alone(ran, &scene, &bad, &good, "it grew");
    }
}

#[tokio::test]
async fn a_source_appended_to_after_its_last_chunk_was_read_arrives_as_it_was_read() {
    for pair in pairs() {
        let scene = Scene::new();
        let log = scene.file("app.log", CHANGING, 8);
        let before = std::fs::read(&log).unwrap();
        let at = log.clone();
        // Once every byte of it was handed to the link, so read: the copy is not over
        // (the receiver has still to verify it), but the file was read whole, unchanged.
        let change = Box::new(move || {
            use std::io::Write;
            let mut log = std::fs::OpenOptions::new().append(true).open(&at).unwrap();
            log.write_all(b"written after the copy read it\n").unwrap();
        });
        let ran =
            copy_changing(pair(), &scene, std::slice::from_ref(&log), CHANGING as u64, change)
                .await;
        let received = ran.received.unwrap();
        assert_eq!((received.files, received.failures), (1, 0));
        assert!(std::fs::metadata(&log).unwrap().len() > CHANGING as u64, "it was appended to");
        assert_eq!(std::fs::read(scene.dst().join("app.log")).unwrap(), before);
        assert_eq!(listing(&scene.dst()), ["app.log"]);
    }
}

#[tokio::test]
async fn a_frame_too_large_is_refused_before_it_is_buffered() {
    let scene = Scene::new();
    let (mut link, mut peer) = memory::raw_peer();
    peer.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
    let receive = receiver(&scene.dst(), 1, false, None);
    let err = soku_engine::run(
        receive,
        &mut link,
        no_resume(false),
        std::sync::Arc::new(Recorder::default()),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, EngineError::Link(LinkError::Protocol(ProtoError::FrameTooLarge { .. }))),
        "{err}"
    );
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());
}

#[tokio::test]
async fn garbage_after_a_good_start_leaves_nothing_and_is_told() {
    let scene = Scene::new();
    let (mut link, mut peer) = memory::raw_peer();
    first_of_three_chunks(&mut peer, 5).await;
    // Four bytes of length, then bytes that are no message.
    peer.write_all(&[0, 0, 0, 3, 0xff, 0xff, 0xff]).await.unwrap();
    let receive = receiver(&scene.dst(), 1, false, None);
    let events = std::sync::Arc::new(Recorder::default());
    let err = soku_engine::run(receive, &mut link, no_resume(false), events).await.unwrap_err();
    assert!(
        matches!(err, EngineError::Link(LinkError::Protocol(ProtoError::Malformed(_)))),
        "{err}"
    );
    drop(link);
    assert_eq!(listing(&scene.dst()), Vec::<String>::new(), "no final name, no temporary file");
}

#[tokio::test]
async fn an_unsafe_name_is_refused_and_the_peer_is_told() {
    let scene = Scene::new();
    let (mut link, mut peer) = memory::raw_peer();
    say(&mut peer, &[Message::Plan { files: 1, bytes: 1 }, file_entry(0, "..", 1)]).await;
    let receive = receiver(&scene.dst(), 1, false, None);
    let events = std::sync::Arc::new(Recorder::default());
    let err = soku_engine::run(receive, &mut link, no_resume(false), events).await.unwrap_err();
    assert!(err.to_string().contains("unsafe path"), "{err}");
    let _ = link.close(Duration::from_millis(10)).await;
    let told = heard(&mut peer).await;
    assert!(
        told.iter()
            .any(|m| matches!(m, Message::Fatal { message } if message.contains("unsafe path"))),
        "{told:?}"
    );
    assert_eq!(listing(scene.dir.path()), ["dst/", "src/"]);
}

#[tokio::test]
async fn a_chunk_that_lies_about_its_hash_fails_its_file_only() {
    let scene = Scene::new();
    let (mut link, mut peer) = memory::raw_peer();
    let data = pattern(100, 6);
    let wrong = chunk_hash(b"something else");
    let header = ChunkHeader { file: 0, index: 0, wire_len: 100, compressed: false, hash: wrong };
    say(&mut peer, &[Message::Plan { files: 1, bytes: 100 }, file_entry(0, "a.bin", 100)]).await;
    say(&mut peer, &[Message::Chunk(header)]).await;
    peer.write_all(&data).await.unwrap();
    say(
        &mut peer,
        &[
            Message::FileSummary { file: 0, root: root_hash(100, [&wrong]), sent: 1 },
            Message::EndOfManifest { files: 1, bytes: 100 },
        ],
    )
    .await;
    let receive = receiver(&scene.dst(), 1, false, None);
    let events = std::sync::Arc::new(Recorder::default());
    let outcome =
        soku_engine::run(receive, &mut link, no_resume(false), events.clone()).await.unwrap();
    assert_eq!((outcome.files, outcome.failures), (0, 1));
    let _ = link.close(Duration::from_millis(10)).await;
    let told = heard(&mut peer).await;
    assert!(told.iter().any(|m| matches!(m, Message::FileFailed { file: 0, message } if message.contains("failed verification"))), "{told:?}");
    assert!(
        told.iter().any(|m| matches!(m, Message::Finished { files: 0, failures: 1, .. })),
        "{told:?}"
    );
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());
}

#[tokio::test]
async fn a_sender_that_hangs_up_midway_is_an_error_and_leaves_nothing() {
    let scene = Scene::new();
    let (mut link, mut peer) = memory::raw_peer();
    say(&mut peer, &[Message::Plan { files: 1, bytes: 50_000 }, file_entry(0, "a.bin", 50_000)])
        .await;
    drop(peer);
    let receive = receiver(&scene.dst(), 1, false, None);
    let events = std::sync::Arc::new(Recorder::default());
    let err = soku_engine::run(receive, &mut link, no_resume(false), events).await.unwrap_err();
    assert_eq!(err.to_string(), "the sender closed the connection before the copy finished");
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());
}

#[tokio::test]
async fn a_sender_that_stops_answering_can_be_given_up_on_and_leaves_nothing() {
    let scene = Scene::new();
    let (mut link, mut peer) = memory::raw_peer();
    first_of_three_chunks(&mut peer, 7).await;
    // Then silence: the caller's deadline ends the receiver.
    let receive = receiver(&scene.dst(), 1, false, None);
    let events = std::sync::Arc::new(Recorder::default());
    let run = soku_engine::run(receive, &mut link, no_resume(false), events.clone());
    assert!(tokio::time::timeout(Duration::from_millis(300), run).await.is_err(), "it waits");
    assert!(
        events
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, soku_engine::events::TransferEvent::Planned { .. })),
        "the copy had started"
    );
    // The temporary file existed while it waited; cancelling removed it.
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());
    drop(peer);
}

#[tokio::test]
async fn a_copy_cancelled_midway_leaves_nothing_at_any_final_name() {
    for pair in
        [memory::ordered_pair, || memory::streams_pair(Duration::ZERO), || memory::striped_pair(2)]
    {
        let scene = Scene::new();
        let done = scene.file("small.bin", 1000, 1);
        let big = scene.file("big.bin", 64 * SMALL_CHUNKS as usize, 2);
        let send = sender(&[done.clone(), big.clone()], false).await;
        let receive = receiver(&scene.dst(), 2, false, None);
        let mut opts = options(false);
        // 8 Mbit/s: the 1 MiB file takes about a second; the copy is cancelled at 300 ms.
        opts.flags.rate_limit_bps = Some(8_000_000);
        let run = run_pair(pair(), send, receive, opts);
        assert!(tokio::time::timeout(Duration::from_millis(300), run).await.is_err());
        // Whatever finished is whole; nothing else has a name (the partial file of the
        // big one is kept, hidden, for a resume).
        let left = listing(&scene.dst());
        let named: Vec<&String> = left.iter().filter(|n| !n.ends_with(".soku-part")).collect();
        assert!(named.is_empty() || named == ["small.bin"], "{left:?}");
        if !named.is_empty() {
            assert_same(&done, &scene.dst().join("small.bin"));
        }
    }
}

#[tokio::test]
async fn a_sender_refuses_a_receiver_that_speaks_out_of_turn() {
    let scene = Scene::new();
    let src = scene.file("a.bin", 100_000, 3);
    let (mut link, mut peer) = memory::raw_peer();
    say(&mut peer, &[Message::Plan { files: 9, bytes: 9 }]).await;
    let send = sender(&[src], false).await;
    let events = std::sync::Arc::new(Recorder::default());
    let err = soku_engine::run(send, &mut link, no_resume(false), events).await.unwrap_err();
    assert!(err.to_string().contains("a plan"), "{err}");
    let _ = link.close(Duration::from_millis(10)).await;
    let told = heard(&mut peer).await;
    assert!(matches!(told.last(), Some(Message::Fatal { .. })), "{told:?}");
}

#[tokio::test]
async fn a_receiver_that_hangs_up_is_an_error_for_the_sender() {
    let scene = Scene::new();
    let src = scene.file("a.bin", 100_000, 3);
    let (mut link, peer) = memory::raw_peer();
    drop(peer);
    let send = sender(&[src], false).await;
    let events = std::sync::Arc::new(Recorder::default());
    let err = soku_engine::run(send, &mut link, no_resume(false), events).await.unwrap_err();
    assert!(matches!(err, EngineError::PeerClosed { .. } | EngineError::Link(_)), "{err}");
}

#[tokio::test]
async fn a_peer_that_stalls_is_given_up_on_after_the_stall_limit() {
    let scene = Scene::new();
    let (mut link, mut peer) = memory::raw_peer();
    // A plan, then nothing at all, not even a keep-alive: a stopped process.
    say(&mut peer, &[Message::Plan { files: 1, bytes: 1 }]).await;
    link.set_stall_limit(Some(Duration::from_millis(300)));
    let receive = receiver(&scene.dst(), 1, false, None);
    let events = std::sync::Arc::new(Recorder::default());
    let started = std::time::Instant::now();
    let err = soku_engine::run(receive, &mut link, no_resume(false), events).await.unwrap_err();
    assert!(matches!(err, EngineError::Link(LinkError::Stalled(_))), "{err}");
    assert!(err.to_string().contains("sent nothing for"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(peer);
}

/// Reads the next control frame the engine sent to the raw peer (bounded).
async fn next_message(peer: &mut DuplexStream) -> Message {
    let read = async {
        let mut prefix = [0u8; frame::PREFIX_LEN];
        peer.read_exact(&mut prefix).await.expect("a frame's prefix");
        let len = frame::payload_len(prefix, frame::MAX_CONTROL_FRAME).expect("a frame's length");
        let mut payload = vec![0u8; len];
        peer.read_exact(&mut payload).await.expect("a frame's payload");
        frame::decode_payload::<Message>(&payload).expect("a message")
    };
    tokio::time::timeout(Duration::from_secs(10), read).await.expect("a message in time")
}

/// A file complete at the target is held whole; the receiver tells the sender so, and
/// the sender sends nothing of it. Another program that writes four bytes into it after
/// the receiver hashed it must not end as a "verified" file that differs from the
/// source: the held bytes are hashed again before the file is done, and it fails.
#[tokio::test]
async fn held_bytes_rewritten_during_the_copy_fail_the_file() {
    let scene = Scene::new();
    let size = 3 * SMALL_CHUNKS as usize;
    let source = pattern(size, 7);
    let target = scene.dst().join("f.bin");
    std::fs::write(&target, &source).unwrap();
    let (mut link, mut peer) = memory::raw_peer();
    let receive = receiver(&scene.dst(), 1, false, None);
    let events = std::sync::Arc::new(Recorder::default());
    let recorded = events.clone();
    let run = tokio::spawn(async move {
        let out = soku_engine::run(receive, &mut link, options(false), recorded).await;
        let _ = link.close(Duration::from_millis(10)).await;
        out
    });
    say(
        &mut peer,
        &[Message::Plan { files: 1, bytes: size as u64 }, file_entry(0, "f.bin", size as u64)],
    )
    .await;
    let Message::Held(held) = next_message(&mut peer).await else { panic!("a held report first") };
    assert_eq!(held.chunks.len(), 3, "the whole file is held");
    write_at(&target, b"EVIL", 10);
    let hashes: Vec<[u8; 32]> = source.chunks(SMALL_CHUNKS as usize).map(chunk_hash).collect();
    let root = root_hash(size as u64, &hashes);
    say(
        &mut peer,
        &[
            Message::FileSummary { file: 0, root, sent: 0 },
            Message::EndOfManifest { files: 1, bytes: size as u64 },
        ],
    )
    .await;
    let told = heard(&mut peer).await;
    let outcome = run.await.unwrap().expect("the copy ends");
    assert!(
        told.iter().any(|m| matches!(m,
            Message::FileFailed { file: 0, message } if message.contains("another program wrote"))),
        "{told:?}"
    );
    assert_eq!(outcome.failures, 1);
    assert_eq!(events.failed(), [target.display().to_string()]);
}
