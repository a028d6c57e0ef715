//! A fenced `soku serve` (`crates/soku/src/server/serve/fence.rs`), the way an administrator
//! sets it: a forced command on the user's key in authorized_keys
//! (`restrict,command="soku serve --root DIR --read-only"`), through a real sshd. The
//! client is the real one, asking for whatever it likes; every fence holds on the
//! server's side, for the first job and for a kept server's next ones, and each
//! refusal reaches the user as one `remote: ...` line naming the fence.
//!
//! Each test also makes the copy the fence allows, so that a refusal is a refusal and
//! not a broken forced command.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::common::{
    self, assert_same_file, data, error_lines, fails_with, listing, soku_bin, write, Env,
};

/// An sshd whose user key runs `soku serve FENCES` whatever the client asks.
fn forced(fences: &str) -> Env {
    let env = Env::new();
    let command = format!("{} serve {fences}", soku_bin().display());
    let options = format!("restrict,command=\"{}\"", command.trim_end());
    env.sshd.restrict_key(&options).expect("authorized_keys");
    env
}

/// `soku` for one copy, logging in on its own: a shared login's master and kept
/// server are only in the test that says so.
fn soku(env: &Env) -> Command {
    let mut cmd = env.soku();
    cmd.arg("--no-share-login").stdin(Stdio::null());
    cmd
}

/// `host:PATH` as the user types it, PATH as it is (relative, absolute, with `..`).
fn remote(env: &Env, path: &str) -> String {
    format!("{}:{path}", env.sshd.host())
}

/// Runs `cmd`, expects exit 1 and one `soku: remote: ...` line holding `fence`.
fn refused(cmd: &mut Command, fence: &str) -> String {
    let stderr = fails_with(cmd, 1, &[fence]);
    let lines = error_lines(&stderr);
    assert!(
        lines.iter().any(|line| line.contains("remote: ") && line.contains(fence)),
        "the refusal names the remote side: {stderr}"
    );
    stderr
}

/// Nothing, not even a partial file, below `dir`.
fn assert_empty(dir: &Path) {
    assert_eq!(listing(dir), Vec::<String>::new(), "{} is not empty", dir.display());
}

#[test]
fn a_read_only_key_refuses_uploads_and_still_downloads() {
    let env = forced("--read-only");
    let store = env.path("store");
    write(&store.join("report.bin"), &data(300_000, 1));
    write(&env.src().join("up.bin"), &data(200_000, 2));

    let mut up = soku(&env);
    up.arg(env.src().join("up.bin")).arg(env.remote(&store));
    refused(&mut up, "uploads are refused: this server is read-only");
    assert_eq!(listing(&store), ["report.bin"], "nothing was written on the server");

    // A whole tree, with -r: the same refusal, before anything lands.
    let mut tree = soku(&env);
    tree.arg("-r").arg(env.src()).arg(env.remote(&store));
    refused(&mut tree, "uploads are refused");
    assert_eq!(listing(&store), ["report.bin"]);

    let mut down = soku(&env);
    down.arg(env.remote(&store.join("report.bin"))).arg(env.dst());
    env.ok(&mut down);
    assert_same_file(&store.join("report.bin"), &env.dst().join("report.bin"));
}

