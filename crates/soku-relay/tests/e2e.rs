//! End to end against a real OpenSSH sshd (soku-testkit): scp, sftp and rsync through
//! `soku proxy`, `soku relay` and the preload library, with the data compared byte
//! for byte.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use soku_testkit::{assert_same_file, cmd::output, describe, preload_lib, run, soku_bin, Sshd};

/// 3 MiB + a tail, not a multiple of any buffer size, varied enough to catch reordering.
fn make_file(dir: &Path, name: &str) -> PathBuf {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let data: Vec<u8> = (0..3 * 1024 * 1024 + 4097)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, data).expect("write test file");
    path
}

fn proxy_command() -> String {
    format!("ProxyCommand={} proxy %h %p", soku_bin().display())
}

/// scp upload then download (`legacy`: `scp -O`), checking both copies.
fn scp_round_trip(
    sshd: &Sshd,
    tmp: &Path,
    extra: &[String],
    env: &[(&str, String)],
    legacy: bool,
) -> String {
    let src = make_file(tmp, "src.bin");
    let remote = tmp.join(if legacy { "remote-legacy.bin" } else { "remote.bin" });
    let back = tmp.join("back.bin");
    let mut stderr = String::new();
    for (from, to) in [
        (src.display().to_string(), format!("{}:{}", sshd.destination(), remote.display())),
        (format!("{}:{}", sshd.destination(), remote.display()), back.display().to_string()),
    ] {
        let mut scp = Command::new("scp");
        scp.args(sshd.ssh_args()).args(extra);
        if legacy {
            scp.arg("-O");
        }
        scp.envs(env.iter().map(|(k, v)| (k, v))).arg(&from).arg(&to);
        let out = run(&mut scp);
        stderr.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    assert_same_file(&src, &remote);
    assert_same_file(&src, &back);
    std::fs::remove_file(&back).ok();
    stderr
}

#[test]
fn scp_through_proxy_command_legacy_and_sftp() {
    let sshd = Sshd::start();
    let tmp = tempfile::tempdir().unwrap();
    let extra = vec!["-o".to_string(), proxy_command(), "-P".to_string(), sshd.port().to_string()];
    scp_round_trip(&sshd, tmp.path(), &extra, &[], true);
    scp_round_trip(&sshd, tmp.path(), &extra, &[], false);
}

/// A `soku relay` child, killed (by PID) on drop.
struct RelayChild(Child, u16);

impl RelayChild {
    fn start(to: &str, extra: &[&str]) -> RelayChild {
        let mut child = Command::new(soku_bin())
            .args(["relay", "--listen", "127.0.0.1:0", "--to", to])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start soku relay");
        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        // "soku relay: listening on 127.0.0.1:PORT, relaying to ..."
        let port = first
            .strip_prefix("soku relay: listening on 127.0.0.1:")
            .and_then(|r| r.split(',').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line from soku relay: {first:?}"));
        // Keep draining its per-connection lines so it never blocks on stderr.
        std::thread::spawn(move || lines.for_each(drop));
        RelayChild(child, port)
    }
}

impl Drop for RelayChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn scp_through_standalone_relay() {
    let sshd = Sshd::start();
    let tmp = tempfile::tempdir().unwrap();
    let relay = RelayChild::start(&format!("127.0.0.1:{}", sshd.port()), &[]);
    let extra = vec![
        "-o".to_string(),
        format!("HostKeyAlias={}", soku_testkit::sshd::TEST_HOST),
        "-P".to_string(),
        relay.1.to_string(),
    ];
    scp_round_trip(&sshd, tmp.path(), &extra, &[], true);
    scp_round_trip(&sshd, tmp.path(), &extra, &[], false);
    // Small buffers still relay correctly (the slow case of the measurements).
    let small = RelayChild::start(
        &format!("127.0.0.1:{}", sshd.port()),
        &["--sndbuf", "8192", "--rcvbuf", "8192"],
    );
    let extra_small =
        vec![extra[0].clone(), extra[1].clone(), "-P".to_string(), small.1.to_string()];
    scp_round_trip(&sshd, tmp.path(), &extra_small, &[], false);
}

fn preload_env(sshd: &Sshd) -> Vec<(&'static str, String)> {
    vec![
        ("LD_PRELOAD", preload_lib().display().to_string()),
        ("SOKU_PRELOAD", sshd.port().to_string()),
        ("SOKU_PRELOAD_DEBUG", "1".to_string()),
    ]
}

#[test]
fn scp_and_sftp_through_preload() {
    let sshd = Sshd::start();
    let tmp = tempfile::tempdir().unwrap();
    let env = preload_env(&sshd);
    let port = sshd.scp_port_args();
    for legacy in [true, false] {
        let err = scp_round_trip(&sshd, tmp.path(), &port, &env, legacy);
        assert!(err.contains("soku-preload: relaying fd"), "the hook did not run:\n{err}");
    }

    // sftp in batch mode: put then get.
    let src = make_file(tmp.path(), "sftp-src.bin");
    let (remote, back) = (tmp.path().join("sftp-remote.bin"), tmp.path().join("sftp-back.bin"));
    let batch = tmp.path().join("batch");
    std::fs::write(
        &batch,
        format!(
            "put {} {}\nget {} {}\n",
            src.display(),
            remote.display(),
            remote.display(),
            back.display()
        ),
    )
    .unwrap();
    let mut sftp = Command::new("sftp");
    sftp.args(sshd.ssh_args()).args(&port).arg("-b").arg(&batch).arg(sshd.destination());
    sftp.envs(env.iter().map(|(k, v)| (k, v)));
    let out = run(&mut sftp);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("soku-preload: relaying fd"),
        "{}",
        describe(&sftp, &out)
    );
    assert_same_file(&src, &remote);
    assert_same_file(&src, &back);
}

#[test]
fn rsync_through_preload() {
    if Command::new("rsync").arg("--version").output().is_err() {
        eprintln!("rsync not installed: skipped");
        return;
    }
    let sshd = Sshd::start();
    let tmp = tempfile::tempdir().unwrap();
    let src = make_file(tmp.path(), "rsync-src.bin");
    let remote = tmp.path().join("rsync-remote.bin");
    let rsh = format!("ssh {} -p {}", sshd.ssh_args().join(" "), sshd.port());
    let mut rsync = Command::new("rsync");
    rsync.arg("-e").arg(&rsh).arg(&src).arg(format!("{}:{}", sshd.destination(), remote.display()));
    rsync.envs(preload_env(&sshd));
    let out = run(&mut rsync);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("soku-preload: relaying fd"),
        "{}",
        describe(&rsync, &out)
    );
    assert_same_file(&src, &remote);
}

