//! Test support for soku's end-to-end tests (a dev-dependency only).
//!
//! # Layout
//! - [`sshd`]: [`Sshd`], a real OpenSSH `sshd` on loopback with fresh keys, killed on drop.
//! - [`artifacts`]: [`soku_bin`], [`preload_lib`] and [`preload_probe`], the built artifacts.
//! - [`cmd`]: [`run`] and [`describe`], running commands with failures that show everything.
//! - [`probe`]: the protocol and server of `preload-probe`, the client binary the
//!   preload library's own tests run (`src/bin/preload_probe.rs`).
//! - [`free_port`] (`port.rs`): a free TCP port on 127.0.0.1.
//! - [`assert_same_file`]: two files hold the same bytes.
//!
//! ```no_run
//! let sshd = soku_testkit::Sshd::start();
//! let mut ssh = std::process::Command::new("ssh");
//! ssh.args(sshd.ssh_args()).args(sshd.ssh_port_args()).arg(sshd.destination()).arg("true");
//! soku_testkit::run(&mut ssh);
//! ```

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod artifacts;
pub mod cmd;
mod port;
pub mod probe;
pub mod sshd;

pub use artifacts::{preload_lib, preload_probe, soku_bin};
pub use cmd::{describe, run};
pub use port::free_port;
pub use sshd::Sshd;

/// Asserts two files hold the same bytes (shows sizes, not bytes, when they differ).
pub fn assert_same_file(a: &std::path::Path, b: &std::path::Path) {
    let x = std::fs::read(a).unwrap_or_else(|e| panic!("read {}: {e}", a.display()));
    let y = std::fs::read(b).unwrap_or_else(|e| panic!("read {}: {e}", b.display()));
    assert!(
        x == y,
        "{} ({} bytes) and {} ({} bytes) differ",
        a.display(),
        x.len(),
        b.display(),
        y.len()
    );
}
