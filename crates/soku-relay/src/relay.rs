//! `soku relay`: a standalone TCP relay with socket-buffer options.

use crate::{BufferOptions, RelayError};

/// Accepts on `listen` and relays each connection to `to` until stopped.
pub fn run(_listen: &str, _to: &str, _buffers: BufferOptions) -> Result<(), RelayError> {
    Err(RelayError::NotImplemented)
}
