//! `soku sftp` through a real sshd: batches as sftp(1) runs them, the browse job's
//! answers, transfers as verified copies, a fenced server.

use std::path::Path;
use std::process::Stdio;

use soku_testkit::describe;

use crate::common::{self, Env};

/// `soku sftp` with the options that reach the test sshd, to `host:dir`.
fn sftp(env: &Env, dir: &Path) -> std::process::Command {
    let mut cmd = env.soku_sub("sftp");
    cmd.arg(env.remote(dir));
    cmd
}

/// Writes `lines` as a batch file and returns its path.
fn batch(env: &Env, name: &str, lines: &[String]) -> std::path::PathBuf {
    let path = env.path(name);
    std::fs::write(&path, lines.join("\n") + "\n").expect("write batch");
    path
}

#[test]
fn a_batch_lists_changes_directory_gets_and_puts_renames_and_removes() {
    let env = Env::new();
    let remote = env.path("remote");
    common::write(&remote.join("r1.txt"), &common::data(300_000, 1));
    common::write(&remote.join("tree/x"), &common::data(5_000, 2));
    common::write(&remote.join("tree/deep/y"), &common::data(70_000, 3));
    common::write(&env.src().join("a.txt"), &common::data(123_456, 4));
    common::write(&env.src().join("up/b"), &common::data(2_000_000, 5));
    common::write(&env.src().join("up/c/d"), b"d");
    let src = env.src().display().to_string();
    let dst = env.dst().display().to_string();
    let file = batch(
        &env,
        "batch",
        &[
            "pwd".into(),
            "ls -l".into(),
            format!("lcd {dst}"),
            "lpwd".into(),
            "get r1.txt".into(),
            "get -r tree".into(),
            "mkdir made".into(),
            "cd made".into(),
            format!("put {src}/a.txt"),
            format!("put -r {src}/up"),
            "rename a.txt renamed.txt".into(),
            "chmod 600 renamed.txt".into(),
            "ls".into(),
            "-rm no-such-file".into(),
            "rm renamed.txt".into(),
            "cd ..".into(),
            "ls t*".into(),
            "df -h".into(),
            "bye".into(),
            "ls never-run".into(),
        ],
    );
    let out = env.ok(sftp(&env, &remote).arg("-b").arg(&file));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = format!("--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}");
    // Every command echoed as sftp echoes it, up to `bye`.
    assert!(stdout.contains("sftp> get -r tree\n"), "{said}");
    assert!(!stdout.contains("never-run"), "nothing runs after bye\n{said}");
    let real = std::fs::canonicalize(&remote).expect("canonical");
    assert!(stdout.contains(&format!("Remote working directory: {}\n", real.display())), "{said}");
    assert!(stdout.contains(&format!("Local working directory: {dst}\n")), "{said}");
    // `ls -l` of the start directory, `ls` of `made` after the rename, the glob.
    assert!(stdout.lines().any(|l| l.starts_with("-rw") && l.ends_with(" r1.txt")), "{said}");
    assert!(stdout.lines().any(|l| l.starts_with('d') && l.ends_with(" tree")), "{said}");
    assert!(stdout.contains("renamed.txt\n") || stdout.contains("renamed.txt "), "{said}");
    assert!(stdout.contains("sftp> ls t*\ntree\n"), "{said}");
    assert!(stdout.contains("%Capacity"), "{said}");
    // The failing `-rm` said why and the batch went on.
    assert!(stderr.contains("no-such-file"), "{said}");
    // Downloads landed where lcd pointed, whole; uploads landed in `made`.
    soku_testkit::assert_same_file(&remote.join("r1.txt"), &env.dst().join("r1.txt"));
    common::assert_same_tree(&remote.join("tree"), &env.dst().join("tree"));
    common::assert_same_tree(&env.src().join("up"), &remote.join("made/up"));
    assert!(!remote.join("made/a.txt").exists() && !remote.join("made/renamed.txt").exists());
}

