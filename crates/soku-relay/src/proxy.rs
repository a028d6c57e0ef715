//! `soku proxy HOST PORT`: an ssh ProxyCommand relay.

use crate::{BufferOptions, RelayError};

/// Relays stdin/stdout to `host:port` until both directions close.
pub fn run(_host: &str, _port: u16, _buffers: BufferOptions) -> Result<(), RelayError> {
    Err(RelayError::NotImplemented)
}
