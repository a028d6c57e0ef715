//! `soku proxy HOST PORT`: an ssh ProxyCommand relay.
//!
//! `ssh -o ProxyCommand='soku proxy %h %p' host` keeps the real host name, so
//! known_hosts is looked up as usual. Two threads: stdin -> socket (then
//! `shutdown(Write)`) and socket -> stdout (then stdout is closed, which is how ssh
//! learns the server went away); the process ends when both are done.

use std::fs::File;
use std::net::Shutdown;
use std::os::fd::AsFd;

use crate::pump::pump;
use crate::sock::{self, Target};
use crate::{BufferOptions, RelayError};

/// Relays stdin/stdout to `host:port` until both directions close.
pub fn run(host: &str, port: u16, buffers: BufferOptions) -> Result<(), RelayError> {
    if host.is_empty() {
        return Err(RelayError::BadAddress { what: "host", value: String::new(), example: "%h" });
    }
    let target = Target { host: host.to_string(), port };
    let stream = sock::connect(&target, buffers)?;
    if std::env::var_os("SOKU_RELAY_STATS").is_some() {
        let (snd, rcv) = sock::buffer_sizes(&stream);
        eprintln!("soku proxy: connected to {target}, SO_SNDBUF {snd}, SO_RCVBUF {rcv}");
    }
    let up_stream = stream.try_clone().map_err(|e| RelayError::io("cloning the socket", e))?;
    let up = std::thread::spawn(move || {
        let result = pump(std::io::stdin().lock(), &up_stream);
        let _ = up_stream.shutdown(Shutdown::Write);
        result
    });

    let stdout = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| RelayError::io("duplicating stdout", e))?;
    let down = pump(&stream, File::from(stdout));
    close_stdout();
    if down.is_err() {
        // The server side is gone or stdout is: nothing more can be delivered.
        let _ = stream.shutdown(Shutdown::Both);
    }
    let up = up.join().unwrap_or_else(|_| Err(std::io::Error::other("stdin thread panicked")));
    down.map_err(|e| RelayError::io(format!("relaying from {target}"), e))?;
    up.map_err(|e| RelayError::io(format!("relaying to {target}"), e))?;
    Ok(())
}

/// Points fd 1 at `/dev/null`, closing the pipe to ssh so it sees end of file while
/// stdin may still be open. fd 1 stays valid, so nothing else can be opened on it.
#[allow(unsafe_code)]
fn close_stdout() {
    use std::os::fd::AsRawFd;
    let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else {
        return;
    };
    // SAFETY: dup2 on two open fds (`null` lives until the end of this function);
    // fd 1 is replaced atomically and the copy used for relaying is already dropped.
    unsafe {
        libc::dup2(null.as_raw_fd(), 1);
    }
}
