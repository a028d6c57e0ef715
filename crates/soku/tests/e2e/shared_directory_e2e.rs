//! Copies into a directory other users write to as well: a sticky directory such as
//! `/tmp`, where each user may remove only their own files. Another user's file at a
//! file's temporary name (`.NAME.soku-part`) stays there; scp copies all the same, and
//! so must soku, without ever continuing or renaming that file.
//!
//! The copies run as `nobody` (root may remove anything in a sticky directory, so the
//! case cannot arise for it), from here to here: the receiving side is the same
//! `soku serve` a remote copy runs.

use std::os::unix::fs::{chown, symlink};
use std::path::Path;
use std::process::Command;

use crate::common::procs::{kill_when_verified, summary};
use crate::common::{assert_same_file, chmod, data, listing, soku_bin, write};

const NOBODY: u32 = 65534;
/// 24 MiB at `-l 40000` (5 MB/s): about five seconds, long enough to stop half way.
const SIZE: usize = 24 << 20;
const HALF: u64 = SIZE as u64 / 2;

/// `soku --json` run as `nobody`, with a cache directory it may write; unbounded (the
/// caller bounds it).
fn soku_as_nobody(top: &Path) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args([format!("--reuid={NOBODY}"), format!("--regid={NOBODY}"), "--clear-groups".into()]);
    cmd.arg(soku_bin()).arg("--json");
    cmd.env("XDG_CACHE_HOME", top.join("cache")).env("XDG_CONFIG_HOME", top.join("cache"));
    cmd
}

/// Another user's regular file and another user's symlink sit at the temporary names
/// of two files: both files arrive whole under their final names, owned by the copying
/// user; an interrupted copy of the large one resumes from the user's own temporary
/// name; the planted file and link are left as they were.
#[test]
fn planted_temporary_names_in_a_sticky_directory_are_stepped_around() {
    let top = tempfile::tempdir().expect("tempdir");
    let top = top.path();
    chmod(top, 0o755);
    let cache = top.join("cache");
    std::fs::create_dir(&cache).expect("mkdir");
    chown(&cache, Some(NOBODY), Some(NOBODY)).expect("chown");
    let src = top.join("src");
    let big = src.join("report.bin");
    let small = src.join("notes.txt");
    write(&big, &data(SIZE, 31));
    write(&small, b"five\n");
    let shared = top.join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    chmod(&shared, 0o1777);
    // Planted by root: a file with a writable mode, and a link to a file of its own.
    let planted = shared.join(".report.bin.soku-part");
    write(&planted, b"planted");
    chmod(&planted, 0o666);
    let bait = top.join("bait");
    write(&bait, b"bait");
    let planted_link = shared.join(".notes.txt.soku-part");
    symlink(&bait, &planted_link).expect("symlink");

    let mut first = soku_as_nobody(top);
    first.args(["-l", "40000"]).arg(&big).arg(&small).arg(&shared);
    let killed = kill_when_verified(first, HALF, |client| client);
    assert!(!killed.ok, "killed");
    assert!(!shared.join("report.bin").exists(), "nothing at the final name");
    let own = shared.join(format!(".report.bin.soku-part-{NOBODY}"));
    assert!(own.is_file(), "the partial file is at the user's own temporary name");

    let mut again = soku_as_nobody(top);
    again.arg(&big).arg(&small).arg(&shared);
    let out = soku_testkit::cmd::output(again.stdin(std::process::Stdio::null()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the rerun succeeds\n{stderr}");
    let (bytes, resumed) = summary(&stderr).expect("a summary");
    assert_eq!(bytes, SIZE as u64 + 5);
    assert!(resumed >= killed.verified_at_kill, "resumed {resumed} of {}", killed.verified_at_kill);

    assert_same_file(&big, &shared.join("report.bin"));
    assert_same_file(&small, &shared.join("notes.txt"));
    for arrived in ["report.bin", "notes.txt"] {
        let st = std::fs::metadata(shared.join(arrived)).expect("stat");
        assert_eq!(std::os::unix::fs::MetadataExt::uid(&st), NOBODY, "{arrived}");
    }
    assert_eq!(std::fs::read(&planted).expect("planted"), b"planted", "left as it was");
    assert_eq!(std::fs::read_link(&planted_link).expect("link"), bait);
    assert_eq!(std::fs::read(&bait).expect("bait"), b"bait");
    assert_eq!(
        listing(&shared),
        [".notes.txt.soku-part", ".report.bin.soku-part", "notes.txt", "report.bin"],
        "no partial file of the copy is left"
    );
}
