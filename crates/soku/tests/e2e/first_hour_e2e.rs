//! What a new user meets first, through a real sshd: trees with symbolic link loops,
//! globs that meet dotfiles, targets that exist already, and copies that follow each
//! other through one open port. Each compares with what scp does on the same input.

use crate::common::{self, assert_same_file, data, fails_with, mode, write, Env};

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

/// Six files of 2 MiB and three small ones under `root/tree`: more than the 8 MiB
/// tmpfs they are copied into.
fn larger_than_the_space(root: &std::path::Path) -> std::path::PathBuf {
    let tree = root.join("tree");
    for i in 0..6u64 {
        write(&tree.join(format!("big{i}.bin")), &data(2 << 20, 40 + i));
    }
    for i in 0..3u64 {
        write(&tree.join(format!("small{i}.txt")), &data(3000, 50 + i));
    }
    tree
}

/// What a copy of `tree` stopped for lack of space left in `copy` (below the mount
/// `into`, on the `side` that receives): one error line, every final name holding its
/// whole file, and a summary that counts what is on disk and names the partial files.
fn stopped_for_space(
    stderr: &str,
    side: &str,
    tree: &std::path::Path,
    copy: &std::path::Path,
    into: &std::path::Path,
) {
    let errors: Vec<&str> =
        stderr.lines().filter(|l| l.contains("no space left on the device")).collect();
    assert_eq!(errors.len(), 1, "one error line\n{stderr}");
    assert!(errors[0].starts_with(&format!("soku: {side}: ")), "{stderr}");
    assert!(errors[0].contains(&copy.display().to_string()), "{stderr}");
    let names = common::listing(copy);
    let partial: Vec<&String> = names.iter().filter(|n| n.ends_with(".soku-part")).collect();
    let whole: Vec<&String> = names.iter().filter(|n| !n.ends_with(".soku-part")).collect();
    for name in &whole {
        assert_same_file(&tree.join(name), &copy.join(name));
    }
    assert!(!partial.is_empty(), "nothing partial: {names:?}\n{stderr}");
    let summary = stderr
        .lines()
        .find(|l| l.starts_with("soku: the copy stopped: "))
        .unwrap_or_else(|| panic!("no summary\n{stderr}"));
    let count = format!("{} of 9 files arrived whole", whole.len());
    assert!(summary.contains(&count), "{count:?}\n{stderr}");
    let are = if partial.len() == 1 { "is" } else { "are" };
    let partial_count = format!("{} {are} partial", partial.len());
    assert!(summary.contains(&partial_count), "{partial_count:?}\n{stderr}");
    assert!(summary.contains(&format!("on the {side} side")), "{stderr}");
    for part in &partial {
        let name = part.trim_start_matches('.').trim_end_matches(".soku-part");
        let shown = copy.join(name).display().to_string();
        assert!(summary.contains(&shown), "{shown} not named\n{stderr}");
    }
    let hint = stderr
        .lines()
        .find(|l| l.contains("run the same command again once there is space"))
        .unwrap_or_else(|| panic!("no hint to resume\n{stderr}"));
    assert!(hint.contains(".NAME.soku-part"), "{hint}");
    assert!(
        hint.contains(&format!("find {} -name '.*.soku-part' -delete", into.display())),
        "{hint}"
    );
}

