//! The server: `soku serve`, the remote end of a copy that the client starts.
//!
//! - [`serve`]: the server's bootstrap and the job the client asks for.
//! - [`ports`]: the ports it listens on for the data.

pub mod ports;
pub mod serve;