#[test]
fn a_failing_batch_command_ends_the_batch_unless_it_is_marked() {
    let env = Env::new();
    let remote = env.path("remote");
    std::fs::create_dir_all(&remote).expect("mkdir");
    // Marked with `-`: the batch goes on and ends well.
    let marked = batch(&env, "marked", &["-rm gone".into(), "mkdir after-marked".into()]);
    env.ok(sftp(&env, &remote).arg("-b").arg(&marked));
    assert!(remote.join("after-marked").is_dir());
    // Unmarked: the batch stops there, with sftp's exit status 1.
    let unmarked = batch(&env, "unmarked", &["rm gone".into(), "mkdir after-unmarked".into()]);
    let stderr = common::fails_with(
        sftp(&env, &remote).arg("-b").arg(&unmarked).stdin(Stdio::null()),
        1,
        &["remote: ", "gone: No such file or directory"],
    );
    assert!(!remote.join("after-unmarked").exists(), "the batch went on\n{stderr}");
    // The same from stdin (`-b -`), and a get that fails: a missing remote file.
    let mut cmd = sftp(&env, &remote);
    cmd.args(["-b", "-"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    use std::io::Write as _;
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"get missing.bin\nmkdir after-get\n").expect("write");
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&cmd, &out));
    assert!(!remote.join("after-get").exists());
    assert!(!env.dst().join("missing.bin").exists());
}

#[test]
fn a_read_only_server_lists_and_serves_but_changes_nothing() {
    let env = Env::new();
    let remote = env.path("remote");
    common::write(&remote.join("kept.bin"), &common::data(100_000, 7));
    let options =
        format!("restrict,command=\"{} serve --read-only\"", common::soku_bin().display());
    env.sshd.restrict_key(&options).expect("authorized_keys");
    let file = batch(
        &env,
        "batch",
        &[
            format!("lcd {}", env.dst().display()),
            "ls".into(),
            "get kept.bin".into(),
            "-rm kept.bin".into(),
            "-mkdir made".into(),
            "-put /etc/hostname".into(),
        ],
    );
    let out = env.ok(sftp(&env, &remote).arg("-b").arg(&file));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("read-only"), "{stderr}");
    soku_testkit::assert_same_file(&remote.join("kept.bin"), &env.dst().join("kept.bin"));
    assert!(remote.join("kept.bin").exists() && !remote.join("made").exists());
    assert!(!remote.join("hostname").exists());
}

#[test]
fn a_destination_that_is_no_host_or_directory_is_refused_in_one_line() {
    let env = Env::new();
    common::fails_with(
        env.soku_sub("sftp").arg("./local-dir").stdin(Stdio::null()),
        2,
        &["not a host"],
    );
    let missing = env.path("no-such-dir");
    common::fails_with(
        sftp(&env, &missing).args(["-b", "/dev/null"]).stdin(Stdio::null()),
        1,
        &["no-such-dir: no such directory"],
    );
}

/// A terminal in a private tmux server, running one command.
struct Terminal {
    socket: String,
}

impl Terminal {
    /// Starts `script` (a shell script's text) in a 160x50 terminal.
    fn start(env: &Env, script: &str) -> Terminal {
        let path = env.path("terminal.sh");
        std::fs::write(&path, script).expect("write script");
        let socket = format!("soku-sftp-test-{}-{}", std::process::id(), env.sshd.port());
        let started = std::process::Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d", "-x", "160", "-y", "50"])
            .arg(format!("sh {}", path.display()))
            .status()
            .expect("tmux (apt-get install tmux)");
        assert!(started.success(), "tmux did not start");
        Terminal { socket }
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux")
    }

    /// Types `text` as keys (no Enter), a moment after what was awaited showed, as a
    /// person types. Keys sent the instant a prompt appeared once stalled after their
    /// first letter under CI's load, and the screen kept that letter for 20 s (not
    /// seen again in runs under two busy cores; the cause was not found).
    fn type_text(&self, text: &str) {
        std::thread::sleep(std::time::Duration::from_millis(200));
        self.tmux(&["send-keys", "-l", text]);
    }

    /// Presses a key by tmux's name (`Enter`, `Tab`, `C-c`).
    fn press(&self, key: &str) {
        self.tmux(&["send-keys", key]);
    }

    /// Types `line` and Enter.
    fn line(&self, line: &str) {
        self.type_text(line);
        self.press("Enter");
    }

