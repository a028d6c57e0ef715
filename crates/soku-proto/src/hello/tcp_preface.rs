//! The preface of each TLS-over-TCP connection: which of the session's connections it
//! is.

use crate::ProtoError;

/// The first two bytes a client sends on each TLS-over-TCP connection: which one it is
/// (0: control, 1..=lanes: chunks) and how many chunk connections the session has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPreface {
    /// 0 for the control connection, `1..=lanes` for chunk connections.
    pub index: u8,
    /// Chunk connections of the session.
    pub lanes: u8,
}

impl TcpPreface {
    /// Its two bytes.
    pub fn to_bytes(self) -> [u8; 2] {
        [self.index, self.lanes]
    }

    /// Reads one from its two bytes; an index beyond the lanes, or no lanes at all, is
    /// malformed.
    pub fn from_bytes(bytes: [u8; 2]) -> Result<TcpPreface, ProtoError> {
        let [index, lanes] = bytes;
        if lanes == 0 || index > lanes {
            return Err(ProtoError::Malformed(format!(
                "tcp connection preface {index}/{lanes}: expected an index of 0..={lanes} \
                 and at least one lane"
            )));
        }
        Ok(TcpPreface { index, lanes })
    }
}
