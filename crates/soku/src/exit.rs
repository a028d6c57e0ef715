//! Exit codes, one table for the whole binary (also in the README):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | everything was copied and verified |
//! | 1 | a copy failed: bad source, bad target, verification or transfer error |
//! | 2 | bad command line (clap's usage errors) or config file |
//! | 3 | the receiving side ran out of space (or quota): the copy stopped, what arrived is kept, and the same command resumes it once there is space |
//! | 130 | the user interrupted the copy (Ctrl-C, `crate::client::interrupt`) |
//! | 255 | the connection failed: ssh could not connect, or the remote has no soku |

use std::io::Write;
use std::process::ExitCode;

/// Every exit status and what it means, for the man page (the table above says the same).
pub const STATUSES: [(u8, &str); 6] = [
    (0, "everything was copied and verified"),
    (1, "a copy failed: a bad source or target, or a verification or transfer error"),
    (2, "a bad command line or config file"),
    (3, "the receiving side ran out of space or quota: the copy stopped, what arrived and the partial files are kept, and running the same command again once there is space resumes it"),
    (130, "the user interrupted the copy (Ctrl-C); running the same command again resumes it"),
    (255, "the connection failed: ssh could not connect, the remote has no soku, or a lost connection did not come back within --retry-for"),
];

/// The copy (or command) failed.
pub const FAILURE: u8 = 1;
/// The receiving side ran out of space ([`Stopped`]).
pub const NO_SPACE: u8 = 3;
/// The connection to the remote could not be set up.
pub const CONNECTION: u8 = 255;

/// An error that chooses its own exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Exit {
    /// The exit code to use.
    pub code: u8,
    /// The one-line message.
    pub message: String,
}

impl Exit {
    /// A connection-level failure (exit 255).
    pub fn connection(message: impl Into<String>) -> Self {
        Self { code: CONNECTION, message: message.into() }
    }
}

/// A copy stopped because the receiving side ran out of space: its one line (the side,
/// the path, the problem), then the summary of what that side holds
/// ([`crate::ui::unfinished`]); exit [`NO_SPACE`].
#[derive(Debug, thiserror::Error)]
#[error("{side}: {line}")]
pub struct Stopped {
    /// The receiving side: "local" or "remote".
    pub side: &'static str,
    /// Its line: the path and the problem.
    pub line: String,
    /// What it holds.
    pub facts: soku_proto::message::Unfinished,
}

/// A failure of `soku serve` that the client has been told of and shows as
/// `remote: ...`: the server exits 1 without printing it (its error output reaches the
/// user's terminal too).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Told(pub String);

/// Prints the error, if any, as one line `soku: ...` and picks the exit code.
pub fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            let stopped = err.downcast_ref::<Stopped>();
            let code = match stopped {
                Some(_) => NO_SPACE,
                None => err.downcast_ref::<Exit>().map_or(FAILURE, |e| e.code),
            };
            // Its one line is the client's to show: printed here too, it came out twice.
            if err.downcast_ref::<Told>().is_some() {
                return ExitCode::from(code);
            }
            if crate::ui::json() {
                // A program reads every line as JSON; the summary of a stopped copy went
                // out as its `unfinished` event.
                let mut line = crate::ui::error_line(&one_line(&err), code).into_bytes();
                line.push(b'\n');
                let _ = std::io::stderr().lock().write_all(&line);
                return ExitCode::from(code);
            }
            crate::ui::say(&format!("soku: {}", one_line(&err)));
            if let Some(stopped) = stopped {
                for line in crate::ui::unfinished::summary(&stopped.facts, stopped.side) {
                    crate::ui::say(&format!("soku: {line}"));
                }
            }
            ExitCode::from(code)
        }
    }
}

/// Writes to stdout; a closed pipe (`soku man | head`) is not an error.
pub fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The error and its causes on one line: `outer: inner: root`.
pub fn one_line(err: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

/// Bad command line.
pub const USAGE: u8 = 2;

impl Exit {
    /// A usage error (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self { code: USAGE, message: message.into() }
    }

    /// A failed copy (exit 1).
    pub fn failure(message: impl Into<String>) -> Self {
        Self { code: FAILURE, message: message.into() }
    }
}
