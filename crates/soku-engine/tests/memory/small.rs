//! Trees of many small files: far more files than the sender announces at once and
//! than the receiver prepares at once, empty files (whose summary can come before their
//! storage exists), directories alone, `-p`, and resume of a tree cut off midway.

use std::time::Duration;

use soku_engine::link::{memory, Link};

use crate::harness::*;

type MakePair = fn() -> (Link, Link);

fn links() -> Vec<(&'static str, MakePair)> {
    vec![
        ("ordered", memory::ordered_pair),
        ("streams", || memory::streams_pair(Duration::ZERO)),
        ("streams, late control", || memory::streams_pair(Duration::from_millis(2))),
        ("striped", || memory::striped_pair(3)),
    ]
}

/// Writes `files` files under `src/tree` in `dirs` directories, sizes from empty to a
/// few KiB (every seventh empty, a few of exactly one chunk); returns their paths
/// relative to the scene's source directory, and the expected listing of the target.
fn small_tree(scene: &Scene, files: usize, dirs: usize) -> (Vec<String>, Vec<String>) {
    let mut rels = Vec::new();
    let mut listing = vec!["tree/".to_string()];
    for d in 0..dirs {
        listing.push(format!("tree/d{d:02}/"));
    }
    for f in 0..files {
        let len = match f % 7 {
            0 => 0,
            1 if f % 91 == 1 => SMALL_CHUNKS as usize,
            _ => (f * 7919) % 9000 + 1,
        };
        let rel = format!("tree/d{:02}/f{f:05}", f % dirs);
        scene.file(&rel, len, (f % 251) as u8);
        listing.push(rel.clone());
        rels.push(rel);
    }
    listing.sort();
    (rels, listing)
}

#[tokio::test]
async fn thousands_of_small_files_arrive_whole_over_every_link() {
    for (kind, pair) in links() {
        let scene = Scene::new();
        // More than the sender announces ahead (1024 at most) and than the receiver
        // prepares at once.
        let (rels, expected) = small_tree(&scene, 1500, 30);
        let send = sender(&[scene.src().join("tree")], true).await;
        let receive = receiver(&scene.dst(), 1, true, None);
        let ran = run_pair(pair(), send, receive, options(true)).await;
        let sent = ran.sent.unwrap_or_else(|e| panic!("{kind}: sender: {e}"));
        let received = ran.received.unwrap_or_else(|e| panic!("{kind}: receiver: {e}"));
        assert_eq!(sent, received, "{kind}");
        assert_eq!((received.files, received.failures), (1500, 0), "{kind}");
        // Every file, and nothing else (no temporary file left behind).
        assert_eq!(listing(&scene.dst()), expected, "{kind}");
        for rel in &rels {
            assert_same(&scene.src().join(rel), &scene.dst().join(rel));
        }
    }
}

#[tokio::test]
async fn hundreds_of_empty_files_each_land_once_their_storage_exists() {
    for (kind, pair) in links() {
        let scene = Scene::new();
        for f in 0..400 {
            scene.file(&format!("empties/e{f:03}"), 0, 0);
        }
        let send = sender(&[scene.src().join("empties")], true).await;
        let receive = receiver(&scene.dst(), 1, true, None);
        let ran = run_pair(pair(), send, receive, options(true)).await;
        let received = ran.received.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!((received.files, received.bytes, received.failures), (400, 0, 0), "{kind}");
        let listed = listing(&scene.dst());
        assert_eq!(listed.len(), 401, "{kind}: the directory and 400 files, nothing else");
        assert!(listed.iter().all(|p| !p.contains("soku-part")), "{kind}");
    }
}

#[tokio::test]
async fn a_tree_of_directories_only_is_made() {
    for (kind, pair) in links() {
        let scene = Scene::new();
        let mut expected = vec!["top/".to_string()];
        for a in 0..10 {
            for b in 0..5 {
                std::fs::create_dir_all(scene.src().join(format!("top/a{a}/b{b}"))).unwrap();
                expected.push(format!("top/a{a}/b{b}/"));
            }
            expected.push(format!("top/a{a}/"));
        }
        expected.sort();
        let send = sender(&[scene.src().join("top")], true).await;
        let receive = receiver(&scene.dst(), 1, true, None);
        let ran = run_pair(pair(), send, receive, options(true)).await;
        let received = ran.received.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!((received.files, received.failures), (0, 0), "{kind}");
        assert_eq!(listing(&scene.dst()), expected, "{kind}");
    }
}

