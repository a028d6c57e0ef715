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
