//! Running commands in tests: a failure shows the command, its status, stdout and stderr.

use std::process::{Command, Output};

/// Runs `cmd` to completion (stdin closed) and returns its output; panics with
/// [`describe`]'s text if it cannot start or exits unsuccessfully.
pub fn run(cmd: &mut Command) -> Output {
    let out = output(cmd);
    assert!(out.status.success(), "command failed\n{}", describe(cmd, &out));
    out
}

/// Runs `cmd` to completion (stdin closed) whatever its exit status; panics only
/// if it cannot be started.
pub fn output(cmd: &mut Command) -> Output {
    cmd.stdin(std::process::Stdio::null());
    match cmd.output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run {}: {e}", show(cmd)),
    }
}

/// The command line, exit status, stdout and stderr, for a failure message.
pub fn describe(cmd: &Command, out: &Output) -> String {
    format!(
        "command: {}\nstatus: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        show(cmd),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The command line with its extra environment, shell-like.
pub fn show(cmd: &Command) -> String {
    let mut parts: Vec<String> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), v?.to_string_lossy())))
        .collect();
    parts.push(cmd.get_program().to_string_lossy().into_owned());
    parts.extend(cmd.get_args().map(|a| {
        let a = a.to_string_lossy();
        if a.is_empty() || a.contains([' ', '\'', '"', '%']) {
            format!("'{}'", a.replace('\'', r"'\''"))
        } else {
            a.into_owned()
        }
    }));
    parts.join(" ")
}

/// Like [`output`], but panics (after killing it) if `cmd` has not exited and closed
/// its stdout and stderr within `limit`: for commands that could hang.
pub fn output_within(cmd: &mut Command, limit: std::time::Duration) -> Output {
    use std::io::Read;
    use std::process::Stdio;
    use std::sync::mpsc;

    let deadline = std::time::Instant::now() + limit;
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}", show(cmd)));
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
        rx
    };
    let stdout = read_all(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = read_all(Box::new(child.stderr.take().expect("piped stderr")));
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the command") {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} did not finish within {limit:?}", show(cmd));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let collect = |rx: mpsc::Receiver<Vec<u8>>, name: &str| {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!("{}: its {name} stayed open past {limit:?} after it exited", show(cmd))
        })
    };
    let stdout = collect(stdout, "stdout");
    let stderr = collect(stderr, "stderr");
    Output { status, stdout, stderr }
}
