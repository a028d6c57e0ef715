//! Test support for soku's end-to-end tests (a dev-dependency only).
//!
//! # Layout
//! - [`sshd`]: [`Sshd`], a real OpenSSH `sshd` on loopback with fresh keys, killed on drop.
//! - [`artifacts`]: [`soku_bin`] and [`preload_lib`], the built binary and preload library.
//! - [`cmd`]: [`run`] and [`describe`], running commands with failures that show everything.
//! - [`free_port`]: a free TCP port on 127.0.0.1.
//!
//! ```no_run
//! let sshd = soku_testkit::Sshd::start();
//! let mut ssh = std::process::Command::new("ssh");
//! ssh.args(sshd.ssh_args()).args(sshd.ssh_port_args()).arg(sshd.destination()).arg("true");
//! soku_testkit::run(&mut ssh);
//! ```

pub mod artifacts;
pub mod cmd;
pub mod sshd;

pub use artifacts::{preload_lib, soku_bin};
pub use cmd::{describe, run};
pub use sshd::Sshd;

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
///
/// Another process may take it before the caller binds it: prefer binding port 0
/// directly where the code under test allows it, and retry where it does not.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr of a bound listener").port()
}
