//! The client: the copy command, the remote server it starts, and the session that
//! carries the copy.
//!
//! - [`copy`]: the copy command; [`sync`]: `soku sync`, the same copy under rsync's
//!   rules; [`demo`]: the same over loopback with no remote;
//!   [`interrupt`]: the user's Ctrl-C during a copy; [`retry`]: when a copy that lost
//!   its connection tries again.
//! - `sftp`: `soku sftp`, an interactive session whose transfers are copies (Unix
//!   only: its terminal and signals are Unix's; `crate::unix_only`).
//! - [`between_remotes`] and [`through_here`]: copies between two remote hosts (`-R`,
//!   `-3`).
//! - [`launch`]: starting the remote `soku serve` (ssh, `-S`, `-e`, or locally), and one
//!   ssh login shared by copies that follow each other.
//! - [`session`]: client bootstrap (hellos, the transport choice) into a `soku_engine`
//!   link, one file per carrier (QUIC, TCP, the ssh channel, a kept server);
//!   [`kept`]: the client's record of the kept server, which stays for the next copies.
//! - [`path_memory`]: what copies learned about each path, for the next copy's start;
//!   [`path_board`]: the path's min RTT shared by concurrent copies.
//! - [`preview`]: what the receiving side holds, told before the copy begins.
//! - `bootstrap_test`: the session's and the server's bootstraps against each other in
//!   one process.
//! - [`private_dir`]: soku's own directories under the user's runtime directory.

pub mod between_remotes;
#[cfg(all(test, unix))]
mod bootstrap_test;
pub mod copy;
pub mod demo;
pub mod interrupt;
pub mod kept;
pub mod launch;
pub mod path_board;
pub mod path_memory;
pub mod preview;
pub mod private_dir;
pub mod retry;
pub mod session;
#[cfg(unix)]
pub mod sftp;
pub mod sync;
pub mod through_here;
