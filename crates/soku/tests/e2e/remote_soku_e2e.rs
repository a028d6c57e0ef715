//! Which soku the remote end runs, for a remote account with a home of its own and no
//! soku on its PATH, as `ssh host cmd` finds it (the test key's `environment=` options
//! set HOME and PATH; `client/launch/remote_soku.rs`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{assert_same_file, data, error_lines, fails_with, soku_bin, write, Env};

/// The remote account's home, empty, with a PATH that holds no soku.
fn account(env: &Env) -> PathBuf {
    account_with_path(env, "/usr/bin:/bin")
}

fn account_with_path(env: &Env, path: &str) -> PathBuf {
    let home = env.path("home");
    std::fs::create_dir_all(&home).expect("home");
    let options = format!("environment=\"HOME={}\",environment=\"PATH={path}\"", home.display());
    env.sshd.restrict_key(&options).expect("authorized_keys");
    home
}

/// Puts the soku under test where the client looks for a binary to send
/// (`client/launch/deploy.rs`), under the static build's name for this machine.
fn at_hand(env: &Env) {
    let target = format!("{}-unknown-linux-musl", std::env::consts::ARCH);
    install(&env.path("cache"), &format!("soku/dist/soku-{target}"));
}

/// The soku deployed in the remote account's cache, if one is.
fn deployed(home: &Path) -> Option<PathBuf> {
    let bin = home.join(".cache/soku/bin");
    let entry = std::fs::read_dir(bin).ok()?.flatten().next()?;
    Some(entry.path().join("soku"))
}

