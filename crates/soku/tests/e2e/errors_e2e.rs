//! End-to-end failures: each asserts the exit code (0 ok, 1 copy failed, 2 usage,
//! 255 connection) and the message the user sees, and that soku did not panic.
//!
//! A source that cannot be read for its permissions (root reads any file unless its
//! powers are taken away) and the failures of the file systems on either side are in
//! `failure_lines_e2e.rs`; here "cannot read" is a directory without `-r` and a FIFO,
//! which fail the same way for everyone.

use std::process::Command;

use crate::common::{self, assert_same_file, data, error_lines, fails_with, write, Env};

/// `soku` alone: for usage errors nothing connects, so no sshd is needed.
fn bare_soku() -> Command {
    common::bounded_soku(common::LIMIT_SECS)
}

#[test]
fn missing_source_upload_copies_the_rest() {
    let env = Env::new();
    let (a, b) = (env.src().join("a.bin"), env.src().join("b.bin"));
    write(&a, &data(3000, 1));
    write(&b, &data(4000, 2));
    let missing = env.src().join("missing.bin");
    let stderr = fails_with(
        env.soku().arg(&a).arg(&missing).arg(&b).arg(env.remote(&env.dst())),
        1,
        &["missing.bin", "No such file or directory", "1 of 3 files failed"],
    );
    assert!(error_lines(&stderr).iter().any(|l| l.contains("missing.bin: No such file")));
    assert_same_file(&a, &env.dst().join("a.bin"));
    assert_same_file(&b, &env.dst().join("b.bin"));
    assert!(!env.dst().join("missing.bin").exists());
}

#[test]
fn missing_source_download_copies_the_rest() {
    let env = Env::new();
    let (a, b) = (env.src().join("a.bin"), env.src().join("b.bin"));
    write(&a, &data(3000, 3));
    write(&b, &data(4000, 4));
    let missing = env.src().join("missing.bin");
    fails_with(
        env.soku().arg(env.remote(&a)).arg(env.remote(&missing)).arg(env.remote(&b)).arg(env.dst()),
        1,
        &["missing.bin", "No such file or directory", "1 of 3 files failed"],
    );
    assert_same_file(&a, &env.dst().join("a.bin"));
    assert_same_file(&b, &env.dst().join("b.bin"));
    assert_eq!(common::listing(&env.dst()), ["a.bin", "b.bin"]);
}

#[test]
fn directory_without_r_is_refused_both_ways() {
    let env = Env::new();
    let dir = env.src().join("adir");
    write(&dir.join("inner.txt"), b"x");
    fails_with(
        env.soku().arg(&dir).arg(env.remote(&env.dst())),
        1,
        &["adir", "is a directory (use -r"],
    );
    fails_with(
        env.soku().arg(env.remote(&dir)).arg(env.dst()),
        1,
        &["adir", "is a directory (use -r"],
    );
    assert_eq!(common::listing(&env.dst()), Vec::<String>::new());
}

#[test]
fn fifo_is_not_a_regular_file_both_ways() {
    // A FIFO would block a naive reader forever: soku must refuse it, not hang.
    let env = Env::new();
    let fifo = env.src().join("pipe");
    soku_testkit::run(Command::new("mkfifo").arg(&fifo));
    let ok = env.src().join("ok.txt");
    write(&ok, b"fine\n");
    fails_with(
        env.soku().arg(&fifo).arg(&ok).arg(env.remote(&env.dst())),
        1,
        &["pipe", "not a regular file"],
    );
    assert_same_file(&ok, &env.dst().join("ok.txt"));
    let back = env.path("back");
    std::fs::create_dir(&back).expect("mkdir");
    fails_with(env.soku().arg(env.remote(&fifo)).arg(&back), 1, &["pipe", "not a regular file"]);
    assert_eq!(common::listing(&back), Vec::<String>::new());
}

