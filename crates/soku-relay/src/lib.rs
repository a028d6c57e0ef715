//! TCP relays with large buffers, the remedy the seeds found for slow scp uploads
//! (a user-space relay with 1 MB buffers made uploads 25x faster).
//!
//! # Layout
//! - [`proxy`]: `soku proxy HOST PORT`, an ssh ProxyCommand (stdin/stdout <-> TCP).
//! - [`relay`]: `soku relay --listen ADDR --to HOST:PORT`, a standalone relay.

pub mod proxy;
pub mod relay;

/// Socket buffer sizes for a relay; `None` asks for the largest the kernel allows.
#[derive(Debug, Clone, Copy, Default)]
pub struct BufferOptions {
    /// SO_SNDBUF in bytes.
    pub sndbuf: Option<usize>,
    /// SO_RCVBUF in bytes.
    pub rcvbuf: Option<usize>,
}

/// What can go wrong in a relay.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The relay is not built yet.
    #[error("not implemented yet")]
    NotImplemented,
    /// An I/O error with what was being done.
    #[error("{what}: {source}")]
    Io {
        /// What the relay was doing.
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
}