    /// The whole screen with its scrollback, wrapped lines joined.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-J", "-S", "-"]).stdout)
            .into_owned()
    }

    /// Waits (at most `secs`) until the screen after `from` bytes holds `needle`;
    /// returns where it ends.
    fn wait_for(&self, from: usize, needle: &str, secs: u64) -> usize {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let screen = self.screen();
            if let Some(at) = screen.get(from..).and_then(|rest| rest.find(needle)) {
                return from + at + needle.len();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the terminal never showed {needle:?} after byte {from}\n--- screen ---\n{screen}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

/// A shell word in single quotes.
fn quoted(word: &std::ffi::OsStr) -> String {
    format!("'{}'", word.to_string_lossy().replace('\'', r"'\''"))
}

#[test]
fn a_terminal_session_completes_transfers_and_outlives_a_ctrl_c() {
    let env = Env::new();
    let remote = env.path("remote");
    common::write(&remote.join("r1.txt"), &common::data(10_000, 1));
    common::write(&remote.join("tree/x"), &common::data(50_000, 2));
    common::write(&remote.join("tree/deep/y"), b"y");
    // 24 MB at the session's 16 Mbit/s (-l): 12 s, time enough to interrupt it.
    let big = common::data(24_000_000, 3);
    common::write(&remote.join("big.bin"), &big);
    common::write(&env.src().join("up/a"), &common::data(300_000, 4));
    common::write(&env.src().join("up/b/c"), b"c");
    // The command as the other tests run it, without `timeout`, which would take it out
    // of the terminal's foreground (its reads there would stop it).
    let cmd = sftp(&env, &remote);
    // `timeout -k 5 SECS SOKU sftp ARGS...`: the arguments after `sftp`.
    let args: Vec<String> = cmd.get_args().skip(5).map(quoted).collect();
    let mut script = String::new();
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            script.push_str(&format!("export {}={}\n", key.to_string_lossy(), quoted(value)));
        }
    }
    script.push_str(&format!("export XDG_DATA_HOME={}\n", quoted(env.path("data").as_os_str())));
    script.push_str(&format!("cd {}\n", quoted(env.dst().as_os_str())));
    // The Ctrl-C reaches this shell too: caught (a caught signal is the default again
    // in soku, exec(3p)), it leaves the shell there to print soku's exit status.
    script.push_str("trap true INT\n");
    let soku = quoted(common::soku_bin().as_os_str());
    script.push_str(&format!("{soku} sftp -l 16000 {}\n", args.join(" ")));
    script.push_str("echo \"soku exited $?\"\nsleep 60\n");
    let term = Terminal::start(&env, &script);
    let real = std::fs::canonicalize(&remote).expect("canonical").display().to_string();
    let prompt = format!(":{real}> ");
    let mut at = term.wait_for(0, &prompt, 60);

    term.line("ls -l");
    at = term.wait_for(at, " r1.txt", 20);
    at = term.wait_for(at, &prompt, 20);
    // Tab completes a remote directory's name.
    term.type_text("cd tr");
    term.press("Tab");
    at = term.wait_for(at, "cd tree/", 20);
    term.press("Enter");
    at = term.wait_for(at, &format!(":{real}/tree> "), 20);
    term.line("cd ..");
    at = term.wait_for(at, &prompt, 20);
    term.line("get -r tree");
    // The copy's summary, as a copy on a terminal ends.
    at = term.wait_for(at, "2 files, 48.8 KiB in ", 60);
    at = term.wait_for(at, &prompt, 20);
    common::assert_same_tree(&remote.join("tree"), &env.dst().join("tree"));
    term.line(&format!("put -r {}", env.src().join("up").display()));
    at = term.wait_for(at, "2 files, 293.0 KiB in ", 60);
    at = term.wait_for(at, &prompt, 20);
    common::assert_same_tree(&env.src().join("up"), &remote.join("up"));
    term.line("rename r1.txt r2.txt");
    at = term.wait_for(at, &prompt, 20);
    assert!(remote.join("r2.txt").exists() && !remote.join("r1.txt").exists());
    term.line("rm r2.txt");
    at = term.wait_for(at, &prompt, 20);
    assert!(!remote.join("r2.txt").exists());

    // Ctrl-C during a get ends the copy, keeps what arrived, and the session goes on.
    term.line("get big.bin");
    // The progress line, then a few seconds of data (the partial file has its full
    // length from the start: its size tells nothing).
    at = term.wait_for(at, "% of 22.9 MiB", 30);
    std::thread::sleep(std::time::Duration::from_secs(3));
    term.press("C-c");
    at = term.wait_for(at, "interrupted", 20);
    at = term.wait_for(at, &prompt, 20);
    assert!(!env.dst().join("big.bin").exists(), "a partial file under the final name");
    term.line("pwd");
    at = term.wait_for(at, &format!("Remote working directory: {real}"), 20);
    // The same get again resumes it.
    term.line("get big.bin");
    at = term.wait_for(at, "1 file, 22.9 MiB (", 60);
    at = term.wait_for(at, " already there, ", 5);
    at = term.wait_for(at, &prompt, 20);
    assert_eq!(std::fs::read(env.dst().join("big.bin")).expect("read"), big);
    term.line("bye");
    term.wait_for(at, "soku exited 0", 20);
    let history = std::fs::read_to_string(env.path("data/soku/sftp_history")).expect("history");
    assert!(history.contains("get big.bin"), "{history}");
}
