//! Copies that must succeed, byte for byte, over every kind of in-memory link.

use std::time::Duration;

use soku_engine::link::{memory, Link};

use crate::harness::*;

/// Makes the two ends of an in-memory link.
type MakePair = fn() -> (Link, Link);

/// The kinds of link; each test runs on all of them.
fn links() -> Vec<(&'static str, MakePair)> {
    vec![
        ("ordered", memory::ordered_pair),
        ("streams", || memory::streams_pair(Duration::ZERO)),
        // Control held back 5 ms per message: chunks arrive before their entries.
        ("streams, late control", || memory::streams_pair(Duration::from_millis(5))),
        // Control on its own pipe, chunks over three more (TLS over TCP).
        ("striped", || memory::striped_pair(3)),
    ]
}

#[tokio::test]
async fn upload_of_one_file_of_many_chunks() {
    for (kind, pair) in links() {
        let scene = Scene::new();
        // Not a multiple of the chunk size: the last chunk is short.
        let src = scene.file("one.bin", 40 * SMALL_CHUNKS as usize + 123, 1);
        let send = sender(std::slice::from_ref(&src), false).await;
        let receive = receiver(&scene.dst(), 1, false, None);
        let ran = run_pair(pair(), send, receive, options(false)).await;
        let sent = ran.sent.unwrap_or_else(|e| panic!("{kind}: sender: {e}"));
        let received = ran.received.unwrap_or_else(|e| panic!("{kind}: receiver: {e}"));
        assert_eq!(sent, received, "{kind}");
        assert_eq!((received.files, received.bytes, received.failures), (1, 40 * 16384 + 123, 0));
        assert_same(&src, &scene.dst().join("one.bin"));
        assert_eq!(listing(&scene.dst()), ["one.bin"], "{kind}");
    }
}

#[tokio::test]
async fn download_accepts_only_the_names_asked_for_and_copies_them() {
    for (kind, pair) in links() {
        let scene = Scene::new();
        let a = scene.file("a.txt", 1000, 2);
        let b = scene.file("b.txt", 0, 3);
        let send = sender(&[a.clone(), b.clone()], false).await;
        let receive = receiver(&scene.dst(), 2, false, Some(&["a.txt", "b.txt"]));
        let ran = run_pair(pair(), send, receive, options(false)).await;
        let received = ran.received.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!((received.files, received.failures), (2, 0), "{kind}");
        assert_same(&a, &scene.dst().join("a.txt"));
        assert_same(&b, &scene.dst().join("b.txt"));
    }
}

#[tokio::test]
async fn a_tree_with_many_files_and_empty_ones_arrives_whole() {
    for (kind, pair) in links() {
        let scene = Scene::new();
        let mut expected = vec!["tree/".to_string()];
        for d in 0..5 {
            expected.push(format!("tree/d{d}/"));
            for f in 0..40 {
                // Sizes from empty to several chunks, a few exactly one chunk.
                let len = match f % 5 {
                    0 => 0,
                    1 => SMALL_CHUNKS as usize,
                    _ => (f * 7919 + d * 104_729) % (3 * SMALL_CHUNKS as usize),
                };
                scene.file(&format!("tree/d{d}/f{f}"), len, (d * 40 + f) as u8);
                expected.push(format!("tree/d{d}/f{f}"));
            }
        }
        std::fs::create_dir(scene.src().join("tree/empty-dir")).unwrap();
        expected.push("tree/empty-dir/".into());
        expected.sort();
        let send = sender(&[scene.src().join("tree")], true).await;
        let receive = receiver(&scene.dst(), 1, true, None);
        let ran = run_pair(pair(), send, receive, options(true)).await;
        let received = ran.received.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!((received.files, received.failures), (200, 0), "{kind}");
        assert_eq!(listing(&scene.dst()), expected, "{kind}");
        for d in 0..5 {
            for f in 0..40 {
                let rel = format!("tree/d{d}/f{f}");
                assert_same(&scene.src().join(&rel), &scene.dst().join(&rel));
            }
        }
    }
}

