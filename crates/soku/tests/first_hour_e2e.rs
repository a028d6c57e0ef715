//! What a new user meets first, through a real sshd: trees with symbolic link loops,
//! globs that meet dotfiles, targets that exist already, and copies that follow each
//! other through one open port. Each compares with what scp does on the same input.

mod common;

use common::{assert_same_file, data, fails_with, mode, write, Env};

/// `dirlink -> real` and `real/up -> ..`: followed blindly, every level doubles the walk
/// (the client once grew to gigabytes, printing nothing). Both ways the copy ends at
/// once: the tree arrives, each loop is named, and the exit status is scp's 1.
#[test]
fn a_symlink_loop_is_named_and_the_tree_still_copies_both_ways() {
    let env = Env::new();
    let root = env.src().join("loops");
    write(&root.join("real/f.bin"), &data(5000, 1));
    std::os::unix::fs::symlink("real", root.join("dirlink")).expect("link");
    std::os::unix::fs::symlink("..", root.join("real/up")).expect("link");
    let check = |into: &std::path::Path| {
        let arrived = into.join("loops");
        assert_same_file(&root.join("real/f.bin"), &arrived.join("real/f.bin"));
        assert_same_file(&root.join("real/f.bin"), &arrived.join("dirlink/f.bin"));
        assert!(!arrived.join("real/up").exists(), "the loop was not followed");
    };
    let needles = ["real/up: symbolic link loop", "dirlink/up: symbolic link loop"];
    fails_with(env.soku_within(60).arg("-r").arg(&root).arg(env.remote(&env.dst())), 1, &needles);
    check(&env.dst());
    let back = env.path("back");
    std::fs::create_dir(&back).expect("mkdir");
    fails_with(env.soku_within(60).arg("-r").arg(env.remote(&root)).arg(&back), 1, &needles);
    check(&back);
}

/// `host:dir/*` expands on the remote side as the shell does for scp: `*` does not
/// match a leading dot, so `.hidden.txt` is not sent (it once was, and the client then
/// refused it as a name it never asked for, failing the whole copy).
#[test]
fn a_remote_glob_skips_dotfiles_as_scp_does() {
    let env = Env::new();
    let dir = env.src().join("gl");
    write(&dir.join("a.txt"), b"visible\n");
    write(&dir.join(".hidden.txt"), b"hidden\n");
    let pattern = format!("{}:{}/*", env.sshd.host(), dir.display());
    env.ok(env.soku().arg(&pattern).arg(env.dst()));
    assert_eq!(common::listing(&env.dst()), ["a.txt"]);
    let named = format!("{}:{}/.h*", env.sshd.host(), dir.display());
    env.ok(env.soku().arg(&named).arg(env.dst()));
    assert_eq!(common::listing(&env.dst()), [".hidden.txt", "a.txt"]);
}

/// Without `-p`, a file that replaces an existing one keeps that file's mode both ways,
/// as scp and rsync keep it: a 0444 target stays read-only.
#[test]
fn a_replaced_file_keeps_its_mode_without_p() {
    let env = Env::new();
    let source = env.src().join("f.txt");
    write(&source, b"new contents\n");
    common::chmod(&source, 0o644);
    let up = env.dst().join("f.txt");
    write(&up, b"old\n");
    common::chmod(&up, 0o444);
    env.ok(env.soku().arg(&source).arg(env.remote(&up)));
    assert_same_file(&source, &up);
    assert_eq!(mode(&up), 0o444, "upload");
    let down = env.path("down.txt");
    write(&down, b"old\n");
    common::chmod(&down, 0o600);
    env.ok(env.soku().arg(env.remote(&source)).arg(&down));
    assert_same_file(&source, &down);
    assert_eq!(mode(&down), 0o600, "download");
}

/// With one port open for the data and TCP as the transport, copies that follow each
/// other reuse that port while the last one's connections are still in TIME-WAIT.
#[test]
fn back_to_back_copies_through_one_tcp_port_all_succeed() {
    let env = Env::new();
    let source = env.src().join("f.bin");
    write(&source, &data(200_000, 7));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let range = format!("{port}-{port}");
    for round in 0..4 {
        let target = env.dst().join(format!("f{round}.bin"));
        env.ok(env
            .soku()
            .args(["--no-share-login", "--transport", "tcp", "--remote-ports", &range])
            .arg(&source)
            .arg(env.remote(&target)));
        assert_same_file(&source, &target);
    }
}

/// A copy from here to here runs its server on this machine: its target's failure is
/// told as local, never as a remote host's (scp and cp name no remote side either).
#[test]
fn a_local_copy_never_names_a_remote_side() {
    let env = Env::new();
    let source = env.src().join("f.txt");
    write(&source, b"x\n");
    let mut cmd = common::bounded_soku(common::LIMIT_SECS);
    cmd.arg("--remote-soku").arg(common::soku_bin());
    cmd.arg(&source).arg(env.path("nodir/f.txt"));
    let stderr = fails_with(&mut cmd, 1, &["local: ", "nodir: no such directory"]);
    assert!(!stderr.contains("remote"), "{stderr}");
}