#[test]
fn git_clone_and_push_through_preload() {
    let sshd = Sshd::start();
    let tmp = tempfile::tempdir().unwrap();
    let git = |dir: &Path, args: &[&str]| {
        let mut cmd = Command::new("git");
        cmd.current_dir(dir).args(args);
        cmd.env("GIT_SSH_COMMAND", format!("ssh {}", sshd.ssh_args().join(" ")));
        cmd.env("GIT_AUTHOR_NAME", "t").env("GIT_AUTHOR_EMAIL", "t@example.invalid");
        cmd.env("GIT_COMMITTER_NAME", "t").env("GIT_COMMITTER_EMAIL", "t@example.invalid");
        cmd.envs(preload_env(&sshd));
        run(&mut cmd)
    };
    let origin = tmp.path().join("origin.git");
    git(tmp.path(), &["init", "-q", "--bare", &origin.display().to_string()]);
    let url = format!("ssh://{}:{}{}", sshd.destination(), sshd.port(), origin.display());

    // Push a commit holding a 3 MiB file, clone it back, compare.
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    git(&work, &["init", "-q"]);
    let src = make_file(&work, "data.bin");
    git(&work, &["add", "data.bin"]);
    git(&work, &["commit", "-q", "-m", "data"]);
    let push = git(&work, &["push", "-q", &url, "HEAD:refs/heads/main"]);
    let clone = git(tmp.path(), &["clone", "-q", "-b", "main", &url, "copy"]);
    for out in [push, clone] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("soku-preload: relaying fd"), "the hook did not run:\n{err}");
    }
    assert_same_file(&src, &tmp.path().join("copy/data.bin"));
}