#[test]
fn a_write_only_key_refuses_downloads_and_still_uploads() {
    let env = forced("--write-only");
    let store = env.path("store");
    write(&store.join("private.bin"), &data(100_000, 3));
    write(&env.src().join("drop.bin"), &data(250_000, 4));

    let mut down = soku(&env);
    down.arg(env.remote(&store.join("private.bin"))).arg(env.dst());
    refused(&mut down, "downloads are refused: this server is write-only");
    assert_empty(&env.dst());

    let mut up = soku(&env);
    up.arg(env.src().join("drop.bin")).arg(env.remote(&store));
    env.ok(&mut up);
    assert_same_file(&env.src().join("drop.bin"), &store.join("drop.bin"));

    // With resume, a receiver tells the sender what it holds under the copy's names, by
    // hash: a write-only server tells nothing, so an upload that matches a file there
    // is sent whole and learns nothing of it.
    write(&env.src().join("private.bin"), &data(100_000, 3));
    let mut guess = soku(&env);
    guess.arg("--json").arg(env.src().join("private.bin")).arg(env.remote(&store));
    let out = env.ok(&mut guess);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (bytes, resumed) = common::procs::summary(&stderr).expect("a finished line");
    assert_eq!((bytes, resumed), (100_000, 0), "nothing held was told: {stderr}");

    // A sync neither lists nor deletes what a drop box holds, and its quick check tells
    // nothing either: the file of the same size and time there is sent whole.
    let sync = |args: &[&str]| {
        let mut cmd = env.soku_sub("sync");
        cmd.arg("--no-share-login").args(args).stdin(Stdio::null());
        cmd.arg(format!("{}/", env.src().display())).arg(env.remote(&store));
        cmd
    };
    refused(&mut sync(&["--delete"]), "sync --delete and --dry-run are refused");
    refused(&mut sync(&["-n"]), "this server is write-only");
    let out = env.ok(&mut sync(&["--json"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"sent_files\":2,\"resumed_files\":0,\"skipped_files\":0"),
        "{stderr}"
    );
    assert_eq!(listing(&store), ["drop.bin", "private.bin"], "nothing deleted");
}

/// The root: `/etc/passwd` is ROOT/etc/passwd, which is not there; `..` and symlinks
/// out of it are refused for downloads, trees and uploads alike; a path inside, named
/// relative or absolute, copies as ever.
#[test]
fn a_rooted_key_serves_only_what_lies_beneath_its_root() {
    let root = tempfile::tempdir().expect("root");
    let env = forced(&format!("--root {}", root.path().display()));
    let root = root.path();
    let secret = env.path("secret");
    // The secret as a path relative to the root: both are in the system's temp dir.
    let env_name = env.dir.path().file_name().expect("name").to_string_lossy().into_owned();
    let up_to_secret = format!("../{env_name}/secret");
    write(&secret.join("key.txt"), b"outside the root\n");
    write(&root.join("inside.bin"), &data(120_000, 5));
    write(&root.join("tree/a.bin"), &data(10_000, 6));
    assert_eq!(
        std::fs::read(root.join(&up_to_secret).join("key.txt")).expect("seen here"),
        b"outside the root\n"
    );
    std::os::unix::fs::symlink(&secret, root.join("out")).expect("absolute link out");
    std::os::unix::fs::symlink(format!("../{up_to_secret}"), root.join("tree/up")).expect("link");
    std::fs::create_dir(root.join("inbox")).expect("inbox");

    // Absolute and relative names are both taken from the root.
    for (asked, name) in [("/inside.bin", "one"), ("inside.bin", "two"), ("~/inside.bin", "three")]
    {
        let mut down = soku(&env);
        down.arg(remote(&env, asked)).arg(env.dst().join(name));
        env.ok(&mut down);
        assert_same_file(&root.join("inside.bin"), &env.dst().join(name));
    }

    let mut passwd = soku(&env);
    passwd.arg(remote(&env, "/etc/passwd")).arg(env.dst());
    fails_with(&mut passwd, 1, &["No such file or directory"]);
    let key = format!("{up_to_secret}/key.txt");
    for asked in ["out/key.txt", "/out/key.txt", &key, &format!("/{key}"), "tree/up/key.txt"] {
        let mut down = soku(&env);
        down.arg(remote(&env, asked)).arg(env.dst());
        refused(&mut down, "leads outside the directory this server serves");
    }
    // A tree holding a link out: its files come, the link's target is never listed.
    let mut tree = soku(&env);
    tree.arg("-r").arg(remote(&env, "/tree")).arg(env.path("got"));
    let stderr = fails_with(&mut tree, 1, &["leads outside the directory this server serves"]);
    assert!(!stderr.contains("key.txt"), "{stderr}");
    assert_eq!(listing(&env.path("got")), ["a.bin"]);
    let files: Vec<String> = listing(&env.dst());
    assert_eq!(files, ["one", "three", "two"], "nothing from outside arrived");

    write(&env.src().join("up.bin"), &data(50_000, 7));
    let up_dir = format!("{up_to_secret}/");
    for target in ["out/", "/out/", "tree/up/", &up_dir, &format!("/{up_dir}")] {
        let mut up = soku(&env);
        up.arg(env.src().join("up.bin")).arg(remote(&env, target));
        fails_with(&mut up, 1, &["remote: "]);
    }
    assert_eq!(listing(&secret), ["key.txt"], "nothing was written outside the root");
    let mut up = soku(&env);
    up.arg(env.src().join("up.bin")).arg(remote(&env, "/inbox/"));
    env.ok(&mut up);
    assert_same_file(&env.src().join("up.bin"), &root.join("inbox/up.bin"));
}

/// `soku diagnose` through a read-only, rooted key: it measures the path as ever, and
/// the remote disk test, which writes a scratch file, is left out (with `--root` alone
/// it runs in the root).
#[test]
fn diagnose_through_a_read_only_key_measures_all_but_the_remote_disk() {
    let root = tempfile::tempdir().expect("root");
    let env = forced(&format!("--read-only --root {}", root.path().display()));
    let mut cmd = common::bounded_soku(90);
    cmd.arg("diagnose").args(env.sshd.scp_port_args()).args(env.sshd.ssh_args());
    cmd.arg("--remote-soku").arg(soku_bin()).arg("--local-path").arg(env.src());
    cmd.arg("--json").arg(env.sshd.host()).stdin(Stdio::null());
    let out = env.ok(&mut cmd);
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    let remote = &v["facts"]["remote"];
    assert!(remote["facts"]["cores"].as_u64().is_some_and(|n| n > 0), "it answered: {v}");
    assert!(remote["facts"]["disk"].is_null(), "no disk test on a read-only server: {v}");
    assert_eq!(listing(root.path()), Vec::<String>::new(), "nothing was written");
}

/// A client that asks a forced `soku serve` key for another command gets one line
/// saying what the key runs, not a server speaking soku to `cat`.
#[test]
fn a_forced_key_runs_nothing_but_soku_serve() {
    let env = forced("--read-only");
    let mut ssh = Command::new("ssh");
    ssh.args(env.sshd.ssh_port_args()).args(env.sshd.ssh_args());
    ssh.arg(env.sshd.destination()).arg("cat /etc/passwd").stdin(Stdio::null());
    let out = soku_testkit::cmd::output(&mut ssh);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("this ssh key runs only `soku serve`"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("root:"), "no passwd was shown");
}

/// `soku tunnel` through the key, to a TCP server of the test's; the tunnel's stderr.
fn tunnel(env: &Env, to_port: u16) -> Command {
    let mut cmd = common::bounded_soku(30);
    cmd.arg("tunnel")
        .args(["-L", "127.0.0.1:0", "--to", &format!("127.0.0.1:{to_port}")])
        .args(env.sshd.scp_port_args())
        .args(env.sshd.ssh_args())
        .arg("--remote-soku")
        .arg(soku_bin())
        .arg(env.sshd.host())
        .stdin(Stdio::null());
    cmd
}

/// A TCP server on loopback that greets one connection and closes it.
fn greeter() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        if let Ok((mut conn, _)) = listener.accept() {
            let _ = conn.write_all(b"hello through the tunnel");
        }
    });
    port
}

