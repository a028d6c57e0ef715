//! The server: `soku serve`, the remote end of a copy that the client starts.
//!
//! - `serve`: the server's bootstrap and the job the client asks for. It runs on Unix
//!   systems only (`crate::unix_only`).
//! - [`ports`]: the ports it listens on for the data.

pub mod ports;
#[cfg(unix)]
pub mod serve;
