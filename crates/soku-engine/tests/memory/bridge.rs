//! A copy between two other hosts through this one: the origin's sender and the
//! destination's receiver over two links, joined by the bridge. Each side is the real
//! role; the bridge stores nothing and the destination verifies every chunk as sent
//! by the origin.

use std::sync::Arc;
use std::time::Duration;

use soku_engine::link::{memory, Link};
use soku_engine::{bridge, Outcome};
use soku_proto::path::NameFilter;

use crate::harness::*;

struct Bridged {
    sent: Outcome,
    passed: Outcome,
    received: Outcome,
}

/// Copies the scene's `src` tree into its `dst` through a bridge, the origin's chunks
/// on `origin` (a QUIC-like pair, or ordered) and the destination's on `destination`.
async fn through(
    scene: &Scene,
    origin: (Link, Link),
    destination: (Link, Link),
    opts: soku_engine::CopyOptions,
) -> Result<Bridged, String> {
    let (mut sender_end, mut origin_end) = origin;
    let (mut destination_end, mut receiver_end) = destination;
    let send = sender(&[scene.src()], true).await;
    let receive = receiver(&scene.dst(), 1, true, None);
    let names = Some(NameFilter::for_requested([b"src".as_slice()]));
    let events = Arc::new(Recorder::default());
    let (sent, passed, received) = tokio::join!(
        async {
            let out = soku_engine::run(send, &mut sender_end, opts, events.clone()).await;
            let _ = sender_end.close(Duration::from_secs(5)).await;
            out
        },
        async {
            let out = bridge::run(
                &mut origin_end,
                &mut destination_end,
                names,
                SMALL_CHUNKS,
                events.clone(),
            )
            .await;
            let _ = origin_end.close(Duration::from_secs(5)).await;
            let _ = destination_end.close(Duration::from_secs(5)).await;
            out
        },
        async {
            let out = soku_engine::run(receive, &mut receiver_end, opts, events.clone()).await;
            let _ = receiver_end.close(Duration::from_secs(5)).await;
            out
        },
    );
    Ok(Bridged {
        sent: sent.map_err(|e| format!("origin: {e}"))?,
        passed: passed.map_err(|e| format!("bridge: {e}"))?,
        received: received.map_err(|e| format!("destination: {e}"))?,
    })
}

fn tree(scene: &Scene) {
    scene.file("a.bin", 5 * SMALL_CHUNKS as usize + 17, 1);
    scene.file("d/b.bin", 40 * SMALL_CHUNKS as usize, 2);
    scene.file("d/e/empty", 0, 3);
    scene.file("z.txt", 10, 4);
}

#[tokio::test]
async fn a_tree_passes_through_whichever_links_carry_each_side() {
    for (name, origin, destination) in [
        ("quic to ordered", memory::streams_pair(Duration::from_millis(2)), memory::ordered_pair()),
        ("ordered to quic", memory::ordered_pair(), memory::streams_pair(Duration::from_millis(2))),
        (
            "quic to quic",
            memory::streams_pair(Duration::ZERO),
            memory::streams_pair(Duration::ZERO),
        ),
    ] {
        let scene = Scene::new();
        tree(&scene);
        let done = through(&scene, origin, destination, options(true)).await.expect(name);
        assert_eq!(done.received.files, 4, "{name}");
        assert_eq!((done.sent.files, done.passed.files), (4, 4), "{name}");
        assert_eq!(listing(&scene.dst().join("src")), listing(&scene.src()), "{name}");
        let b = std::fs::read(scene.dst().join("src/d/b.bin")).unwrap();
        assert_eq!(b, pattern(40 * SMALL_CHUNKS as usize, 2), "{name}");
    }
}

#[tokio::test]
async fn what_the_destination_holds_is_not_sent_again() {
    let scene = Scene::new();
    tree(&scene);
    let first = through(&scene, memory::ordered_pair(), memory::ordered_pair(), options(true));
    first.await.expect("first copy");
    // One file changed in its middle: only its changed chunk travels again.
    let mut bytes = pattern(40 * SMALL_CHUNKS as usize, 2);
    bytes[20 * SMALL_CHUNKS as usize] ^= 1;
    std::fs::write(scene.src().join("d/b.bin"), &bytes).unwrap();
    let again = through(&scene, memory::ordered_pair(), memory::ordered_pair(), options(true));
    let again = again.await.expect("second copy");
    let whole = (45 * SMALL_CHUNKS + 17 + 10) as u64;
    assert_eq!(again.received.bytes, whole);
    assert_eq!(again.sent.resumed, whole - u64::from(SMALL_CHUNKS), "one chunk sent");
    assert_eq!(again.passed.resumed, again.sent.resumed, "the bridge counts what was there");
    assert_eq!(std::fs::read(scene.dst().join("src/d/b.bin")).unwrap(), bytes);
}

#[tokio::test]
async fn an_origin_that_sends_other_names_is_stopped() {
    let scene = Scene::new();
    tree(&scene);
    let (mut sender_end, mut origin_end) = memory::ordered_pair();
    let (mut destination_end, mut receiver_end) = memory::ordered_pair();
    let send = sender(&[scene.src()], true).await;
    let receive = receiver(&scene.dst(), 1, true, None);
    // The user asked for `other`, the origin sends `src`.
    let names = Some(NameFilter::for_requested([b"other".as_slice()]));
    let events = Arc::new(Recorder::default());
    let opts = options(true);
    let (_, passed, received) = tokio::join!(
        soku_engine::run(send, &mut sender_end, opts, events.clone()),
        bridge::run(&mut origin_end, &mut destination_end, names, SMALL_CHUNKS, events.clone()),
        soku_engine::run(receive, &mut receiver_end, opts, events.clone()),
    );
    let err = passed.expect_err("refused").to_string();
    assert!(err.contains("src"), "{err}");
    assert!(received.is_err(), "the destination is told");
    assert!(listing(&scene.dst()).is_empty(), "{:?}", listing(&scene.dst()));
}