/// The `unfinished` line of a `--json` run's stderr, parsed.
fn unfinished_json(stderr: &str) -> serde_json::Value {
    let line = stderr
        .lines()
        .find(|l| l.starts_with(r#"{"event":"unfinished""#))
        .unwrap_or_else(|| panic!("no unfinished event\n{stderr}"));
    serde_json::from_str(line).expect("json")
}

/// A copy of `tree` into `small` (an 8 MiB tmpfs, mounted by `mount`) that `run` makes
/// with the options it is given, received on `side`: it stops, sums up and exits 3; the
/// same facts with `--json` (from the same start: what is there is removed first); and
/// the same command completes the copy once there is space.
fn full_then_resumed(
    run: impl Fn(&[&str]) -> std::process::Command,
    side: &str,
    tree: &std::path::Path,
    small: &std::path::Path,
    mount: &common::mount::Mount,
) {
    let copy = small.join("tree");
    let stderr = fails_with(&mut run(&[]), 3, &[]);
    stopped_for_space(&stderr, side, tree, &copy, small);
    std::fs::remove_dir_all(&copy).expect("make room");
    let stderr = fails_with(&mut run(&["--json"]), 3, &[]);
    let facts = unfinished_json(&stderr);
    let names = common::listing(&copy);
    let parts = names.iter().filter(|n| n.ends_with(".soku-part")).count();
    assert_eq!(facts["side"], side, "{stderr}");
    assert_eq!(facts["target"], small.display().to_string(), "{stderr}");
    assert_eq!(facts["planned_files"], 9, "{stderr}");
    assert_eq!(facts["whole_files"], names.len() - parts, "{stderr}");
    assert_eq!(facts["partial_files"], parts, "{stderr}");
    assert_eq!(facts["partial"].as_array().map(Vec::len), Some(parts), "{stderr}");
    assert!(facts["partial_bytes"].as_u64().is_some_and(|b| b > 0), "{stderr}");
    mount.remount("size=64m");
    let out = fails_with(&mut run(&[]), 0, &[]);
    assert!(!out.contains("soku: the copy stopped"), "{out}");
    common::assert_same_tree(tree, &copy);
    common::assert_no_part_files(small);
}

/// A download into a disk too small stops at once, says which files arrived whole and
/// which are partial and what they hold, keeps them, exits 3, and the same command
/// finishes the copy once there is space (before, one line about one file, and exit 1).
#[test]
fn a_download_into_a_full_disk_sums_up_and_resumes_once_there_is_space() {
    let env = Env::new();
    let small = env.path("small");
    let Some(mount) = common::mount::Mount::try_tmpfs(&small, "size=8m") else { return };
    let tree = larger_than_the_space(&env.src());
    let run = |extra: &[&str]| {
        let mut cmd = env.soku();
        cmd.args(extra).arg("-r").arg(env.remote(&tree)).arg(&small);
        cmd
    };
    full_then_resumed(run, "local", &tree, &small, &mount);
}

/// The same for an upload, whose server receives: the client says what the remote
/// side holds.
#[test]
fn an_upload_into_a_full_remote_disk_sums_up_and_resumes_once_there_is_space() {
    let env = Env::new();
    let small = env.path("small");
    let Some(mount) = common::mount::Mount::try_tmpfs(&small, "size=8m") else { return };
    let tree = larger_than_the_space(&env.src());
    let run = |extra: &[&str]| {
        let mut cmd = env.soku();
        cmd.args(extra).arg("-r").arg(&tree).arg(env.remote(&small));
        cmd
    };
    full_then_resumed(run, "remote", &tree, &small, &mount);
}

/// With `--json`, a connection that fails (a host name that does not resolve, a port
/// nothing listens on; soku dialling ssh's connection or ssh dialling it) writes only
/// JSON lines, the last an `error` object with the exit status (before: `ssh: ...` and
/// `soku: ssh could not connect ...` as plain text).
#[test]
fn a_failed_connection_under_json_ends_with_a_json_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let closed = soku_testkit::free_port().to_string();
    let cases: [(&[&str], &str); 4] = [
        (&[], "nowhere.invalid:f"),
        (&["--no-share-login"], "nowhere.invalid:f"),
        (&["-P", &closed], "127.0.0.1:f"),
        (&["-P", &closed, "--no-share-login"], "127.0.0.1:f"),
    ];
    for (extra, source) in cases {
        let mut cmd = common::bounded_soku(60);
        cmd.args(["--json", "-o", "BatchMode=yes"]).args(extra).arg(source).arg(dir.path());
        let stderr = fails_with(&mut cmd, 255, &[]);
        let lines: Vec<serde_json::Value> = stderr
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}\n{stderr}")))
            .collect();
        let last = lines.last().unwrap_or_else(|| panic!("nothing said: {extra:?}"));
        assert_eq!(last["event"], "error", "{stderr}");
        assert_eq!(last["exit_status"], 255, "{stderr}");
        assert!(last["message"].as_str().is_some_and(|m| !m.is_empty()), "{stderr}");
    }
}

