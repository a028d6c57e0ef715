//! `soku sync` through a real sshd, both ways: the quick check skips what is unchanged,
//! `--checksum` finds what size and time hide, `-u` keeps newer files, a dry run lists
//! exactly what would be sent and deleted and changes nothing, `--delete` removes only
//! what the source lacks and no rule protects, `--files-from` sends only the listed
//! paths (two workers under GNU parallel, on lists from fpart, rebuild one tree), and
//! the scp-compatible `-r` takes `--exclude`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{
    assert_same_file, assert_same_tree, data, fails_with, listing, set_mtime, write, Env,
};

/// A small source tree: nested directories, an empty file, an empty directory.
fn tree(root: &Path) {
    for (i, rel) in
        ["a.txt", "d/b.bin", "d/e/c.bin", "d/e/f/g.txt", "z/last.log"].iter().enumerate()
    {
        write(&root.join(rel), &data(1000 + 70_000 * i, i as u64));
    }
    write(&root.join("d/empty"), b"");
    std::fs::create_dir_all(root.join("void")).expect("mkdir");
}

/// `soku sync --json` with the options that reach the test sshd.
fn sync(env: &Env, args: &[&str], from: &str, to: &str) -> Command {
    let mut cmd = env.soku_sub("sync");
    cmd.arg("--json").arg("--no-share-login").args(args).arg(from).arg(to);
    cmd.stdin(Stdio::null());
    cmd
}

/// What a sync's `sync_totals` line counted: files sent, resumed, skipped, paths deleted.
fn counts(stderr: &[u8]) -> [u64; 4] {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find(|l| l.contains("\"event\":\"sync_totals\""))
        .unwrap_or_else(|| panic!("no sync_totals line:\n{text}"));
    let field = |name: &str| -> u64 {
        let at = line.find(&format!("\"{name}\":")).unwrap_or_else(|| panic!("{name}: {line}"));
        let rest = &line[at + name.len() + 3..];
        rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len())].parse().expect("n")
    };
    ["sent_files", "resumed_files", "skipped_files", "deleted_paths"].map(field)
}

fn slash(path: &Path) -> String {
    format!("{}/", path.display())
}

#[test]
fn a_second_sync_sends_only_what_changed_both_ways() {
    let env = Env::new();
    let src = env.src();
    tree(&src);
    let up = env.dst().join("up");
    let out = env.ok(&mut sync(&env, &[], &slash(&src), &env.remote(&up)));
    assert_eq!(counts(&out.stderr), [6, 0, 0, 0]);
    assert_same_tree(&src, &up);
    for rel in ["a.txt", "d/e/c.bin"] {
        assert_eq!(
            crate::common::mtime(&src.join(rel)),
            crate::common::mtime(&up.join(rel)),
            "times are kept"
        );
    }

    // One file changed (bytes and time), one only touched, one new.
    write(&src.join("d/b.bin"), &data(70_001, 99));
    set_mtime(&src.join("a.txt"), 1_800_000_000, 0);
    write(&src.join("d/new.txt"), b"new");
    let out = env.ok(&mut sync(&env, &[], &slash(&src), &env.remote(&up)));
    assert_eq!(counts(&out.stderr), [3, 1, 4, 0], "a.txt's bytes were all there");
    assert_same_tree(&src, &up);

    // Back down, into a directory that is not there yet.
    let down = env.path("down");
    let out =
        env.ok(&mut sync(&env, &[], &format!("{}/", env.remote(&up)), &down.display().to_string()));
    assert_eq!(counts(&out.stderr), [7, 0, 0, 0]);
    assert_same_tree(&src, &down);
    let out =
        env.ok(&mut sync(&env, &[], &format!("{}/", env.remote(&up)), &down.display().to_string()));
    assert_eq!(counts(&out.stderr), [0, 0, 7, 0]);

    // Without the trailing slash the directory itself lands in the target, as rsync's.
    let named = env.path("named");
    env.ok(&mut sync(&env, &[], &src.display().to_string(), &env.remote(&named)));
    assert_same_tree(&src, &named.join("src"));
}