#[test]
fn ssh_bind_address_and_connect_timeout_through_preload() {
    // `-b` binds the socket before connect and ConnectTimeout makes ssh connect
    // non-blocking (poll, then SO_ERROR): both must survive the hook.
    let sshd = Sshd::start();
    let mut ssh = Command::new("ssh");
    ssh.envs(preload_env(&sshd)).args(["-b", "127.0.0.2", "-o", "ConnectTimeout=20"]);
    ssh.args(sshd.ssh_args()).args(sshd.ssh_port_args()).arg(sshd.destination());
    ssh.arg("echo $SSH_CONNECTION");
    let out = run(&mut ssh);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("127.0.0.2 "),
        "sshd did not see the bound address\n{}",
        describe(&ssh, &out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("soku-preload: relaying fd"),
        "{}",
        describe(&ssh, &out)
    );
}

#[test]
fn preload_without_soku_preload_changes_nothing() {
    let sshd = Sshd::start();
    let tmp = tempfile::tempdir().unwrap();
    for value in [None, Some("")] {
        let mut env = vec![
            ("LD_PRELOAD", preload_lib().display().to_string()),
            ("SOKU_PRELOAD_DEBUG", "1".to_string()),
        ];
        if let Some(v) = value {
            env.push(("SOKU_PRELOAD", v.to_string()));
        }
        let extra = sshd.scp_port_args();
        let mut scp = Command::new("scp");
        scp.env_remove("SOKU_PRELOAD");
        let err = {
            let src = make_file(tmp.path(), "plain.bin");
            let remote = tmp.path().join("plain-remote.bin");
            scp.args(sshd.ssh_args()).args(&extra).envs(env.iter().map(|(k, v)| (k, v)));
            scp.arg(&src).arg(format!("{}:{}", sshd.destination(), remote.display()));
            let out = run(&mut scp);
            assert_same_file(&src, &remote);
            String::from_utf8_lossy(&out.stderr).into_owned()
        };
        assert!(!err.contains("soku-preload"), "hooked although SOKU_PRELOAD is {value:?}:\n{err}");
    }
    // Ordinary programs that use sockets and names still work.
    let mut ssh = Command::new("ssh");
    ssh.env("LD_PRELOAD", preload_lib()).env_remove("SOKU_PRELOAD");
    ssh.args(sshd.ssh_args())
        .args(sshd.ssh_port_args())
        .arg(sshd.destination())
        .arg("echo $SSH_CONNECTION");
    let out = run(&mut ssh);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("127.0.0.1 "),
        "{}",
        describe(&ssh, &out)
    );
}

#[test]
fn preload_reports_original_addresses_to_ssh() {
    // ssh logs the peer it sees; with the hook it must still be the real sshd address.
    let sshd = Sshd::start();
    let mut ssh = Command::new("ssh");
    // ssh takes the first value of an option: DEBUG1 before the testkit's LogLevel=ERROR.
    ssh.envs(preload_env(&sshd)).args(["-o", "LogLevel=DEBUG1", "-o", "CheckHostIP=yes"]);
    ssh.args(sshd.ssh_args()).args(sshd.ssh_port_args()).arg(sshd.destination()).arg("true");
    let out = run(&mut ssh);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("soku-preload: relaying fd"), "{}", describe(&ssh, &out));
    assert!(
        err.contains(&format!("Authenticated to 127.0.0.1 ([127.0.0.1]:{})", sshd.port())),
        "{}",
        describe(&ssh, &out)
    );
}

#[test]
fn bad_arguments_fail_with_one_line() {
    let free = soku_testkit::free_port();
    for (args, want) in [
        (vec!["relay", "--listen", "nonsense", "--to", "127.0.0.1:22"], "bad --listen 'nonsense'"),
        (vec!["relay", "--listen", "127.0.0.1:0", "--to", "127.0.0.1"], "bad --to '127.0.0.1'"),
        (
            vec!["relay", "--listen", "127.0.0.1:0", "--to", "no-such-host.invalid:22"],
            "cannot resolve",
        ),
        (vec!["proxy", "127.0.0.1", &free.to_string()], "cannot connect to 127.0.0.1:"),
        (vec!["proxy", "no-such-host.invalid", "22"], "cannot resolve"),
    ] {
        let mut cmd = Command::new(soku_bin());
        cmd.args(&args);
        let out = output(&mut cmd);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}", describe(&cmd, &out));
        assert!(err.starts_with("soku: ") && err.contains(want), "{}", describe(&cmd, &out));
        assert_eq!(err.trim_end().lines().count(), 1, "{}", describe(&cmd, &out));
    }
}
