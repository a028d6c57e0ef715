//! `soku sync` through both roles: the quick check skips what is unchanged without
//! reading it, `--checksum` compares by hash, a dry run changes nothing, and delete
//! removes only what the source lacks and no rule protects.

use std::path::{Path, PathBuf};
use std::time::Duration;

use soku_engine::ahead::Walked;
use soku_engine::events::TransferEvent;
use soku_engine::filter::Filter;
use soku_engine::link::memory;
use soku_engine::{Outcome, Role};
use soku_proto::path::Target;
use soku_proto::receive::Receiver;
use soku_proto::sync::{FilterRule, SkipReason, SyncRules};

use crate::harness::*;

/// Syncs the contents of the scene's source (`src/`) into its target under `rules`.
async fn sync(scene: &Scene, rules: &SyncRules) -> Ran {
    let source = PathBuf::from(format!("{}/", scene.src().display()));
    let filter = Filter::new(&rules.filter).unwrap();
    let walked = Walked::walk_sync(vec![source], rules.clone(), filter, None).await.unwrap();
    let target = Target::IntoDir(scene.dst());
    let receiver = Box::new(Receiver::new(target, None, true, SMALL_CHUNKS).unwrap());
    let root = scene.dst();
    let receive =
        Role::Receive { receiver, root, beneath: None, blind: false, sync: Some(rules.clone()) };
    let mut opts = options(true);
    opts.flags.preserve = true;
    run_pair(memory::streams_pair(Duration::ZERO), Role::Send(walked), receive, opts).await
}

fn outcome(ran: &Ran) -> Outcome {
    let sent = *ran.sent.as_ref().map_err(|e| e.to_string()).expect("sender");
    let received = *ran.received.as_ref().map_err(|e| e.to_string()).expect("receiver");
    assert_eq!((sent.skipped, sent.deleted), (received.skipped, received.deleted), "both count");
    received
}