/// Without a terminal on stderr (cron, a script) a copy that went well prints nothing,
/// as scp prints nothing there (before: the summary line); `-v` still sums up.
#[test]
fn a_copy_without_a_terminal_prints_nothing_on_success() {
    let env = Env::new();
    let source = env.src().join("f.txt");
    write(&source, b"quiet\n");
    let out = env.ok(env.soku().arg(&source).arg(env.remote(&env.dst().join("f.txt"))));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "nothing on success");
    let out = env.ok(env.soku().arg("-v").arg(&source).arg(env.remote(&env.dst().join("g.txt"))));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.lines().any(|l| l.starts_with("1 file, 6 B in ")), "{stderr}");
}

/// A first login to a host whose key is not known yet asks as ssh asks, naming the
/// address ssh connected to (before: `(<no hostip for proxy command>)`, because soku's
/// dialer had connected for ssh). Answered "no", the copy ends with ssh's reason and
/// soku's line that points at it, and nothing arrives.
#[test]
fn an_unknown_host_key_is_asked_about_as_ssh_asks() {
    use std::io::{Read, Write};
    let env = Env::new();
    let source = env.src().join("f.txt");
    write(&source, b"asked\n");
    let known_hosts = env.path("empty_known_hosts");
    write(&known_hosts, b"");
    let target = env.dst().join("f.txt");
    let mut words = vec![common::soku_bin().display().to_string(), "-P".into()];
    words.push(env.sshd.port().to_string());
    for option in [
        format!("IdentityFile={}", env.sshd.identity_file().display()),
        format!("UserKnownHostsFile={}", known_hosts.display()),
        "GlobalKnownHostsFile=/dev/null".to_string(),
        "StrictHostKeyChecking=ask".to_string(),
        "IdentitiesOnly=yes".to_string(),
    ] {
        words.extend(["-o".to_string(), option]);
    }
    words.extend(["--remote-soku".to_string(), common::soku_bin().display().to_string()]);
    words.extend([source.display().to_string(), env.remote(&target)]);
    let line: Vec<String> =
        words.iter().map(|w| format!("'{}'", w.replace('\'', "'\\''"))).collect();
    // ssh asks on the terminal: `script` gives it one, and carries our answer there.
    let mut child = std::process::Command::new("timeout")
        .args(["-k", "5", "60", "script", "-qfec", &line.join(" "), "/dev/null"])
        .env("XDG_CACHE_HOME", env.path("cache"))
        .env("XDG_CONFIG_HOME", env.path("cache"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("script runs");
    let mut stdout = child.stdout.take().expect("piped");
    let mut answer = child.stdin.take().expect("piped");
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    // Bounded by `timeout` above: the pipe ends when script does.
    while !String::from_utf8_lossy(&seen).contains("(yes/no") {
        match stdout.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    let _ = answer.write_all(b"no\n");
    drop(answer);
    let _ = stdout.read_to_end(&mut seen);
    let status = child.wait().expect("script ends");
    let said = String::from_utf8_lossy(&seen);
    let port = env.sshd.port();
    let asked = format!("The authenticity of host '[127.0.0.1]:{port} ([127.0.0.1]:{port})'");
    assert!(said.contains(&asked), "{said}");
    assert!(!said.contains("no hostip"), "{said}");
    assert!(said.contains("soku: ssh could not connect to the remote host (the reason is above)"));
    assert_eq!(status.code(), Some(255), "{said}");
    assert!(!target.exists());
}