// Unix modes; and a directory's times are set through a handle Windows opens only
// with backup semantics.
#[cfg(unix)]
#[tokio::test]
async fn preserve_keeps_times_and_modes_of_files_and_directories() {
    use std::os::unix::fs::PermissionsExt;
    let scene = Scene::new();
    let file = scene.file("dir/sub/x.bin", 50_000, 9);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let old = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let times = std::fs::FileTimes::new().set_modified(old).set_accessed(old);
    std::fs::File::options().write(true).open(&file).unwrap().set_times(times).unwrap();
    std::fs::set_permissions(scene.src().join("dir/sub"), std::fs::Permissions::from_mode(0o750))
        .unwrap();
    std::fs::File::open(scene.src().join("dir/sub")).unwrap().set_times(times).unwrap();
    let send = sender(&[scene.src().join("dir")], true).await;
    let receive = receiver(&scene.dst(), 1, true, None);
    let mut opts = options(true);
    opts.flags.preserve = true;
    let ran = run_pair(memory::streams_pair(Duration::ZERO), send, receive, opts).await;
    ran.received.unwrap();
    let copied = std::fs::metadata(scene.dst().join("dir/sub/x.bin")).unwrap();
    assert_eq!(copied.permissions().mode() & 0o7777, 0o640);
    assert_eq!(copied.modified().unwrap(), old);
    let dir = std::fs::metadata(scene.dst().join("dir/sub")).unwrap();
    assert_eq!(dir.permissions().mode() & 0o7777, 0o750);
    assert_eq!(
        dir.modified().unwrap(),
        old,
        "the directory's time survives the files written into it"
    );
}

#[tokio::test]
async fn compression_and_a_rate_limit_still_give_the_same_bytes() {
    let scene = Scene::new();
    let text = b"every chunk of this file compresses well\n".repeat(20_000);
    let src = scene.src().join("text.txt");
    std::fs::write(&src, &text).unwrap();
    let send = sender(std::slice::from_ref(&src), false).await;
    let receive = receiver(&scene.dst(), 1, false, None);
    let mut opts = options(false);
    opts.flags.compress = true;
    // 200 Mbit/s: 800 KB take ~30 ms, enough to go through the throttle.
    opts.flags.rate_limit_bps = Some(200_000_000);
    let ran = run_pair(memory::ordered_pair(), send, receive, opts).await;
    ran.received.unwrap();
    assert_same(&src, &scene.dst().join("text.txt"));
}

#[tokio::test]
async fn a_target_name_takes_the_single_source() {
    let scene = Scene::new();
    let src = scene.file("original.bin", 70_000, 4);
    let send = sender(std::slice::from_ref(&src), false).await;
    let receive = receiver(&scene.dst().join("renamed.bin"), 1, false, None);
    let ran = run_pair(memory::ordered_pair(), send, receive, options(false)).await;
    ran.received.unwrap();
    assert_same(&src, &scene.dst().join("renamed.bin"));
    assert_eq!(listing(&scene.dst()), ["renamed.bin"]);
}

/// The client's whole conversation, as `soku` and `soku serve` have it: the request,
/// then the copy. With control messages held back, the first chunks reach the server
/// before the request does (as on QUIC, where they travel on their own streams): the
/// server must read the request first and keep those chunks for the receiver.
#[tokio::test]
async fn chunks_that_overtake_the_request_wait_for_it() {
    use soku_proto::message::{Job, Message};
    let scene = Scene::new();
    let src = scene.file("early.bin", 30 * SMALL_CHUNKS as usize, 8);
    let opts = options(false);
    let (mut client, mut server) = memory::streams_pair(Duration::from_millis(20));
    let send = sender(std::slice::from_ref(&src), false).await;
    let dst = scene.dst();
    let serving = async {
        let request = soku_engine::role::read_request(&mut server).await.expect("a request");
        let (job, server_opts) = soku_engine::CopyOptions::from_request(request);
        assert!(matches!(job, Job::Receive { sources: 1, .. }));
        let receive = receiver(&dst, 1, false, None);
        let events = std::sync::Arc::new(Recorder::default());
        let out = soku_engine::run(receive, &mut server, server_opts, events).await;
        let _ = server.close(Duration::from_secs(5)).await;
        out
    };
    let asking = async {
        let job = Job::Receive { target: dst.display().to_string().into(), sources: 1 };
        client.tx.send_control(Message::Request(opts.request(job))).await.unwrap();
        let events = std::sync::Arc::new(Recorder::default());
        let out = soku_engine::run(send, &mut client, opts, events).await;
        let _ = client.close(Duration::from_secs(5)).await;
        out
    };
    let (served, asked) = tokio::join!(serving, asking);
    assert_eq!(served.unwrap(), asked.unwrap());
    assert_same(&src, &scene.dst().join("early.bin"));
}

