//! A tree of many small files copies whole when the receiving side may open few files
//! (`ulimit -n 256`, soft and hard alike, so it cannot raise itself), through a real
//! sshd both ways: the receiver's limit, told in its hello, bounds how many files the
//! sender keeps announced ahead. scp -r copies such a tree under the same limit.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{self, assert_no_part_files, assert_same_tree, write, Env};

/// Files in the tree: ten times what a side with the usual limits announces ahead.
const FILES: usize = 10_000;

/// The shell's words that hold what follows to few open files.
const FEW_FDS: &str = "ulimit -n 256";

/// Seconds a copy of the tree may take (a few on an idle machine).
const WITHIN_SECS: u32 = 90;

/// `FILES` files of a few bytes each, spread over 100 directories, under `root/many`:
/// each file's bytes name it, so a file swapped for another shows.
fn tree_of(root: &Path) -> PathBuf {
    let tree = root.join("many");
    for i in 0..FILES {
        write(&tree.join(format!("d{:02}/f{i:05}", i % 100)), format!("{i}\n").as_bytes());
    }
    tree
}

/// An executable script at `at` that runs the soku under test held to [`FEW_FDS`]: the
/// `--remote-soku` of a server with few descriptors.
fn held_server(at: &Path) -> PathBuf {
    let script =
        format!("#!/bin/sh\n{FEW_FDS} || exit 99\nexec {} \"$@\"\n", common::soku_bin().display());
    std::fs::write(at, script).expect("write wrapper");
    std::fs::set_permissions(at, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    at.to_path_buf()
}

/// [`Env::soku_within`] with the client itself held to [`FEW_FDS`] (its ssh too), the
/// server as usual.
fn held_client(env: &Env) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", &WITHIN_SECS.to_string()]);
    cmd.args(["sh", "-c", &format!("{FEW_FDS} || exit 99; exec \"$0\" \"$@\"")]);
    cmd.arg(common::soku_bin());
    let home = common::fresh_cache_dir();
    cmd.env("XDG_CACHE_HOME", &home).env("XDG_CONFIG_HOME", &home);
    cmd.args(env.sshd.scp_port_args()).args(env.sshd.ssh_args());
    cmd.arg("--remote-soku").arg(common::soku_bin());
    cmd
}

/// Download: the client receives under the low limit from a server with the usual one.
#[test]
fn a_download_of_many_files_completes_into_a_client_with_few_descriptors() {
    let env = Env::new();
    let tree = tree_of(&env.src());
    env.ok(held_client(&env).arg("-r").arg(env.remote(&tree)).arg(env.dst()));
    assert_same_tree(&tree, &env.dst().join("many"));
    assert_no_part_files(&env.dst());
}

/// Upload: the server receives under the low limit from a client with the usual one.
#[test]
fn an_upload_of_many_files_completes_into_a_server_with_few_descriptors() {
    let env = Env::new();
    let tree = tree_of(&env.src());
    let server = held_server(&env.path("soku-few-fds"));
    let mut cmd = env.soku_without_remote_path();
    cmd.arg("--remote-soku").arg(&server);
    env.ok(cmd.arg("-r").arg(&tree).arg(env.remote(&env.dst())));
    assert_same_tree(&tree, &env.dst().join("many"));
    assert_no_part_files(&env.dst());
}

/// The sender held to the low limit, the receiver not: the sender bounds the files it
/// keeps open by its own limit, which is then the lower one.
#[test]
fn a_download_of_many_files_completes_from_a_server_with_few_descriptors() {
    let env = Env::new();
    let tree = tree_of(&env.src());
    let server = held_server(&env.path("soku-few-fds"));
    let mut cmd = env.soku_without_remote_path();
    cmd.arg("--remote-soku").arg(&server);
    env.ok(cmd.arg("-r").arg(env.remote(&tree)).arg(env.dst()));
    assert_same_tree(&tree, &env.dst().join("many"));
    assert_no_part_files(&env.dst());
}
