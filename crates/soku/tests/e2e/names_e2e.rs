//! Names that are not UTF-8, through a real sshd. A Unix name is bytes (`caf\xe9.txt`
//! from a Latin-1 program); scp and rsync copy such names byte for byte, and so does
//! soku: in a tree both ways, and as a command-line argument, local or remote. Every
//! line for people shows each such byte as `\xNN`, never raw and never as U+FFFD.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::common::{assert_same_file, data, fails_with, write, Env};

fn os(bytes: &[u8]) -> &OsStr {
    OsStr::from_bytes(bytes)
}

/// `HOST:PATH` with the path's bytes as they are (`Env::remote` goes through `display`).
fn remote(env: &Env, path: &Path) -> OsString {
    let mut arg = format!("{}:", env.sshd.host()).into_bytes();
    arg.extend_from_slice(path.as_os_str().as_bytes());
    OsString::from_vec(arg)
}

/// Everything below `root` as raw bytes (relative, sorted), directories ending in `/`.
fn byte_listing(root: &Path) -> Vec<Vec<u8>> {
    fn collect(root: &Path, dir: &Path, out: &mut Vec<Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("dir entry").path();
            let mut rel =
                path.strip_prefix(root).expect("below root").as_os_str().as_bytes().to_vec();
            if std::fs::symlink_metadata(&path).expect("metadata").is_dir() {
                rel.push(b'/');
                out.push(rel);
                collect(root, &path, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    collect(root, root, &mut out);
    out.sort();
    out
}

/// The tree's names byte for byte, and each file's bytes.
fn assert_same_bytes_tree(a: &Path, b: &Path) {
    let (la, lb) = (byte_listing(a), byte_listing(b));
    let shown = |l: &[Vec<u8>]| l.iter().map(|n| n.escape_ascii().to_string()).collect::<Vec<_>>();
    assert_eq!(shown(&la), shown(&lb), "trees differ: {} vs {}", a.display(), b.display());
    for rel in la.iter().filter(|r| !r.ends_with(b"/")) {
        assert_same_file(&a.join(os(rel)), &b.join(os(rel)));
    }
}

/// Stderr holds no raw byte of a bad name, and no U+FFFD put in its place.
fn assert_escaped(stderr: &[u8]) {
    let text = String::from_utf8(stderr.to_vec())
        .unwrap_or_else(|_| panic!("stderr is not UTF-8: {}", stderr.escape_ascii()));
    assert!(!text.contains('\u{fffd}'), "a name shown with U+FFFD:\n{text}");
}

/// A tree holding `caf\xe9.txt`, `d\xff/x\xfe.bin` and a FIFO `p\xe9` (not a regular
/// file: its line names it) copies with -r both ways: the names and the bytes arrive
/// exactly, the FIFO's line shows `p\xe9` escaped, and the status is scp's 1 for it.
/// Before, each such name failed (`name is not valid UTF-8`) and did not arrive.
#[test]
fn a_tree_whose_names_are_not_utf8_copies_both_ways() {
    let env = Env::new();
    let root = env.src().join("tree");
    write(&root.join(os(b"caf\xe9.txt")), b"latin-1 name\n");
    write(&root.join(os(b"d\xff/x\xfe.bin")), &data(300_000, 3));
    write(&root.join("d\u{e9}j\u{e0}.txt"), b"utf-8 name\n");
    let fifo = root.join(os(b"d\xff/p\xe9"));
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success(), "mkfifo");
    let needles = ["p\\xe9: not a regular file"];

    let out =
        fails_with(env.soku().arg("-r").arg(&root).arg(remote(&env, &env.dst())), 1, &needles);
    assert_escaped(out.as_bytes());
    std::fs::remove_file(&fifo).expect("rm fifo");
    assert_same_bytes_tree(&root, &env.dst().join("tree"));

    // The FIFO again, for the download's line: from the remote side this time.
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success(), "mkfifo");
    let back = env.path("back");
    std::fs::create_dir(&back).expect("mkdir");
    let mut down = env.soku();
    down.arg("-r").arg(remote(&env, &root)).arg(&back);
    let out = fails_with(&mut down, 1, &needles);
    assert_escaped(out.as_bytes());
    std::fs::remove_file(&fifo).expect("rm fifo");
    assert_same_bytes_tree(&root, &back.join("tree"));
}

/// `--json` stays JSON with such a name: its line parses, and the name in it is the
/// same `\xNN` text the terminal shows.
#[test]
fn json_lines_carry_the_name_escaped() {
    let env = Env::new();
    let root = env.src().join("j");
    write(&root.join(os(b"ok\xe9.txt")), b"x\n");
    let fifo = root.join(os(b"p\xe9"));
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    let mut cmd = env.soku();
    cmd.arg("--json").arg("-r").arg(&root).arg(remote(&env, &env.dst()));
    let stderr = fails_with(&mut cmd, 1, &[]);
    assert_escaped(stderr.as_bytes());
    let failed: Vec<serde_json::Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .filter(|v: &serde_json::Value| v["event"] == "file_failed")
        .collect();
    assert_eq!(failed.len(), 1, "{stderr}");
    let path = failed[0]["path"].as_str().expect("path");
    assert!(path.ends_with("j/p\\xe9"), "{path}");
    assert_same_file(&root.join(os(b"ok\xe9.txt")), &env.dst().join(os(b"j/ok\xe9.txt")));
}

/// A file named by its bytes on the command line copies, both ways: the local one
/// uploaded, the remote one downloaded (the request carries the path as bytes), and
/// found by a remote glob. Before, the command line refused it (exit 2).
#[test]
fn a_name_that_is_not_utf8_copies_as_an_argument() {
    let env = Env::new();
    let source = env.src().join(os(b"caf\xe9.txt"));
    write(&source, &data(70_000, 9));
    let out = env.ok(env.soku().arg(&source).arg(remote(&env, &env.dst())));
    assert_escaped(&out.stderr);
    assert_same_file(&source, &env.dst().join(os(b"caf\xe9.txt")));

    let back: PathBuf = env.path("back");
    std::fs::create_dir(&back).expect("mkdir");
    let out = env.ok(env.soku().arg(remote(&env, &source)).arg(&back));
    assert_escaped(&out.stderr);
    assert_same_file(&source, &back.join(os(b"caf\xe9.txt")));

    // A remote glob finds it too, as the remote shell finds it for scp.
    let globbed = env.path("globbed");
    std::fs::create_dir(&globbed).expect("mkdir");
    env.ok(env.soku().arg(remote(&env, &env.src().join("caf*"))).arg(&globbed));
    assert_same_file(&source, &globbed.join(os(b"caf\xe9.txt")));

    // A name that is not there is named escaped in the line that says so.
    let missing = env.src().join(os(b"n\xe9ant"));
    let stderr =
        fails_with(env.soku().arg(&missing).arg(remote(&env, &env.dst())), 1, &["n\\xe9ant"]);
    assert_escaped(stderr.as_bytes());
}