#[test]
fn several_sources_need_a_directory_upload() {
    let env = Env::new();
    let (a, b) = (env.src().join("a"), env.src().join("b"));
    write(&a, b"a");
    write(&b, b"b");
    let file = env.dst().join("plain-file");
    write(&file, b"untouched");
    fails_with(env.soku().arg(&a).arg(&b).arg(env.remote(&file)), 1, &["not a directory"]);
    assert_eq!(std::fs::read(&file).expect("read"), b"untouched");
}

#[test]
fn several_sources_need_a_directory_download() {
    let env = Env::new();
    let (a, b) = (env.src().join("a"), env.src().join("b"));
    write(&a, b"a");
    write(&b, b"b");
    let file = env.dst().join("plain-file");
    write(&file, b"untouched");
    fails_with(
        env.soku().arg(env.remote(&a)).arg(env.remote(&b)).arg(&file),
        1,
        &["plain-file", "not a directory"],
    );
    assert_eq!(std::fs::read(&file).expect("read"), b"untouched");
}

#[test]
fn download_into_a_missing_directory_fails_before_connecting() {
    let env = Env::new();
    let a = env.src().join("a");
    write(&a, b"a");
    let target = env.path("no/such/dir/name");
    fails_with(
        env.soku().arg(env.remote(&a)).arg(&target),
        1,
        &["no/such/dir: no such directory: create it first"],
    );
}

#[test]
fn remote_without_soku_says_how_to_fix_it() {
    let env = Env::new();
    let a = env.src().join("a");
    write(&a, b"a");
    let stderr = fails_with(
        env.soku_without_remote_path()
            .args(["--remote-soku", "/nonexistent/soku"])
            .arg(&a)
            .arg(env.remote(&env.dst())),
        255,
        &["install soku", "--remote-soku"],
    );
    assert_eq!(error_lines(&stderr).len(), 1, "one error line\n{stderr}");
}

#[test]
fn ssh_connection_failure_exits_255() {
    let env = Env::new();
    let a = env.src().join("a");
    write(&a, b"a");
    // A port nobody listens on (free a moment ago).
    let port = soku_testkit::free_port().to_string();
    let mut cmd = bare_soku();
    cmd.args(["-P", &port])
        .args(env.sshd.ssh_args())
        .args(["-o", "ConnectTimeout=5", "--remote-soku"])
        .arg(common::soku_bin())
        .arg(&a)
        .arg(env.remote(&env.dst()));
    // The reason and the port reach the user whoever dialed: ssh itself, or soku for
    // ssh (launch/shared_login.rs: ssh sends a persistent master's ProxyCommand output
    // to /dev/null, so soku tells what its dialer saw), without ssh's notes about it.
    let stderr = fails_with(&mut cmd, 255, &["ssh could not connect", "Connection refused", &port]);
    assert!(!stderr.contains("proxy dialer"), "{stderr}");
}

#[test]
fn usage_errors_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["only-one-path"], "SOURCE... TARGET"),
        (&["--no-such-flag", "a", "h:b"], "--no-such-flag"),
        (&["-c", "bogus", "a", "h:b"], "aes128-gcm, aes256-gcm and chacha20-poly1305"),
        (&["h:a", "g:b", "."], "several remote hosts"),
        (&["a", "h:b", "."], "mixing local and remote"),
        (&[":nohost", "."], "empty host name"),
        (&["-P", "notaport", "a", "h:b"], "notaport"),
    ];
    for (args, needle) in cases {
        let stderr = fails_with(bare_soku().args(*args), 2, &[*needle]);
        assert!(stderr.lines().count() <= 12, "short usage message for {args:?}\n{stderr}");
    }
}

#[test]
fn bogus_cipher_is_refused_before_connecting() {
    // Exit 2 even with a reachable host: the cipher is checked first.
    let env = Env::new();
    let a = env.src().join("a");
    write(&a, b"a");
    let stderr = fails_with(
        env.soku().args(["-c", "bogus"]).arg(&a).arg(env.remote(&env.dst())),
        2,
        &["bogus", "aes128-gcm", "aes256-gcm", "chacha20-poly1305"],
    );
    assert_eq!(error_lines(&stderr).len(), 1, "{stderr}");
    assert!(!env.dst().join("a").exists());
}