/// A sender keeps a few congestion windows of chunks in flight where the link tells its
/// window, not the whole budget (`soku_engine::pipeline`); the same copy on a link that
/// tells none fills more, so the bound is the window's doing.
#[tokio::test]
async fn a_small_window_keeps_few_chunks_in_flight() {
    const CHUNK: u32 = 1 << 20;
    let mut opts = options(false);
    opts.flags.chunk_size = CHUNK;
    let mut peaks = Vec::new();
    for window in [Some(256 << 10), None] {
        // A scene each: a target already there would be resumed, not sent.
        let scene = Scene::new();
        let src = scene.file("big.bin", 24 * CHUNK as usize, 3);
        // Long enough that every chunk is read before the first is acknowledged, even on a
        // loaded machine: then only the window bounds what is held.
        let (pair, peak) = memory::windowed_pair(window, Duration::from_millis(200));
        let send = sender(std::slice::from_ref(&src), false).await;
        let receive = receiver_of_chunks(&scene.dst(), 1, false, None, CHUNK);
        let ran = run_pair(pair, send, receive, opts).await;
        ran.sent.unwrap_or_else(|e| panic!("window {window:?}: sender: {e}"));
        ran.received.unwrap_or_else(|e| panic!("window {window:?}: receiver: {e}"));
        assert_same(&src, &scene.dst().join("big.bin"));
        peaks.push(peak.load(std::sync::atomic::Ordering::Relaxed));
    }
    let floor = soku_engine::pipeline::FLOOR;
    assert!(peaks[0] <= floor, "{} bytes in flight with a 256 KiB window", peaks[0]);
    assert!(peaks[1] > 2 * floor, "without a window only {} bytes were in flight", peaks[1]);
}

/// A sender held to its window looks at the window again as it grows, not only when a
/// chunk is acknowledged (`WINDOW_RECHECK` in `send.rs`): on a long lossy path chunks
/// complete rounds after they were sent, while the window grows with every
/// acknowledgement. Here nothing is acknowledged for 2 s; the window grows from 256 KiB
/// (the 8 MiB floor of chunks ahead) to 4 MiB (16 MiB ahead) after 300 ms, and a second
/// later the sender must have handed over more than the floor.
#[tokio::test]
async fn a_growing_window_is_filled_before_any_chunk_is_acknowledged() {
    const CHUNK: u32 = 1 << 20;
    let mut opts = options(false);
    opts.flags.chunk_size = CHUNK;
    let scene = Scene::new();
    let src = scene.file("big.bin", 24 * CHUNK as usize, 5);
    let (pair, dial) = memory::dialled_pair(256 << 10, Duration::from_secs(2));
    let send = sender(std::slice::from_ref(&src), false).await;
    let receive = receiver_of_chunks(&scene.dst(), 1, false, None, CHUNK);
    let floor = soku_engine::pipeline::FLOOR;
    let grow = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = dial.held();
        dial.set(4 << 20);
        tokio::time::sleep(Duration::from_secs(1)).await;
        (before, dial.held())
    };
    let (ran, (before, after)) = tokio::join!(run_pair(pair, send, receive, opts), grow);
    ran.sent.unwrap_or_else(|e| panic!("sender: {e}"));
    ran.received.unwrap_or_else(|e| panic!("receiver: {e}"));
    assert_same(&src, &scene.dst().join("big.bin"));
    assert!(before <= floor, "{before} bytes handed over with a 256 KiB window");
    assert!(after > floor + u64::from(CHUNK), "{after} bytes handed over with a 4 MiB window");
}