/// Puts the soku under test at `home/rel`, as a user would put it there.
fn install(home: &Path, rel: &str) {
    let path = home.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::copy(soku_bin(), &path).expect("copy soku");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A copy of a small file to the remote, with the remote soku left to soku to find.
fn copy(env: &Env, extra: &[&str]) -> (Command, PathBuf) {
    let source = env.src().join("a.bin");
    write(&source, &data(300_000, 3));
    let mut cmd = env.soku_without_remote_path();
    cmd.arg("--no-share-login").args(extra).stdin(Stdio::null());
    cmd.arg(&source).arg(env.remote(&env.dst()));
    (cmd, source)
}

/// `cargo install` puts soku in ~/.cargo/bin, which a non-interactive ssh session's
/// PATH does not hold: it is found there ("no soku on its PATH" before).
#[test]
fn a_soku_in_the_remote_users_cargo_bin_is_found() {
    let env = Env::new();
    install(&account(&env), ".cargo/bin/soku");
    let (mut cmd, source) = copy(&env, &[]);
    env.ok(&mut cmd);
    assert_same_file(&source, &env.dst().join("a.bin"));
}

/// A `--remote-soku` under the remote home, with a `~` and a space, is run as a shell
/// would run it typed there (the `~` was quoted, and no such file was found).
#[test]
fn a_remote_soku_named_with_a_tilde_is_run_from_the_remote_home() {
    let env = Env::new();
    install(&account(&env), "my apps/soku");
    let (mut cmd, source) = copy(&env, &["--remote-soku", "~/my apps/soku"]);
    env.ok(&mut cmd);
    assert_same_file(&source, &env.dst().join("a.bin"));
}

/// With soku nowhere, the one line names every place looked and the way out; a named
/// soku that is not there is named back.
#[test]
fn with_no_soku_on_the_remote_the_error_names_every_place_looked() {
    let env = Env::new();
    account(&env);
    let (mut cmd, _) = copy(&env, &[]);
    let needles = ["on its PATH or in ~/.local/bin, ~/.cargo/bin or ~/bin", "--remote-soku"];
    let stderr = fails_with(&mut cmd, 255, &needles);
    assert_eq!(error_lines(&stderr).len(), 1, "one error line\n{stderr}");
    let (mut cmd, _) = copy(&env, &["--remote-soku", "~/nowhere/soku"]);
    let stderr = fails_with(&mut cmd, 255, &["no ~/nowhere/soku (--remote-soku)"]);
    assert_eq!(error_lines(&stderr).len(), 1, "one error line\n{stderr}");
}

/// A remote account with no soku at all gets one sent with the first copy, in one
/// line, into its own cache; the next copy finds it there and sends nothing.
#[test]
fn a_remote_without_soku_gets_one_sent_once() {
    let env = Env::new();
    let home = account(&env);
    at_hand(&env);
    let (mut cmd, source) = copy(&env, &[]);
    let first = env.ok(&mut cmd);
    let said = String::from_utf8_lossy(&first.stderr);
    let line: Vec<&str> = said.lines().filter(|l| l.contains("installed soku")).collect();
    assert_eq!(line.len(), 1, "{said}");
    assert!(line[0].contains("in ~/.cache/soku/bin ("), "{said}");
    assert_same_file(&source, &env.dst().join("a.bin"));
    let sent = deployed(&home).expect("a soku in the remote cache");
    assert_eq!(std::fs::read(&sent).expect("read"), std::fs::read(soku_bin()).expect("read"));
    let dir_mode = std::fs::metadata(sent.parent().expect("dir")).expect("dir").permissions();
    assert_eq!(dir_mode.mode() & 0o777, 0o700);

    let (mut cmd, _) = copy(&env, &[]);
    let second = env.ok(&mut cmd);
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(!said.contains("installed soku"), "sent again: {said}");
}

/// A deployed soku whose bytes changed is not run: a new one is sent in its place.
#[test]
fn a_changed_deployed_soku_is_replaced_not_run() {
    let env = Env::new();
    let home = account(&env);
    at_hand(&env);
    let (mut cmd, _) = copy(&env, &[]);
    env.ok(&mut cmd);
    let sent = deployed(&home).expect("deployed");
    // Another file in its place (the first copy's server may still be running the old
    // one, which cannot be written while it runs), executable as the old one was.
    std::fs::remove_file(&sent).expect("remove");
    std::fs::write(&sent, "#!/bin/sh\necho tampered >&2\nexit 9\n").expect("tamper");
    std::fs::set_permissions(&sent, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let (mut cmd, source) = copy(&env, &[]);
    let out = env.ok(&mut cmd);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("installed soku"), "{said}");
    assert!(!said.contains("tampered"), "the changed one ran: {said}");
    assert_eq!(std::fs::read(&sent).expect("read"), std::fs::read(soku_bin()).expect("read"));
    assert_same_file(&source, &env.dst().join("a.bin"));
}

/// `--no-deploy` sends nothing and says where soku looked.
#[test]
fn no_deploy_sends_nothing_and_says_where_soku_looked() {
    let env = Env::new();
    let home = account(&env);
    at_hand(&env);
    let (mut cmd, _) = copy(&env, &["--no-deploy"]);
    let needles = ["on its PATH or in ~/.local/bin, ~/.cargo/bin or ~/bin", "--remote-soku"];
    let stderr = fails_with(&mut cmd, 255, &needles);
    assert_eq!(error_lines(&stderr).len(), 1, "one error line\n{stderr}");
    assert!(deployed(&home).is_none(), "sent one all the same");
}

/// A remote whose machine soku has no binary for (a `uname` that says riscv64) is
/// named in the line, with where to put a binary for it.
#[test]
fn a_remote_machine_with_no_binary_at_hand_is_named() {
    let env = Env::new();
    let fake = env.path("fakebin");
    std::fs::create_dir_all(&fake).expect("mkdir");
    let uname = fake.join("uname");
    let script = "#!/bin/sh\ncase \"$1\" in -s) echo Linux ;; -m) echo riscv64 ;; esac\n";
    std::fs::write(&uname, script).expect("write");
    std::fs::set_permissions(&uname, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let home = account_with_path(&env, &format!("{}:/usr/bin:/bin", fake.display()));
    at_hand(&env);
    let (mut cmd, _) = copy(&env, &[]);
    let needles = ["(Linux riscv64)", "soku-riscv64-unknown-linux-musl", "scripts/dist.sh"];
    let stderr = fails_with(&mut cmd, 255, &needles);
    assert_eq!(error_lines(&stderr).len(), 1, "one error line\n{stderr}");
    assert!(deployed(&home).is_none(), "sent one all the same");
}

/// What a soku that speaks only protocols 3 and 4 says first: the magic line and its
/// hello, as `soku serve` sends them.
fn old_hello() -> Vec<u8> {
    hello_of(3, 4)
}

/// What a soku that speaks protocols `min` to `max` says first.
fn hello_of(min: u16, max: u16) -> Vec<u8> {
    let hello = soku_proto::hello::ServerHello::Ready {
        version: max,
        udp_port: 0,
        server_addr: None,
        fingerprint: [0; 32],
        soku_version: "0.0.1".into(),
        warnings: Vec::new(),
        min_version: min,
        tcp_port: 0,
        open_files: None,
    };
    let mut out = soku_proto::MAGIC.to_vec();
    soku_proto::frame::encode(&hello, &mut out).expect("encode");
    out
}

/// A soku the user installed that is too old to talk to this one (a stand-in that
/// says the hello of a soku speaking protocols 3-4) is left where it is: one is sent
/// into the cache, the line says both, and the next copy runs that one, sending nothing.
#[test]
fn a_remote_soku_too_old_is_left_in_place_and_the_sent_one_used() {
    let env = Env::new();
    let home = account(&env);
    at_hand(&env);
    std::fs::write(home.join("old-hello"), old_hello()).expect("write");
    let old = home.join(".local/bin/soku");
    std::fs::create_dir_all(old.parent().expect("parent")).expect("mkdir");
    let script = "#!/bin/sh\ncat \"$HOME/old-hello\"\nsleep 5\n";
    std::fs::write(&old, script).expect("write");
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).expect("chmod");

    let (mut cmd, source) = copy(&env, &[]);
    let first = env.ok(&mut cmd);
    let said = String::from_utf8_lossy(&first.stderr);
    let line: Vec<&str> = said.lines().filter(|l| l.contains("installed soku")).collect();
    assert_eq!(line.len(), 1, "{said}");
    assert!(line[0].contains("speaks protocol 3-4"), "{said}");
    assert!(line[0].contains("left it in place"), "{said}");
    assert_same_file(&source, &env.dst().join("a.bin"));
    assert_eq!(std::fs::read_to_string(&old).expect("still there"), script);
    let sent = deployed(&home).expect("a soku in the remote cache");
    assert_eq!(std::fs::read(&sent).expect("read"), std::fs::read(soku_bin()).expect("read"));

    let (mut cmd, _) = copy(&env, &[]);
    let second = env.ok(&mut cmd);
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(!said.contains("installed soku"), "sent again: {said}");
    assert!(!said.contains("protocol"), "{said}");
}

/// A soku that copies but is too old to sync (protocols 5-9: a stand-in that says so)
/// is left in place for `soku sync` as for a copy it cannot serve: one is sent, and the
/// sync runs on it.
#[test]
fn a_remote_soku_too_old_to_sync_is_left_in_place_and_the_sent_one_syncs() {
    let env = Env::new();
    let home = account(&env);
    at_hand(&env);
    let sync_since = soku_proto::sync::SYNC_SINCE_VERSION;
    std::fs::write(home.join("old-hello"), hello_of(5, sync_since - 1)).expect("write");
    let old = home.join(".local/bin/soku");
    std::fs::create_dir_all(old.parent().expect("parent")).expect("mkdir");
    std::fs::write(&old, "#!/bin/sh\ncat \"$HOME/old-hello\"\nsleep 5\n").expect("write");
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let source = env.src().join("tree/a.bin");
    write(&source, &data(300_000, 3));
    let mut cmd = crate::common::bounded_soku(crate::common::LIMIT_SECS);
    cmd.env("XDG_CACHE_HOME", env.path("cache")).arg("sync");
    cmd.args(env.sshd.scp_port_args()).args(env.sshd.ssh_args()).arg("--no-share-login");
    cmd.arg(env.src().join("tree")).arg(env.remote(&env.dst())).stdin(Stdio::null());
    let out = env.ok(&mut cmd);
    let said = String::from_utf8_lossy(&out.stderr);
    let line: Vec<&str> = said.lines().filter(|l| l.contains("installed soku")).collect();
    assert_eq!(line.len(), 1, "{said}");
    assert!(line[0].contains(&format!("speaks protocol 5-{}", sync_since - 1)), "{said}");
    assert_same_file(&source, &env.dst().join("tree/a.bin"));
    assert!(deployed(&home).is_some());
}

/// With `--no-deploy`, a soku too old is named by its protocols and nothing is sent.
#[test]
fn a_remote_soku_too_old_with_no_deploy_says_which_side_to_upgrade() {
    let env = Env::new();
    let home = account(&env);
    at_hand(&env);
    std::fs::write(home.join("old-hello"), old_hello()).expect("write");
    let old = home.join("bin/soku");
    std::fs::create_dir_all(old.parent().expect("parent")).expect("mkdir");
    std::fs::write(&old, "#!/bin/sh\ncat \"$HOME/old-hello\"\nsleep 5\n").expect("write");
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (mut cmd, _) = copy(&env, &["--no-deploy"]);
    let needles = ["speaks protocol version 3-4", "upgrade soku on the remote host"];
    let stderr = fails_with(&mut cmd, 255, &needles);
    assert_eq!(error_lines(&stderr).len(), 1, "one error line\n{stderr}");
    assert!(deployed(&home).is_none(), "sent one all the same");
}

/// `soku diagnose` to a remote with no soku sends one as a copy does, and measures.
#[test]
fn diagnose_sends_soku_to_a_remote_without_one() {
    let env = Env::new();
    let home = account(&env);
    at_hand(&env);
    let mut cmd = crate::common::bounded_soku(90);
    cmd.env("XDG_CACHE_HOME", env.path("cache"));
    cmd.arg("diagnose").args(env.sshd.scp_port_args()).args(env.sshd.ssh_args());
    cmd.arg("--local-path").arg(env.src()).arg("--json").arg(env.sshd.host());
    let out = env.ok(cmd.stdin(Stdio::null()));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(said.lines().filter(|l| l.contains("installed soku")).count(), 1, "{said}");
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    let cores = &v["facts"]["remote"]["facts"]["cores"];
    assert!(cores.as_u64().is_some_and(|n| n > 0), "the sent soku answered: {v}");
    assert!(deployed(&home).is_some());
}