fn skipped(events: &Recorder) -> Vec<(String, SkipReason)> {
    let events = events.0.lock().unwrap();
    let mut out: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            TransferEvent::Skipped { path, reason } => Some((slashes(path), *reason)),
            _ => None,
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn deleted(events: &Recorder) -> Vec<String> {
    let events = events.0.lock().unwrap();
    events
        .iter()
        .filter_map(|e| match e {
            TransferEvent::Deleted { path } => Some(slashes(path)),
            _ => None,
        })
        .collect()
}

/// Makes `path`'s bytes differ without changing its size or modification time: only a
/// hash can tell.
fn change_in_secret(path: &Path) {
    let md = std::fs::metadata(path).unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(path, &bytes).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(md.modified().unwrap()).unwrap();
}

#[tokio::test]
async fn a_second_sync_skips_what_is_unchanged_and_sends_what_changed() {
    let scene = Scene::new();
    scene.file("a.bin", 5 * SMALL_CHUNKS as usize, 1);
    scene.file("d/b.bin", 3 * SMALL_CHUNKS as usize, 2);
    scene.file("d/empty", 0, 3);
    let rules = SyncRules { contents: true, ..SyncRules::default() };
    let first = outcome(&sync(&scene, &rules).await);
    assert_eq!((first.files, first.skipped), (3, 0));
    let again = sync(&scene, &rules).await;
    assert_eq!((outcome(&again).files, outcome(&again).skipped), (0, 3), "all unchanged");
    assert_eq!(outcome(&again).bytes, 0, "nothing read or sent");

    // One file grows; one is changed without its size or time changing.
    scene.file("a.bin", 6 * SMALL_CHUNKS as usize, 9);
    change_in_secret(&scene.dst().join("d/b.bin"));
    let third = sync(&scene, &rules).await;
    assert_eq!((outcome(&third).files, outcome(&third).skipped), (1, 2));
    assert_eq!(
        std::fs::read(scene.dst().join("a.bin")).unwrap(),
        pattern(6 * SMALL_CHUNKS as usize, 9)
    );
    let quick = std::fs::read(scene.dst().join("d/b.bin")).unwrap();
    assert_ne!(
        quick,
        pattern(3 * SMALL_CHUNKS as usize, 2),
        "the quick check trusts size and time"
    );

    let checksum = SyncRules { checksum: true, ..rules.clone() };
    let fourth = outcome(&sync(&scene, &checksum).await);
    assert_eq!(fourth.skipped, 0);
    assert_eq!(
        std::fs::read(scene.dst().join("d/b.bin")).unwrap(),
        pattern(3 * SMALL_CHUNKS as usize, 2)
    );
    assert!(fourth.resumed > 0, "chunks that matched by hash were not sent");
}

#[tokio::test]
async fn update_keeps_what_is_newer_at_the_target() {
    let scene = Scene::new();
    let src = scene.file("f.txt", 100, 1);
    let rules = SyncRules { contents: true, update: true, ..SyncRules::default() };
    outcome(&sync(&scene, &rules).await);
    let at = scene.dst().join("f.txt");
    std::fs::write(&at, b"edited at the target").unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(60);
    std::fs::File::options().write(true).open(&at).unwrap().set_modified(later).unwrap();
    let ran = sync(&scene, &rules).await;
    assert_eq!(outcome(&ran).skipped, 1);
    assert_eq!(skipped(&ran.sender_events), [(slashes(src.display()), SkipReason::NewerAtTarget)]);
    assert_eq!(std::fs::read(&at).unwrap(), b"edited at the target");
}

#[tokio::test]
async fn delete_removes_only_what_the_source_lacks_and_rules_do_not_protect() {
    let scene = Scene::new();
    scene.file("keep.txt", 10, 1);
    scene.file("d/keep.txt", 10, 2);
    let rules = SyncRules {
        contents: true,
        delete: true,
        filter: vec![FilterRule::Exclude("*.local".into())],
        ..SyncRules::default()
    };
    outcome(&sync(&scene, &rules).await);
    let dst = scene.dst();
    std::fs::write(dst.join("extra.txt"), b"x").unwrap();
    std::fs::create_dir_all(dst.join("d/old/deeper")).unwrap();
    std::fs::write(dst.join("d/old/deeper/f"), b"x").unwrap();
    std::fs::write(dst.join("d/mine.local"), b"protected").unwrap();
    let linked = symlink_if_allowed(Path::new("/"), &dst.join("d/link"));

    let dry = SyncRules { dry_run: true, ..rules.clone() };
    let listed = sync(&scene, &dry).await;
    let shown = |rel: &str| slashes(dst.join(rel).display());
    let mut want = vec![shown("d/old"), shown("extra.txt")];
    if linked {
        want.insert(0, shown("d/link"));
    }
    assert_eq!(deleted(&listed.receiver_events), want);
    assert_eq!(outcome(&listed).deleted as usize, want.len());
    assert!(dst.join("d/old/deeper/f").exists() && dst.join("extra.txt").exists(), "a dry run");

    let ran = sync(&scene, &rules).await;
    assert_eq!(deleted(&ran.receiver_events), want);
    let wire = if linked { &["d/link", "d/old", "extra.txt"][..] } else { &["d/old", "extra.txt"] };
    assert_eq!(deleted(&ran.sender_events), wire, "told by wire path");
    assert!(!dst.join("d/old").exists() && !dst.join("extra.txt").exists());
    assert!(std::fs::symlink_metadata(dst.join("d/link")).is_err(), "the link itself");
    assert!(Path::new("/").exists());
    assert_eq!(std::fs::read(dst.join("d/mine.local")).unwrap(), b"protected");
    assert!(dst.join("d/keep.txt").exists() && dst.join("keep.txt").exists());
}

#[tokio::test]
async fn a_dry_run_lists_what_would_be_sent_and_writes_nothing() {
    let scene = Scene::new();
    scene.file("a.txt", 10, 1);
    scene.file("new/b.txt", 10, 2);
    let rules = SyncRules { contents: true, ..SyncRules::default() };
    // Only a.txt is at the target, unchanged.
    std::fs::remove_dir_all(scene.dst()).unwrap();
    std::fs::create_dir(scene.dst()).unwrap();
    outcome(&sync(&scene, &rules).await);
    std::fs::remove_dir_all(scene.dst().join("new")).unwrap();
    scene.file("c.txt", 0, 3);
    let dry = SyncRules { dry_run: true, ..rules };
    let ran = sync(&scene, &dry).await;
    let dst = |rel: &str| slashes(scene.dst().join(rel).display());
    assert_eq!(
        skipped(&ran.receiver_events),
        [
            (dst("a.txt"), SkipReason::Unchanged),
            (dst("c.txt"), SkipReason::WouldSend),
            (dst("new/b.txt"), SkipReason::WouldSend),
        ]
    );
    assert_eq!(outcome(&ran).files, 0);
    assert!(!scene.dst().join("new").exists() && !scene.dst().join("c.txt").exists());
}