#[test]
fn checksum_finds_a_change_that_size_and_time_hide_and_update_keeps_newer_files() {
    let env = Env::new();
    let src = env.src();
    tree(&src);
    let dst = env.dst().join("t");
    env.ok(&mut sync(&env, &[], &slash(&src), &env.remote(&dst)));
    // Same size, same time, other bytes.
    let hidden = dst.join("d/e/c.bin");
    let (secs, nsec) = crate::common::mtime(&hidden);
    write(&hidden, &data(141_000, 1234));
    set_mtime(&hidden, secs, nsec);
    let out = env.ok(&mut sync(&env, &[], &slash(&src), &env.remote(&dst)));
    assert_eq!(counts(&out.stderr)[2], 6, "the quick check trusts size and time");
    let out = env.ok(&mut sync(&env, &["--checksum"], &slash(&src), &env.remote(&dst)));
    // Four found whole by hash (the empty one has no chunk to compare), the changed one
    // sent.
    assert_eq!(counts(&out.stderr), [6, 4, 0, 0]);
    assert_same_tree(&src, &dst);

    // Edited at the target later than the source: -u keeps it.
    let edited = dst.join("a.txt");
    write(&edited, b"edited there");
    set_mtime(&edited, 4_000_000_000, 0);
    let out = env.ok(&mut sync(&env, &["-u"], &slash(&src), &env.remote(&dst)));
    assert_eq!(counts(&out.stderr)[2], 6);
    assert_eq!(std::fs::read(&edited).expect("read"), b"edited there");
}

#[test]
fn a_dry_run_with_delete_lists_exactly_the_extras_and_changes_nothing() {
    let env = Env::new();
    let src = env.src();
    tree(&src);
    let dst = env.dst().join("t");
    env.ok(&mut sync(&env, &[], &slash(&src), &env.remote(&dst)));
    // Extras at the target: a file, a tree, a link (to a directory outside), and a file
    // an exclude protects.
    write(&dst.join("old.txt"), b"old");
    write(&dst.join("d/gone/deep/x"), b"x");
    std::os::unix::fs::symlink(env.dir.path(), dst.join("d/e/link")).expect("symlink");
    write(&dst.join("d/notes.keep"), b"mine");
    write(&src.join("z/new.log"), b"new");
    let before = listing(&dst);

    // The list is for people and scripts, on stdout (`--json` has it as events).
    let mut dry = env.soku_sub("sync");
    dry.args(["--no-share-login", "-n", "--delete", "--exclude", "*.keep"]);
    dry.arg(slash(&src)).arg(env.remote(&dst)).stdin(Stdio::null());
    let out = env.ok(&mut dry);
    let listed: Vec<String> =
        String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect();
    assert_eq!(
        listed,
        [
            format!("would send: {}", src.join("z/new.log").display()),
            "would delete: d/e/link".into(),
            "would delete: d/gone".into(),
            "would delete: old.txt".into(),
        ],
        "exactly the new file and the extras"
    );
    assert_eq!(listing(&dst), before, "nothing changed");

    let out = env.ok(&mut sync(
        &env,
        &["--delete", "--exclude", "*.keep"],
        &slash(&src),
        &env.remote(&dst),
    ));
    assert_eq!(counts(&out.stderr), [1, 0, 6, 3]);
    std::fs::remove_file(dst.join("d/notes.keep")).expect("the protected file is there");
    assert_same_tree(&src, &dst);
    assert!(env.dir.path().join("src/a.txt").exists(), "the link's target is untouched");
}

#[test]
fn the_scp_command_takes_exclude_and_include_with_r() {
    let env = Env::new();
    let src = env.src();
    tree(&src);
    write(&src.join("d/keep.o"), b"k");
    write(&src.join("d/drop.o"), b"d");
    let args = ["--include", "keep.o", "--exclude", "*.o", "--exclude", "/src/z"];
    // Up...
    let mut cmd = env.soku();
    cmd.arg("--no-share-login").arg("-r").args(args).arg(&src).arg(env.remote(&env.dst()));
    env.ok(&mut cmd);
    let up = env.dst().join("src");
    assert!(up.join("d/keep.o").exists() && !up.join("d/drop.o").exists());
    assert!(!up.join("z").exists() && up.join("d/e/f/g.txt").exists());
    // ... and down, where the remote walks by them.
    let down = env.path("down");
    std::fs::create_dir(&down).expect("mkdir");
    let mut cmd = env.soku();
    cmd.arg("--no-share-login").arg("-r").args(["--exclude", "e/"]).arg(env.remote(&up)).arg(&down);
    env.ok(&mut cmd);
    assert!(!down.join("src/d/e").exists() && down.join("src/d/keep.o").exists());
    // Without -r the filter has nothing to choose from: said so.
    let mut cmd = env.soku();
    cmd.arg("--exclude").arg("*.o").arg(src.join("a.txt")).arg(env.remote(&env.dst()));
    fails_with(&mut cmd, 2, &["--exclude and --include", "add -r"]);
}

