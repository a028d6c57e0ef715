//! Copies between two remote hosts: two sshd, the origin's account with an ssh config of
//! its own that reaches the destination (`client/between_remotes.rs`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::procs::{kill_when_verified, soku_serve, summary};
use crate::common::{
    assert_no_part_files, assert_same_file, assert_same_tree, data, error_lines, fails_with, mtime,
    soku_bin, write, Env,
};

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

/// This host's ssh config with both hosts, `soku-origin` and `soku-destination`, for a
/// copy through this host.
fn both_hosts(origin: &Env, destination: &Env) -> PathBuf {
    let config = |env: &Env, name: &str| {
        let text = std::fs::read_to_string(env.sshd.ssh_config_file()).expect("config");
        text.replace("Host soku-test-host", &format!("Host {name}"))
    };
    let both = origin.path("both_hosts");
    let text = config(origin, "soku-origin") + "\n" + &config(destination, "soku-destination");
    std::fs::write(&both, text).expect("write");
    both
}

/// `soku [extra] soku-origin:SOURCE soku-destination:TARGET` through this host.
fn through_here(
    origin: &Env,
    both: &Path,
    extra: &[&str],
    source: &Path,
    target: &Path,
) -> Command {
    let mut cmd = Command::new(soku_bin());
    cmd.env("XDG_CACHE_HOME", origin.path("cache")).arg("-F").arg(both);
    cmd.args(["--no-share-login", "--remote-soku"]).arg(soku_bin()).args(extra);
    cmd.arg(format!("soku-origin:{}", source.display()));
    cmd.arg(format!("soku-destination:{}", target.display())).stdin(Stdio::null());
    cmd
}

/// `-3`, and scp's default without it: a file and a tree pass through this host, each
/// chunk checked at the destination against the origin's hash.
#[test]
fn through_this_host_a_file_and_a_tree_arrive() {
    let origin = Env::new();
    let destination = Env::new();
    let both = both_hosts(&origin, &destination);
    let file = origin.src().join("a.bin");
    write(&file, &data(3_000_000, 17));
    origin.ok(&mut through_here(&origin, &both, &["-3"], &file, &destination.dst()));
    assert_same_file(&file, &destination.dst().join("a.bin"));

    write(&origin.src().join("tree/sub/b.bin"), &data(300_000, 18));
    write(&origin.src().join("tree/c.txt"), b"c");
    let tree = origin.src().join("tree");
    origin.ok(&mut through_here(&origin, &both, &["-r", "-p"], &tree, &destination.dst()));
    assert_same_tree(&tree, &destination.dst().join("tree"));
    assert_eq!(mtime(&tree.join("c.txt")), mtime(&destination.dst().join("tree/c.txt")));
}

/// A copy through this host killed half way resumes: the rerun sends only what the
/// destination does not hold, as the origin's hashes prove.
#[test]
fn through_this_host_an_interrupted_copy_resumes() {
    let origin = Env::new();
    let destination = Env::new();
    let both = both_hosts(&origin, &destination);
    let size: usize = 24 << 20;
    let file = origin.src().join("big.bin");
    write(&file, &data(size, 19));
    let mut cmd =
        through_here(&origin, &both, &["-3", "--json", "-l", "40000"], &file, &destination.dst());
    cmd.stdin(Stdio::null());
    let killed = kill_when_verified(cmd, size as u64 / 2, |client| client);
    assert!(!killed.ok, "killed");
    assert!(!destination.dst().join("big.bin").exists(), "nothing at the final name");
    let mut again = through_here(&origin, &both, &["-3", "--json"], &file, &destination.dst());
    let out = origin.ok(&mut again);
    let (bytes, resumed) = summary(&String::from_utf8_lossy(&out.stderr)).expect("a summary");
    assert_eq!(bytes, size as u64);
    assert!(
        resumed >= killed.verified_at_kill,
        "held {resumed} of {} verified",
        killed.verified_at_kill
    );
    assert_same_file(&file, &destination.dst().join("big.bin"));
    assert_no_part_files(&destination.dst());
}

/// A copy through this host whose origin's soku dies half way is made again by
/// itself: new sessions to both hosts, and the rest sent. Nothing was at the
/// destination when the command began, so none of it is called already there.
#[test]
fn through_this_host_a_lost_origin_is_reconnected() {
    let origin = Env::new();
    let destination = Env::new();
    let both = both_hosts(&origin, &destination);
    let size: usize = 24 << 20;
    let file = origin.src().join("big.bin");
    write(&file, &data(size, 20));
    let extra = ["-3", "--json", "-l", "40000", "--stall-timeout", "3"];
    let cmd = through_here(&origin, &both, &extra, &file, &destination.dst());
    let sshd = origin.sshd.pid();
    let killed = kill_when_verified(cmd, size as u64 / 2, |_| soku_serve(sshd));
    assert!(killed.ok, "the copy did not survive:\n{}", killed.stderr);
    assert!(killed.stderr.contains(r#""event":"reconnecting""#), "{}", killed.stderr);
    let (bytes, resumed) = summary(&killed.stderr).expect("a summary");
    assert_eq!((bytes, resumed), (size as u64, 0), "{}", killed.stderr);
    assert_same_file(&file, &destination.dst().join("big.bin"));
    assert_no_part_files(&destination.dst());
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
