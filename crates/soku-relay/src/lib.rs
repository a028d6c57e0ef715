//! TCP relays with large buffers, the remedy the seeds found for slow scp uploads
//! (a user-space relay with 1 MB buffers made uploads 25x faster; 8 KB buffers
//! brought the slowness back).
//!
//! # Layout
//! - [`proxy`]: `soku proxy HOST PORT`, an ssh ProxyCommand (stdin/stdout <-> TCP).
//! - [`dial`]: `soku proxy --pass-fd HOST PORT`, ssh's connection made with
//!   `TCP_NODELAY` and handed to ssh (`ProxyUseFdpass`): no relay stays in the path.
//! - [`relay`]: `soku relay --listen ADDR --to HOST:PORT`, a standalone relay.
//! - [`pump`]: the copy loop of one direction, with half-close and byte counts.
//! - [`sock`]: connecting, socket buffers and `TCP_NODELAY`.
//!
//! Each relayed direction runs in its own thread with a 1 MiB buffer, so ssh's
//! single-threaded event loop is paired with a second core that keeps the kernel's
//! socket buffers full. `TCP_NODELAY` is set on every relay socket: a relay must never
//! hold a small tail back waiting for an ACK (the seeds' small-packet problem).

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod delack;
pub mod dial;
pub mod proxy;
pub mod pump;
pub mod relay;
pub mod sock;

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
    /// An I/O error with what was being done.
    #[error("{what}: {source}")]
    Io {
        /// What the relay was doing.
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An address on the command line does not parse.
    #[error("bad {what} '{value}': expected HOST:PORT, e.g. {example}")]
    BadAddress {
        /// Which argument (`--listen`, `--to`).
        what: &'static str,
        /// What was given.
        value: String,
        /// A valid example.
        example: &'static str,
    },
    /// A host name does not resolve.
    #[error("cannot resolve '{host}': {source} (check the host name)")]
    Resolve {
        /// The name.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// No resolved address of the destination accepted the connection.
    #[error("cannot connect to {target}: {source}")]
    Connect {
        /// `host:port`.
        target: String,
        /// The last address's error.
        source: std::io::Error,
    },
    /// The listening address cannot be bound.
    #[error("cannot listen on {addr}: {source} (choose another port, or port 0 for any)")]
    Listen {
        /// The address.
        addr: String,
        /// The bind/listen error.
        source: std::io::Error,
    },
}

impl RelayError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        RelayError::Io { what: what.into(), source }
    }
}
