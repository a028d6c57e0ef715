//! The Windows build (`x86_64-pc-windows-gnu`) under Wine copies with `soku serve` on
//! Linux through a real sshd, both ways, a file and a tree, over QUIC; and refuses two
//! names of a tree that Windows would take for one.
//!
//! Wine (8.0) cannot hand a Windows pipe to a Linux process, so the `ssh` the Windows
//! build starts is `scripts/wine/ssh_shim.rs`, a Windows program that carries its
//! arguments and its stdin and stdout over loopback TCP to [`Bridge`], which runs the
//! real `/usr/bin/ssh` with them. Everything else is the real thing: the Windows
//! binary's paths (`Z:\...`), its walk and receiver, its UDP socket under Wine, the
//! Linux server, sshd.
//!
//! Needs the two Windows programs and Wine, so it is ignored in the plain test run:
//! `scripts/cross-check.sh` builds them and runs it with `SOKU_WINDOWS_EXE` and
//! `SOKU_WINE_SSH` set to their paths.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};

use soku_testkit::describe;

use crate::common::{
    assert_no_panic, assert_same_tree, data, soku_bin, write, Env, LIMIT_SECS, TIMED_OUT,
};

/// Connections the bridge takes before it stops listening: one ssh per copy.
const MAX_LOGINS: usize = 8;

/// Runs `/usr/bin/ssh` for each connection of the shim (`scripts/wine/ssh_shim.rs`):
/// the arguments, each ended by a NUL and then one more NUL, then both streams.
struct Bridge {
    addr: String,
}

impl Bridge {
    fn start() -> Bridge {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bridge listens");
        let addr = listener.local_addr().expect("bridge address").to_string();
        std::thread::spawn(move || {
            for socket in listener.incoming().take(MAX_LOGINS).flatten() {
                std::thread::spawn(move || run_ssh(socket));
            }
        });
        Bridge { addr }
    }
}

fn run_ssh(mut socket: TcpStream) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !(head.ends_with(&[0, 0]) || head == [0]) {
        if socket.read_exact(&mut byte).is_err() {
            return;
        }
        head.push(byte[0]);
    }
    let args: Vec<String> = head
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let mut ssh = Command::new("/usr/bin/ssh")
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("ssh starts");
    let (mut to_ssh, mut from_ssh) = (ssh.stdin.take().unwrap(), ssh.stdout.take().unwrap());
    let mut upward = socket.try_clone().expect("socket clone");
    let up = std::thread::spawn(move || pump(&mut upward, &mut to_ssh));
    pump(&mut from_ssh, &mut socket);
    let _ = socket.flush();
    let _ = socket.shutdown(Shutdown::Both);
    let _ = ssh.wait();
    let _ = up.join();
}

/// Carries what `from` reads to `to` as it comes, until either side ends. Not
/// `std::io::copy`: between a socket and a pipe it splices, and copies hung waiting
/// in it.
fn pump(from: &mut impl Read, to: &mut impl Write) {
    let mut buf = vec![0u8; 64 << 10];
    while let Ok(n @ 1..) = from.read(&mut buf) {
        if to.write_all(&buf[..n]).and_then(|()| to.flush()).is_err() {
            return;
        }
    }
}

/// `path` as the Windows build names it: Wine's drive `Z:` is the Linux root.
fn windows_path(path: &Path) -> String {
    format!("Z:{}", path.display()).replace('/', "\\")
}

/// A path from the environment the cross-check sets, which must exist.
fn built(var: &str) -> String {
    let path = std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: scripts/cross-check.sh builds the Windows programs and sets it")
    });
    assert!(Path::new(&path).is_file(), "{var}={path} is not a file");
    path
}

/// The Windows soku under Wine with `first` (a command, options) first, then the
/// shim as its ssh, the test sshd's options and the Linux soku as the remote one.
fn windows_soku_with(env: &Env, bridge: &Bridge, first: &[&str]) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", &LIMIT_SECS.to_string(), "wine", &built("SOKU_WINDOWS_EXE")]);
    cmd.env("SOKU_SSH_BRIDGE", &bridge.addr).env("WINEDEBUG", "-all");
    cmd.args(first).arg("-S").arg(windows_path(Path::new(&built("SOKU_WINE_SSH"))));
    cmd.args(env.sshd.scp_port_args()).args(env.sshd.ssh_args());
    cmd.arg("--remote-soku").arg(soku_bin());
    cmd
}

/// A copy by the Windows soku, with `--json`, whose `connected` line names the carrier.
fn windows_soku(env: &Env, bridge: &Bridge) -> Command {
    windows_soku_with(env, bridge, &["--json"])
}

