//! What the user reads when the target cannot take a file, through a real sshd: the line
//! names the side, the target's path (not the local source), the problem and what to do;
//! the exit code is 1 (3 for a full disk); nothing appears under a final name; and where a later run can
//! resume, the partial file is kept.
//!
//! A full disk and a read-only file system are small tmpfs mounts made by the test
//! (root needed, as for the rest of the suite); permission denied for root is an
//! immutable directory (`chattr +i`, ext4 and most local file systems).

use std::process::Command;

use crate::common::mount::Mount;
use crate::common::{data, error_lines, fails_with, listing, write, Env};

/// The single `soku: ...` error line about the target.
fn target_line(stderr: &str) -> String {
    let lines = error_lines(stderr);
    lines
        .iter()
        .find(|l| l.starts_with("soku: remote: "))
        .unwrap_or_else(|| panic!("{stderr}"))
        .to_string()
}

#[test]
fn upload_into_a_missing_remote_directory_names_that_directory() {
    let env = Env::new();
    let src = env.src().join("a.txt");
    write(&src, b"a");
    let missing = env.dst().join("no/such");
    for target in [missing.join("a.txt"), missing.join("")] {
        let stderr = fails_with(env.soku().arg(&src).arg(env.remote(&target)), 1, &[]);
        let line = target_line(&stderr);
        assert!(line.contains(&missing.display().to_string()), "{line}");
        assert!(line.contains("no such directory: create it first"), "{line}");
        assert!(!line.contains("a.txt: No such file"), "the source is fine: {line}");
    }
    assert_eq!(listing(&env.dst()), Vec::<String>::new());
}

#[test]
fn a_full_remote_disk_stops_the_copy_and_keeps_the_partial_file() {
    let env = Env::new();
    let small = env.path("small");
    let _mount = Mount::tmpfs(&small, "size=1m");
    let src = env.src().join("big.bin");
    write(&src, &data(3 << 20, 3));
    let stderr = fails_with(env.soku().arg(&src).arg(env.remote(&small)), 3, &[]);
    let line = target_line(&stderr);
    let want =
        format!("{}: cannot write: no space left on the device", small.join("big.bin").display());
    assert!(line.contains(&want), "{line}");
    assert!(line.contains("run the same command again to resume"), "{line}");
    assert!(!stderr.contains("protocol violation") && !stderr.contains("internal"), "{stderr}");
    assert_eq!(listing(&small), [".big.bin.soku-part"], "the partial file, nothing named");
}

#[test]
fn a_read_only_remote_file_system_is_named() {
    let env = Env::new();
    let ro = env.path("ro");
    let _mount = Mount::tmpfs(&ro, "ro,size=1m");
    let src = env.src().join("a.txt");
    write(&src, b"a");
    let stderr = fails_with(env.soku().arg(&src).arg(env.remote(&ro)), 1, &[]);
    let line = target_line(&stderr);
    assert!(line.contains("a.txt: cannot create: read-only file system"), "{line}");
}

#[test]
fn permission_denied_at_the_target_names_the_directory() {
    let env = Env::new();
    let locked = env.dst().join("locked");
    std::fs::create_dir(&locked).expect("mkdir");
    let chattr = |flag: &str| Command::new("chattr").arg(flag).arg(&locked).status();
    if !chattr("+i").is_ok_and(|s| s.success()) {
        eprintln!("skipped: chattr +i not supported here (the target's file system)");
        return;
    }
    let src = env.src().join("a.txt");
    write(&src, b"a");
    let stderr = fails_with(env.soku().arg(&src).arg(env.remote(&locked)), 1, &[]);
    let _ = chattr("-i");
    let line = target_line(&stderr);
    let want = format!("permission denied: check that {} is writable", locked.display());
    assert!(line.contains(&want), "{line}");
    assert_eq!(listing(&locked), Vec::<String>::new());
}

#[test]
fn a_directory_where_a_file_goes_and_a_file_where_a_directory_goes_both_ways() {
    let env = Env::new();
    let src = env.src().join("name");
    write(&src, b"file");
    // Upload: a directory at the file's name.
    std::fs::create_dir(env.dst().join("name")).expect("mkdir");
    let stderr = fails_with(env.soku().arg(&src).arg(env.remote(&env.dst())), 1, &[]);
    assert!(target_line(&stderr).contains("name: cannot create: a directory is in the way"));
    // Upload of a tree: a file where its directory goes.
    let tree = env.src().join("tree");
    write(&tree.join("sub/f"), b"f");
    write(&env.dst().join("tree/sub"), b"a file");
    let stderr = fails_with(env.soku().arg("-r").arg(&tree).arg(env.remote(&env.dst())), 1, &[]);
    let line = target_line(&stderr);
    assert!(
        line.contains("tree/sub: cannot create the directory: a part of this path is a file"),
        "{line}"
    );
    // Download: a directory at the file's name, here.
    let back = env.path("back");
    std::fs::create_dir_all(back.join("name")).expect("mkdir");
    let stderr =
        fails_with(env.soku().arg(env.remote(&src)).arg(&back), 1, &["a directory is in the way"]);
    assert!(
        error_lines(&stderr).iter().any(|l| l.contains("back/name: cannot create")),
        "{stderr}"
    );
}