// Unix modes.
#[cfg(unix)]
#[tokio::test]
async fn preserve_applies_to_every_small_file() {
    use std::os::unix::fs::PermissionsExt;
    let scene = Scene::new();
    let (rels, _) = small_tree(&scene, 300, 6);
    let old = std::time::UNIX_EPOCH + Duration::from_secs(1_200_000_000);
    for (n, rel) in rels.iter().enumerate() {
        let path = scene.src().join(rel);
        let mode = [0o600, 0o640, 0o755][n % 3];
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let when = old + Duration::from_secs(n as u64);
        let times = std::fs::FileTimes::new().set_modified(when).set_accessed(when);
        std::fs::File::options().write(true).open(&path).unwrap().set_times(times).unwrap();
    }
    let send = sender(&[scene.src().join("tree")], true).await;
    let receive = receiver(&scene.dst(), 1, true, None);
    let mut opts = options(true);
    opts.flags.preserve = true;
    let ran = run_pair(memory::streams_pair(Duration::from_millis(1)), send, receive, opts).await;
    ran.received.unwrap();
    for (n, rel) in rels.iter().enumerate() {
        let copied = std::fs::metadata(scene.dst().join(rel)).unwrap();
        assert_eq!(copied.permissions().mode() & 0o7777, [0o600, 0o640, 0o755][n % 3], "{rel}");
        assert_eq!(copied.modified().unwrap(), old + Duration::from_secs(n as u64), "{rel}");
        assert_same(&scene.src().join(rel), &scene.dst().join(rel));
    }
}

#[tokio::test]
async fn a_tree_cut_off_midway_is_resumed_and_only_the_rest_is_sent() {
    let scene = Scene::new();
    // 600 files of 4 KiB: 2.4 MB, about 2.5 s at the 8 Mbit/s below; cut off once the
    // first files landed (a fixed time found none on a loaded machine under Wine).
    for f in 0..600 {
        scene.file(&format!("tree/d{:02}/f{f:04}", f % 12), 4096, (f % 251) as u8);
    }
    let top = scene.src().join("tree");
    let send = sender(std::slice::from_ref(&top), true).await;
    let receive = receiver(&scene.dst(), 1, true, None);
    let mut opts = options(true);
    opts.flags.rate_limit_bps = Some(8_000_000);
    let run = run_pair(memory::streams_pair(Duration::ZERO), send, receive, opts);
    let landed = || listing(&scene.dst()).iter().filter(|p| p.contains("/f")).count();
    let first_files = async {
        // Bounded: 3000 looks of 10 ms, far beyond the copy's 2.5 s.
        for _ in 0..3000 {
            if landed() >= 10 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no file landed in 30 s");
    };
    tokio::select! {
        _ = run => panic!("the copy ended before it was cut off"),
        () = first_files => {}
    }
    let landed = landed();
    assert!((10..600).contains(&landed), "{landed} files landed before the cut");

    let send = sender(std::slice::from_ref(&top), true).await;
    let receive = receiver(&scene.dst(), 1, true, None);
    let ran = run_pair(memory::streams_pair(Duration::ZERO), send, receive, options(true)).await;
    let sent = ran.sent.map_err(|e| e.to_string()).expect("sender");
    let received = ran.received.map_err(|e| e.to_string()).expect("receiver");
    assert_eq!(sent.resumed, received.resumed);
    assert_eq!((received.files, received.bytes, received.failures), (600, 600 * 4096, 0));
    assert!(sent.resumed > 0, "what arrived before the cut is not sent again");
    assert!(sent.resumed < 600 * 4096, "the rest is sent");
    let after = listing(&scene.dst());
    assert!(after.iter().all(|p| !p.contains("soku-part")), "no partial file left: {after:?}");
    for f in 0..600 {
        let rel = format!("tree/d{:02}/f{f:04}", f % 12);
        assert_same(&scene.src().join(&rel), &scene.dst().join(&rel));
    }
}
