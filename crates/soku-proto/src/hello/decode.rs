//! Reading a hello that may be older or newer than this build: hellos only ever grow at
//! the end, so a reader takes the fields it knows and ignores the rest, and a field an
//! older peer's hello ends before is absent.

use crate::ProtoError;

/// Decodes a hello payload, ignoring bytes after the fields this build knows (a newer
/// peer's additions).
pub fn decode_hello<T: serde::de::DeserializeOwned>(payload: &[u8]) -> Result<T, ProtoError> {
    postcard::take_from_bytes(payload)
        .map(|(hello, _)| hello)
        .map_err(|e| ProtoError::Malformed(e.to_string()))
}

/// The next field of a hello, `None` if the hello ended before it.
pub(super) fn optional_field<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> Result<(Option<T>, &[u8]), ProtoError> {
    if bytes.is_empty() {
        return Ok((None, bytes));
    }
    let (value, rest) =
        postcard::take_from_bytes(bytes).map_err(|e| ProtoError::Malformed(e.to_string()))?;
    Ok((Some(value), rest))
}