#[test]
fn a_forced_key_carries_no_tcp_unless_the_admin_allows_it() {
    for fences in ["", "--no-tunnel", "--root /tmp"] {
        let env = forced(fences);
        let mut cmd = tunnel(&env, greeter());
        fails_with(&mut cmd, 255, &["remote end failed: tunnels are refused"]);
    }

    // The same key with --allow-tunnel carries the connection.
    let env = forced("--allow-tunnel");
    let mut cmd = tunnel(&env, greeter());
    let mut child = cmd.stderr(Stdio::piped()).spawn().expect("soku tunnel");
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let port = line
                .split("listening on 127.0.0.1:")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|p| p.parse::<u16>().ok());
            let _ = tx.send((line, port));
        }
    });
    let mut seen = String::new();
    let port = loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok((_, Some(port))) => break port,
            Ok((line, None)) => seen.push_str(&line),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the tunnel did not come up: {seen}\n{}", env.sshd.log());
            }
        }
    };
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let mut got = String::new();
    let read = conn.read_to_string(&mut got);
    let _ = child.kill();
    let _ = child.wait();
    read.expect("read through the tunnel");
    assert_eq!(got, "hello through the tunnel");
}

/// A shared login's kept server (`crates/soku/src/server/serve/kept.rs`) holds the fences of
/// the forced command that started it: the upload after a download reaches it over
/// QUIC alone, and is refused there as it would be through ssh.
#[test]
fn the_kept_server_holds_the_same_fences() {
    let env = forced("--read-only");
    let run = env.path("run");
    std::fs::create_dir_all(&run).expect("run dir");
    let store = env.path("store");
    write(&store.join("report.bin"), &data(100_000, 8));
    write(&env.src().join("up.bin"), &data(100_000, 9));
    let shared = |cmd: &mut Command| {
        cmd.env("XDG_RUNTIME_DIR", &run).arg("-v").stdin(Stdio::null());
    };

    let mut down = env.soku();
    shared(&mut down);
    down.arg(env.remote(&store.join("report.bin"))).arg(env.dst());
    env.ok(&mut down);
    let mut up = env.soku();
    shared(&mut up);
    up.arg(env.src().join("up.bin")).arg(env.remote(&store));
    let stderr = refused(&mut up, "uploads are refused: this server is read-only");
    let masters = sockets(&run);
    for socket in &masters {
        let mut exit = Command::new("ssh");
        exit.arg(format!("-oControlPath={}", socket.display()));
        let _ = exit.args(["-O", "exit", "unused-host"]).stderr(Stdio::null()).status();
    }
    assert!(stderr.contains("reaching the remote soku kept from the last copy"), "{stderr}");
    assert_eq!(listing(&store), ["report.bin"]);
}

/// The shared logins' control sockets under the runtime directory `run`.
fn sockets(run: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(run.join("soku/ssh")) {
        Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    }
}
