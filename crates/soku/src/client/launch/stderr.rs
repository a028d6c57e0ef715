//! The remote end's error output (ssh's own messages, and what the remote shell and
//! `soku serve` print) reaches the user through a pipe of ours, not as an inherited
//! descriptor.
//!
//! - **Nothing of ours outlives the command holding the caller's stderr.** A shared
//!   login's master stays after the copy (`shared_login.rs`); holding the caller's own
//!   stderr, it would keep a caller that reads it (`$(soku ... 2>&1)`, a test harness,
//!   a pipe into `tee`) waiting for a minute.
//! - **ssh's multiplexing notes stay off the terminal** (`shared_login.rs`).
//! - **Messages come before soku's own verdict**: when ssh fails to start the remote
//!   end, [`Forward::drain`] lets its lines out before soku says what went wrong.
//! - **Under `--json` each line is a JSON object** (`ssh_stderr`), so that a program
//!   reads every line of soku's stderr the same way.
//! - **The remote end's bytes never act on the terminal**: what the remote shell or a
//!   hostile server prints is made visible line by line (`crate::ui::visible`), as soku's
//!   own lines are; a line that is not UTF-8 is shown, not dropped.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::ChildStderr;
use tokio::task::JoinHandle;

use super::shared_login::is_multiplexing_chatter;

/// How long [`Forward::drain`] waits for the pipe to end. A shared login's master may
/// keep it open (with `-v` it logs to it); what matters has come out by then.
const DRAIN_PATIENCE: Duration = Duration::from_secs(1);

/// What ssh says when its `ProxyUseFdpass` dialer passed back no connection.
fn is_dialer_chatter(line: &str) -> bool {
    line.starts_with("mm_receive_fd: ") || line == "proxy dialer did not pass back a connection"
}

/// The remote soku's last words when it ran out of memory, as Rust's allocator failure
/// prints them (`memory allocation of N bytes failed`, then an abort): seen on the way
/// past, so that the copy does not reconnect to a server that would only fail the same
/// way. One per process: a copy has one remote end.
static OUT_OF_MEMORY: OnceLock<String> = OnceLock::new();

/// The line in which the remote soku said it ran out of memory, if it did.
pub fn remote_out_of_memory() -> Option<&'static str> {
    OUT_OF_MEMORY.get().map(String::as_str)
}

fn is_out_of_memory(line: &str) -> bool {
    line.strip_prefix("memory allocation of ")
        .and_then(|rest| rest.strip_suffix(" bytes failed"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether ssh said it could not log in: from then on its exit status 255 means that,
/// not a remote soku killed as it started. One per process, as [`OUT_OF_MEMORY`].
static LOGIN_FAILED: OnceLock<()> = OnceLock::new();

/// Whether ssh printed one of its own reasons for not logging in.
pub fn ssh_login_failed() -> bool {
    LOGIN_FAILED.get().is_some()
}

/// OpenSSH's lines for a login that did not happen (ssh.c, sshconnect.c, sshconnect2.c,
/// kex.c of OpenSSH 9): no connection, a host key not accepted, no way to authenticate.
fn is_login_failure(line: &str) -> bool {
    const STARTS: [&str; 10] = [
        "ssh: connect to host ",
        "ssh: Could not resolve hostname ",
        "Host key verification failed.",
        "kex_exchange_identification: ",
        "Connection closed by ",
        "Connection reset by ",
        "Connection timed out during banner exchange",
        "Unable to negotiate with ",
        "Bad owner or permissions on ",
        "Too many authentication failures",
    ];
    STARTS.iter().any(|start| line.starts_with(start)) || line.contains(": Permission denied (")
}

/// Copies a child's error output to ours, line by line, until the pipe ends.
pub struct Forward(JoinHandle<()>);

impl Forward {
    /// Starts copying `stderr`. With `dials` (soku dials ssh's connection, see
    /// `shared_login.rs`), ssh's notes that the dialer passed nothing back stay off the
    /// terminal: the dialer's own reason is told instead.
    pub fn start(stderr: ChildStderr, dials: bool) -> Forward {
        Forward::spawn(stderr, dials, None)
    }

    /// Starts copying the error output of a soku that copies from `origin` to another
    /// remote host (`client/between_remotes.rs`): its lines name its own side "local",
    /// which for the user is `origin`.
    pub fn start_for_origin(stderr: ChildStderr, origin: &str) -> Forward {
        Forward::spawn(stderr, false, Some(format!("soku: {}: ", crate::ui::visible(origin))))
    }

    fn spawn(stderr: ChildStderr, dials: bool, origin: Option<String>) -> Forward {
        Forward(tokio::spawn(async move {
            let mut input = BufReader::new(stderr);
            let mut out = tokio::io::stderr();
            let mut raw = Vec::new();
            loop {
                raw.clear();
                match input.read_until(b'\n', &mut raw).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let bytes = raw.strip_suffix(b"\n").unwrap_or(&raw);
                let mut line = crate::ui::visible_bytes(bytes.strip_suffix(b"\r").unwrap_or(bytes));
                if let (Some(origin), Some(rest)) = (&origin, line.strip_prefix("soku: local: ")) {
                    line = format!("{origin}{rest}");
                }
                if is_out_of_memory(&line) {
                    let _ = OUT_OF_MEMORY.set(line.clone());
                }
                if is_login_failure(&line) {
                    let _ = LOGIN_FAILED.set(());
                }
                let chatter = is_multiplexing_chatter(&line) || dials && is_dialer_chatter(&line);
                if !chatter {
                    // Under `--json` every line is JSON: ssh's and the remote's too.
                    let line = if crate::ui::json() {
                        crate::ui::ssh_line(&String::from_utf8_lossy(bytes))
                    } else {
                        line
                    };
                    let _ = out.write_all(format!("{line}\n").as_bytes()).await;
                }
            }
            let _ = out.flush().await;
        }))
    }

    /// After the child exited: waits (briefly) until everything it wrote is out.
    pub async fn drain(self) {
        let _ = tokio::time::timeout(DRAIN_PATIENCE, self.0).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allocator_failure_line_is_told_from_others() {
        assert!(is_out_of_memory("memory allocation of 46137344 bytes failed"));
        assert!(!is_out_of_memory("memory allocation of  bytes failed"));
        assert!(!is_out_of_memory("soku: memory allocation of 12 bytes failed"));
        assert!(!is_out_of_memory("memory allocation of 12 bytes failed, said the file"));
    }

    #[test]
    fn ssh_reasons_for_no_login_are_told_from_the_remote_commands_words() {
        for line in [
            "Host key verification failed.",
            "ssh: connect to host 192.0.2.1 port 22: Connection refused",
            "ssh: Could not resolve hostname nowhere: Name or service not known",
            "alice@192.0.2.1: Permission denied (publickey).",
            "kex_exchange_identification: read: Connection reset by peer",
        ] {
            assert!(is_login_failure(line), "{line}");
        }
        for line in ["bash: line 1: soku: command not found", "Killed", "soku: remote: ..."] {
            assert!(!is_login_failure(line), "{line}");
        }
    }
}
