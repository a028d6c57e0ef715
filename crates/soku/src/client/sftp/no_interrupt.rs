//! The session's ssh, started with SIGINT ignored.
//!
//! The terminal sends Ctrl-C's SIGINT to every process of its foreground group: soku,
//! and the ssh it started. A copy's ssh may end with it (the copy ends anyway); the
//! session's must not. An ignored signal stays ignored across exec (POSIX, exec(3p)),
//! and OpenSSH's client leaves SIGINT ignored when it found it so; sftp(1) starts its
//! ssh the same way. A new process group would be no answer: ssh reading a password
//! from the terminal outside the foreground group is stopped (SIGTTIN).

/// Makes the child of `cmd` ignore SIGINT.
#[allow(unsafe_code)]
pub fn ignore_interrupt(cmd: &mut tokio::process::Command) {
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe functions may be called; signal(2) is one (signal-safety(7)),
    // and the closure touches no memory of the parent's.
    unsafe {
        cmd.pre_exec(|| {
            if libc::signal(libc::SIGINT, libc::SIG_IGN) == libc::SIG_ERR {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
