//! The browse job's calls on real files, with and without fences.

use std::path::Path;
use std::sync::Arc;

use soku_proto::browse::{Answer, Call};
use soku_proto::name::Name;
use tokio::sync::mpsc;

use super::super::fence::Fence;
use super::answer;

fn ask(call: Call, fence: &Fence) -> Vec<Answer> {
    let (tx, mut rx) = mpsc::channel(1024);
    answer(&call, fence, &tx);
    drop(tx);
    let mut out = Vec::new();
    while let Ok(answer) = rx.try_recv() {
        out.push(answer);
    }
    out
}

fn name(path: &Path) -> Name {
    Name::from_bytes(path.as_os_str().as_encoded_bytes().to_vec())
}

fn failed(answers: &[Answer]) -> String {
    match answers {
        [Answer::Failed { message }] => message.clone(),
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn rooted(dir: &Path) -> Fence {
    let real = std::fs::canonicalize(dir).expect("canonical");
    let root = soku_engine::fsops::TargetDir::open(&real).expect("root");
    Fence { root: Some(Arc::new(root)), ..Fence::default() }
}

#[test]
fn a_listing_of_many_entries_comes_in_batches_with_every_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for i in 0..300 {
        std::fs::write(tmp.path().join(format!("f{i:03}")), b"x").expect("write");
    }
    std::os::unix::fs::symlink("f000", tmp.path().join("link")).expect("link");
    let answers = ask(Call::List { path: name(tmp.path()) }, &Fence::default());
    assert!(answers.len() >= 3, "{} batches", answers.len());
    let mut names = Vec::new();
    for (i, answer) in answers.iter().enumerate() {
        let Answer::Listing { entries, more } = answer else { panic!("{answer:?}") };
        assert_eq!(*more, i + 1 < answers.len());
        names.extend(entries.iter().map(|e| (e.name.to_string(), e.target.clone())));
    }
    // 300 files, the link, `.` and `..`.
    assert_eq!(names.len(), 303);
    assert!(names.contains(&("link".into(), Some(Name::from("f000")))));
}

#[test]
fn metadata_calls_change_the_files_they_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let none = Fence::default();
    let dir = tmp.path().join("d");
    assert_eq!(ask(Call::MakeDir { path: name(&dir), mode: 0o750 }, &none), [Answer::Done]);
    assert!(dir.is_dir());
    std::fs::write(dir.join("a"), b"hello").expect("write");
    std::fs::write(dir.join("b"), b"taken").expect("write");
    let rename = Call::Rename { from: name(&dir.join("a")), to: name(&dir.join("b")) };
    assert!(failed(&ask(rename, &none)).contains("already exists"), "never over another");
    let rename = Call::Rename { from: name(&dir.join("a")), to: name(&dir.join("c")) };
    assert_eq!(ask(rename, &none), [Answer::Done]);
    assert_eq!(std::fs::read(dir.join("c")).expect("read"), b"hello");
    assert_eq!(ask(Call::Chmod { path: name(&dir.join("c")), mode: 0o600 }, &none), [Answer::Done]);
    let [Answer::Stat { entry }] =
        &ask(Call::Stat { path: name(&dir.join("c")), follow: true }, &none)[..]
    else {
        panic!("no stat")
    };
    assert_eq!((entry.mode & 0o7777, entry.size), (0o600, 5));
    assert!(failed(&ask(Call::Remove { path: name(&dir) }, &none)).contains("is a directory"));
    assert!(failed(&ask(Call::RemoveDir { path: name(&dir) }, &none)).contains("not empty"));
    for file in ["b", "c"] {
        assert_eq!(ask(Call::Remove { path: name(&dir.join(file)) }, &none), [Answer::Done]);
    }
    assert_eq!(ask(Call::RemoveDir { path: name(&dir) }, &none), [Answer::Done]);
    assert!(!dir.exists());
    let [Answer::Space(space)] = &ask(Call::Space { path: name(tmp.path()) }, &none)[..] else {
        panic!("no space")
    };
    assert!(space.total > 0 && space.available <= space.total);
    let missing = failed(&ask(Call::Directory { path: name(&tmp.path().join("none")) }, &none));
    assert!(missing.contains("none: no such directory"), "{missing}");
}

#[test]
fn beneath_a_root_nothing_outside_is_reached() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("in")).expect("mkdir");
    std::fs::write(tmp.path().join("secret"), b"s").expect("write");
    std::os::unix::fs::symlink(tmp.path(), root.join("out")).expect("link");
    std::os::unix::fs::symlink(tmp.path().join("secret"), root.join("secret-link")).expect("link");
    let fence = rooted(&root);
    // `..` stops at the root, as at `/`; paths are told from the root.
    let dir = |p: &str| ask(Call::Directory { path: Name::from(p) }, &fence);
    assert_eq!(dir("/in/../../.."), [Answer::Path { path: Name::from("/") }]);
    assert_eq!(dir("in"), [Answer::Path { path: Name::from("/in") }]);
    assert!(failed(&dir("/out")).contains("no such directory"));
    for call in [
        Call::List { path: Name::from("/out") },
        Call::Stat { path: Name::from("/secret-link"), follow: true },
        Call::Chmod { path: Name::from("/secret-link"), mode: 0o777 },
        Call::Remove { path: Name::from("/out/secret") },
        Call::MakeDir { path: Name::from("/out/made"), mode: 0o755 },
        Call::Rename { from: Name::from("/out/secret"), to: Name::from("/in/got") },
        Call::Space { path: Name::from("/out") },
    ] {
        let said = failed(&ask(call.clone(), &fence));
        assert!(said.contains("outside"), "{call:?}: {said}");
    }
    assert!(tmp.path().join("secret").exists());
    assert!(!tmp.path().join("made").exists());
    let mode = std::fs::metadata(tmp.path().join("secret")).expect("stat");
    assert_ne!(std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777, 0o777);
    // The link itself is listed and removed, never what it points to.
    let [Answer::Stat { entry }] =
        &ask(Call::Stat { path: Name::from("/secret-link"), follow: false }, &fence)[..]
    else {
        panic!("no stat")
    };
    assert!(entry.is_link());
    assert_eq!(ask(Call::Remove { path: Name::from("/secret-link") }, &fence), [Answer::Done]);
    assert!(tmp.path().join("secret").exists());
    assert!(failed(&ask(Call::RemoveDir { path: Name::from("/") }, &fence)).contains("root"));
}

#[test]
fn read_only_and_write_only_servers_refuse_what_they_must() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("kept"), b"k").expect("write");
    let read_only = Fence { read_only: true, ..Fence::default() };
    let write_only = Fence { write_only: true, ..Fence::default() };
    let kept = name(&tmp.path().join("kept"));
    assert!(failed(&ask(Call::Remove { path: kept.clone() }, &read_only)).contains("read-only"));
    let made = Call::MakeDir { path: name(&tmp.path().join("m")), mode: 0o755 };
    assert!(failed(&ask(made.clone(), &read_only)).contains("read-only"));
    assert!(matches!(
        ask(Call::List { path: name(tmp.path()) }, &read_only)[0],
        Answer::Listing { .. }
    ));
    assert!(failed(&ask(Call::List { path: name(tmp.path()) }, &write_only)).contains("write-only"));
    assert!(failed(&ask(Call::Remove { path: kept }, &write_only)).contains("removes nothing"));
    assert_eq!(ask(made, &write_only), [Answer::Done]);
    assert!(tmp.path().join("kept").exists());
}
