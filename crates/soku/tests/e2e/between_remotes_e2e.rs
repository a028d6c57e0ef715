//! Copies between two remote hosts: two sshd, the origin's account with an ssh config of
//! its own that reaches the destination (`client/between_remotes.rs`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::common::{assert_same_file, data, error_lines, fails_with, soku_bin, write, Env};

/// The destination's host name in the origin's ssh config.
const DESTINATION: &str = "soku-test-host";

/// Gives the origin's account an ssh config that reaches `destination`'s sshd. ssh reads
/// `~/.ssh/config` from the account's passwd entry, which the test cannot change: an
/// `ssh` first on the origin's PATH runs the real one with `-F` that config.
fn origin_reaches(origin: &Env, destination: &Env) -> PathBuf {
    let home = origin.path("home");
    std::fs::create_dir_all(home.join(".ssh")).expect("mkdir");
    let config = home.join(".ssh/config");
    std::fs::copy(destination.sshd.ssh_config_file(), &config).expect("config");
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let ssh = format!("#!/bin/sh\nexec /usr/bin/ssh -F {} \"$@\"\n", config.display());
    std::fs::write(bin.join("ssh"), ssh).expect("write");
    std::fs::set_permissions(bin.join("ssh"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let options = format!(
        "environment=\"HOME={}\",environment=\"PATH={}:/usr/bin:/bin\"",
        home.display(),
        bin.display()
    );
    origin.sshd.restrict_key(&options).expect("authorized_keys");
    home
}

fn between(origin: &Env, extra: &[&str], source: &Path, target: &Path) -> std::process::Command {
    let mut cmd = origin.soku();
    cmd.arg("--no-share-login").args(extra).stdin(Stdio::null());
    cmd.arg(origin.remote(source)).arg(format!("{DESTINATION}:{}", target.display()));
    cmd
}

/// `-R`: the origin's soku copies to the destination over its own ssh; a tree with -r.
#[test]
fn with_r_the_origin_copies_to_the_destination() {
    let origin = Env::new();
    let destination = Env::new();
    origin_reaches(&origin, &destination);
    let file = origin.src().join("a.bin");
    write(&file, &data(2_000_000, 7));
    let mut cmd = between(&origin, &["-R"], &file, &destination.dst());
    origin.ok(&mut cmd);
    assert_same_file(&file, &destination.dst().join("a.bin"));

    write(&origin.src().join("tree/sub/b.bin"), &data(300_000, 8));
    let mut cmd = between(&origin, &["-R", "-r"], &origin.src().join("tree"), &destination.dst());
    origin.ok(&mut cmd);
    assert_same_file(
        &origin.src().join("tree/sub/b.bin"),
        &destination.dst().join("tree/sub/b.bin"),
    );
}

/// The origin's failure is its own line, forwarded, with its status; nothing lands.
#[test]
fn with_r_a_missing_source_is_the_origins_line_and_status() {
    let origin = Env::new();
    let destination = Env::new();
    origin_reaches(&origin, &destination);
    let missing = origin.src().join("nothing-here");
    let mut cmd = between(&origin, &["-R"], &missing, &destination.dst());
    // The origin's own lines: the source named on its side, and its count.
    let stderr = fails_with(&mut cmd, 1, &["soku: 127.0.0.1: ", "nothing-here"]);
    assert!(!stderr.contains("local:"), "{stderr}");
    assert!(error_lines(&stderr).len() <= 2, "the origin's lines only\n{stderr}");
    assert_eq!(std::fs::read_dir(destination.dst()).expect("dst").count(), 0);
}

/// Without -R (scp's default copies through this host, not built yet) the line says
/// so and names -R; nothing is started.
#[test]
fn without_r_the_line_names_r() {
    let origin = Env::new();
    let file = origin.src().join("a.bin");
    write(&file, b"x");
    let mut cmd = between(&origin, &[], &file, Path::new("/tmp"));
    let stderr = fails_with(&mut cmd, 2, &["two remote hosts", "add -R"]);
    assert_eq!(error_lines(&stderr).len(), 1, "one error line\n{stderr}");
}

/// Neither remote has soku: the origin gets one sent by this host, and the destination
/// one sent by the origin's, each said in its line; the file arrives.
#[test]
fn with_r_soku_is_sent_to_both_remotes_when_neither_has_one() {
    let origin = Env::new();
    let destination = Env::new();
    let origin_home = origin_reaches(&origin, &destination);
    let destination_home = destination.path("home");
    std::fs::create_dir_all(&destination_home).expect("mkdir");
    let options = format!(
        "environment=\"HOME={}\",environment=\"PATH=/usr/bin:/bin\"",
        destination_home.display()
    );
    destination.sshd.restrict_key(&options).expect("authorized_keys");
    // The binary each side sends: under the static build's name, where soku looks.
    let target = format!("soku-{}-unknown-linux-musl", std::env::consts::ARCH);
    for cache in [origin.path("cache"), origin_home.join(".cache")] {
        let dist = cache.join("soku/dist");
        std::fs::create_dir_all(&dist).expect("mkdir");
        std::fs::copy(soku_bin(), dist.join(&target)).expect("copy");
    }
    let file = origin.src().join("a.bin");
    write(&file, &data(500_000, 9));
    let mut cmd = origin.soku_without_remote_path();
    cmd.args(["--no-share-login", "-R"]).stdin(Stdio::null());
    cmd.arg(origin.remote(&file)).arg(format!("{DESTINATION}:{}/", destination.dst().display()));
    let out = origin.ok(&mut cmd);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(said.lines().filter(|l| l.contains("installed soku")).count(), 2, "{said}");
    assert_same_file(&file, &destination.dst().join("a.bin"));
    assert!(origin_home.join(".cache/soku/bin").is_dir(), "nothing sent to the origin");
    assert!(destination_home.join(".cache/soku/bin").is_dir(), "nothing sent to the destination");
}