#[test]
fn wrong_combinations_are_one_line_errors_that_say_what_to_do() {
    let env = Env::new();
    tree(&env.src());
    let to = env.remote(&env.dst());
    let from = slash(&env.src());
    fails_with(
        &mut sync(&env, &["-n", "--checksum"], &from, &to),
        2,
        &["--dry-run with --checksum"],
    );
    fails_with(&mut sync(&env, &["--no-resume"], &from, &to), 2, &["--no-resume"]);
    fails_with(
        &mut sync(&env, &["--exclude", "[z-a"], &from, &to),
        2,
        &["--exclude/--include: pattern", "[z-a", "invalid range"],
    );
    let list = env.path("list");
    write(&list, b"a.txt\n");
    let listed = format!("--files-from={}", list.display());
    fails_with(
        &mut sync(&env, &["--delete", &listed], &from, &to),
        2,
        &["--delete with --files-from"],
    );
    let deep = env.remote(&env.path("no/such/dir"));
    fails_with(&mut sync(&env, &[], &from, &deep), 1, &["remote:", "no such directory"]);
    assert!(listing(&env.dst()).is_empty(), "nothing landed");
}

/// The tree split by fpart into two lists, each synced by its own soku under GNU
/// parallel into one target: together they rebuild the tree (docs/sharding.md).
#[test]
fn two_workers_under_parallel_rebuild_one_tree_from_fpart_lists() {
    let env = Env::new();
    let src = env.src();
    tree(&src);
    for i in 0..40 {
        write(
            &src.join(format!("many/{}/f{i}.dat", i % 5)),
            &data(5_000 + i * 300, 100 + i as u64),
        );
    }
    let parts = env.path("parts");
    std::fs::create_dir(&parts).expect("mkdir");
    let fpart = Command::new("fpart")
        .current_dir(&src)
        .args(["-z", "-n", "2", "-o"])
        .arg(parts.join("part"))
        .arg(".")
        .output()
        .expect("fpart runs (apt-get install fpart)");
    assert!(fpart.status.success(), "{}", String::from_utf8_lossy(&fpart.stderr));
    let lists: Vec<PathBuf> =
        std::fs::read_dir(&parts).expect("parts").map(|e| e.expect("entry").path()).collect();
    assert_eq!(lists.len(), 2, "{lists:?}");

    // The worker's command, as a user writes it in the recipe; `{}` is the list.
    let soku = env.soku_sub("sync");
    let mut worker: Vec<String> = std::iter::once(soku.get_program())
        .chain(soku.get_args())
        .map(|a| shlex::try_quote(&a.to_string_lossy()).expect("quotable").into_owned())
        .collect();
    let dst = env.dst().join("t");
    std::fs::create_dir(&dst).expect("mkdir");
    worker.extend(["--no-share-login", "-q", "--files-from", "{}"].map(String::from));
    worker.push(shlex::try_quote(&slash(&src)).expect("quotable").into_owned());
    worker.push(shlex::try_quote(&env.remote(&dst)).expect("quotable").into_owned());
    let mut parallel = Command::new("parallel");
    parallel.args(["--will-cite", "-j", "2", "--halt", "now,fail=1"]).arg(worker.join(" "));
    parallel.arg(":::").args(&lists).stdin(Stdio::null());
    let out = env.ok(&mut parallel);
    assert!(out.status.success());
    // The union of the parts is the tree (`-z` lists the empty directory too).
    assert_same_tree(&src, &dst);

    // A list works the other way too: the remote walks only what it names.
    let back = env.path("back");
    let list = format!("--files-from={}", lists[0].display());
    env.ok(&mut sync(
        &env,
        &[&list],
        &format!("{}/", env.remote(&dst)),
        &back.display().to_string(),
    ));
    let named = std::fs::read_to_string(&lists[0]).expect("list");
    let files: Vec<&str> = named
        .lines()
        .map(|l| l.trim_start_matches("./"))
        .filter(|l| src.join(l).is_file())
        .collect();
    assert!(!files.is_empty(), "{named}");
    for rel in &files {
        assert_same_file(&src.join(rel), &back.join(rel));
    }
    let landed = listing(&back).into_iter().filter(|p| !p.ends_with('/')).count();
    assert_eq!(landed, files.len(), "only the listed files");
}
