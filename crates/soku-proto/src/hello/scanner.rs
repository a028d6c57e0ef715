//! Finding the server's hello after whatever login scripts printed before it.

use crate::{ProtoError, MAGIC};

/// Most login noise we skip before giving up on a hello.
pub const MAX_NOISE: usize = 1 << 20;

/// Finds [`MAGIC`] in a byte stream, keeping what came before it (login noise) aside.
#[derive(Debug, Default)]
pub struct HelloScanner {
    seen: Vec<u8>,
}

/// What the scanner found.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan {
    /// No magic yet; feed more bytes.
    NeedMore,
    /// Found: the noise before the magic, and the bytes after it (start of the frames).
    Found {
        /// Bytes before the magic (shown to the user in verbose mode).
        noise: Vec<u8>,
        /// Bytes after the magic.
        rest: Vec<u8>,
    },
}

impl HelloScanner {
    /// Adds bytes from the server's stdout and looks for the magic.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Scan, ProtoError> {
        // What was seen before holds no magic, so one can only end in the new bytes:
        // scanning from there keeps a stream fed in small pieces linear, not quadratic.
        let from = self.seen.len().saturating_sub(MAGIC.len() - 1);
        self.seen.extend_from_slice(bytes);
        let found = self.seen[from..].windows(MAGIC.len()).position(|w| w == MAGIC);
        if let Some(at) = found.map(|at| from + at) {
            let rest = self.seen.split_off(at + MAGIC.len());
            self.seen.truncate(at);
            return Ok(Scan::Found { noise: std::mem::take(&mut self.seen), rest });
        }
        if self.seen.len() > MAX_NOISE {
            return Err(ProtoError::NoHello(MAX_NOISE));
        }
        Ok(Scan::NeedMore)
    }

    /// Everything seen so far (for error messages when the stream ends without a hello).
    pub fn seen(&self) -> &[u8] {
        &self.seen
    }
}
