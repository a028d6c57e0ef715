//! Ctrl-C (SIGINT; the console's Ctrl-C event on Windows) during a copy.
//!
//! Killed by the signal's default action, the client told the remote nothing: a job on
//! a kept server (`server/serve/kept.rs`), reached over QUIC with no ssh channel whose end
//! would tell it, went on holding the upload's partial files until its client had been
//! silent for 15 s, and the same command run again at once waited for them, with
//! nothing verified. So the copy takes the signal itself:
//! - while the data moves, it closes its QUIC connection with [`CLOSE_CODE`] (the
//!   remote job ends as the close arrives, and lets go of its partial files) and stops
//!   its ssh, lets its own chunk writes land (a download's), and ends;
//! - before (logging in, connecting) or between sessions (waiting to reconnect), it
//!   ends at once: its ssh ends with it, and with ssh the remote soku;
//! - either way with one line, saying whether the same command resumes the copy (it
//!   does unless `--no-resume` removed what arrived), and exit status 130, as a shell
//!   reports a command that Ctrl-C ended.
//!
//! A second Ctrl-C ends the process at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::exit::Exit;

/// QUIC close code of a client interrupted by its user (beside those in `client/session/side_channel.rs`
/// and `server/serve/kept.rs`).
pub const CLOSE_CODE: u32 = 6;
/// Exit status of an interrupted copy: 128 + SIGINT.
pub const EXIT_CODE: u8 = 130;

/// The user's Ctrl-C, once it came; cheap to clone.
#[derive(Clone)]
pub struct Interrupt {
    fired: watch::Receiver<bool>,
    /// A session's copy is running, and ends by itself when told (see [`Copying`]).
    copying: Arc<AtomicBool>,
}

impl Interrupt {
    /// Takes SIGINT from now on, in place of its default action (the process's end).
    pub fn listen() -> std::io::Result<Interrupt> {
        let mut signals = crate::sys::Interrupts::listen()?;
        let (tx, fired) = watch::channel(false);
        // The listener ends with the copy (every receiver dropped): a session that runs
        // copies one after another (`soku sftp`) must not take a later copy's Ctrl-C
        // for this one's second.
        tokio::spawn(async move {
            tokio::select! {
                got = signals.recv() => if got.is_none() { return },
                () = tx.closed() => return,
            }
            tx.send_replace(true);
            tokio::select! {
                got = signals.recv() => if got.is_some() {
                    std::process::exit(i32::from(EXIT_CODE));
                },
                () = tx.closed() => {}
            }
        });
        Ok(Interrupt { fired, copying: Arc::default() })
    }

    /// Whether the user interrupted the copy.
    pub fn fired(&self) -> bool {
        *self.fired.borrow()
    }

    /// Returns once the user interrupts the copy.
    pub async fn wait(&self) {
        let mut fired = self.fired.clone();
        // An error: the listener is gone, and no interrupt will come.
        if fired.wait_for(|fired| *fired).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Returns once the user interrupts the copy while no session's copy runs (that
    /// one ends by itself, having told the remote): the command then ends at once.
    pub async fn outside_copy(&self) {
        self.wait().await;
        if self.copying.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }

    /// Marks a session's copy as running, until the guard is dropped.
    pub fn copying(&self) -> Copying {
        self.copying.store(true, Ordering::SeqCst);
        Copying(self.copying.clone())
    }
}

/// A session's copy runs: an interrupt is its to handle ([`Interrupt::copying`]).
pub struct Copying(Arc<AtomicBool>);

impl Drop for Copying {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// The copy was interrupted by its user.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// The line and exit status of an interrupted copy; `resumes`: the partial files are
/// kept (no `--no-resume`).
pub fn exit(resumes: bool) -> Exit {
    let message = if resumes {
        "interrupted: what arrived is kept: run the same command again to resume the copy"
    } else {
        "interrupted: with --no-resume nothing unfinished is kept; the same command copies \
         the unfinished files again from the start"
    };
    Exit { code: EXIT_CODE, message: message.into() }
}