/// Runs one copy of the Windows build, which must succeed over QUIC.
fn copied(cmd: &mut Command) {
    let out = soku_testkit::cmd::output(cmd);
    assert_ne!(out.status.code(), Some(TIMED_OUT), "soku hung\n{}", describe(cmd, &out));
    assert!(out.status.success(), "copy failed\n{}", describe(cmd, &out));
    assert_no_panic(cmd, &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let quic = stderr.lines().any(|l| l.contains(r#""event":"connected","transport":"QUIC"#));
    assert!(quic, "not over QUIC\n{}", describe(cmd, &out));
}

#[test]
#[ignore = "needs the Windows build and Wine: scripts/cross-check.sh runs it"]
fn the_windows_build_copies_both_ways_over_quic_through_sshd() {
    let env = Env::new();
    let bridge = Bridge::start();
    let bytes = data(6 << 20, 55);
    write(&env.src().join("one.bin"), &bytes);
    write(&env.src().join("tree/notes.txt"), b"a line\n");
    write(&env.src().join("tree/deep/more.bin"), &data(300_000, 56));

    let up = env.dst().join("up.bin");
    copied(
        windows_soku(&env, &bridge)
            .arg(windows_path(&env.src().join("one.bin")))
            .arg(env.remote(&up)),
    );
    assert!(std::fs::read(&up).expect("uploaded") == bytes, "the upload differs");

    let down = env.path("down.bin");
    copied(windows_soku(&env, &bridge).arg(env.remote(&up)).arg(windows_path(&down)));
    assert!(std::fs::read(&down).expect("downloaded") == bytes, "the download differs");

    let tree_up = env.dst().join("tree");
    copied(
        windows_soku(&env, &bridge)
            .arg("-r")
            .arg(windows_path(&env.src().join("tree")))
            .arg(env.remote(&tree_up)),
    );
    let tree_down = env.path("tree-back");
    copied(
        windows_soku(&env, &bridge)
            .arg("-r")
            .arg(env.remote(&tree_up))
            .arg(windows_path(&tree_down)),
    );
    assert_same_tree(&env.src().join("tree"), &tree_up);
    assert_same_tree(&env.src().join("tree"), &tree_down);
}

/// A tree from Linux holding `Notes.txt` and `notes.txt`, copied down to the Windows
/// build, where the two would be one file: the second is refused with both names and
/// exit status 1, and the first arrives whole.
#[test]
#[ignore = "needs the Windows build and Wine: scripts/cross-check.sh runs it"]
fn names_that_differ_only_in_case_are_refused_on_windows() {
    let env = Env::new();
    let bridge = Bridge::start();
    write(&env.src().join("tree/Notes.txt"), b"upper\n");
    write(&env.src().join("tree/notes.txt"), b"lower\n");
    let into = env.path("down");
    let mut cmd = windows_soku(&env, &bridge);
    cmd.arg("-r").arg(env.remote(&env.src().join("tree"))).arg(windows_path(&into));
    let out = soku_testkit::cmd::output(&mut cmd);
    assert_ne!(out.status.code(), Some(TIMED_OUT), "soku hung\n{}", describe(&cmd, &out));
    assert_eq!(out.status.code(), Some(1), "{}", describe(&cmd, &out));
    assert_no_panic(&cmd, &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("differ only in case"), "{}", describe(&cmd, &out));
    let names: Vec<_> = std::fs::read_dir(&into)
        .expect("the tree's directory")
        .map(|e| e.expect("entry").file_name().into_string().expect("name"))
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(names.len(), 1, "one of the two, whole: {names:?}");
    let kept = std::fs::read(into.join(&names[0])).expect("the one kept");
    assert!(kept == b"upper\n" || kept == b"lower\n", "{kept:?}");
}

/// `soku diagnose` from the Windows build: both probes run over QUIC, and the line of
/// this host says what UDP buffers its socket got.
#[test]
#[ignore = "needs the Windows build and Wine: scripts/cross-check.sh runs it"]
fn diagnose_on_windows_reports_the_udp_buffers_it_got() {
    let env = Env::new();
    let bridge = Bridge::start();
    let mut cmd = windows_soku_with(&env, &bridge, &["diagnose"]);
    cmd.arg(env.sshd.host());
    let out = soku_testkit::cmd::output(&mut cmd);
    assert!(out.status.success(), "diagnose failed\n{}", describe(&cmd, &out));
    let report = String::from_utf8_lossy(&out.stdout);
    let this_host = report.lines().find(|l| l.trim_start().starts_with("this host"));
    let this_host = this_host.unwrap_or_else(|| panic!("no line of this host\n{report}"));
    assert!(this_host.contains("UDP buffers "), "{this_host}");
    assert!(report.contains("over QUIC"), "{report}");
}
