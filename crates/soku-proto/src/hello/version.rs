//! Picking the protocol version both sides speak, each from the other's range.

use std::ops::RangeInclusive;

use crate::ProtoError;

/// The newest version in both `local` and `remote`, or why there is none; `remote`
/// names the peer in the error ("the remote host", "the client").
pub fn negotiate(
    local: RangeInclusive<u16>,
    remote_range: RangeInclusive<u16>,
    remote: &'static str,
) -> Result<u16, ProtoError> {
    let lo = (*local.start()).max(*remote_range.start());
    let hi = (*local.end()).min(*remote_range.end());
    if lo <= hi {
        Ok(hi)
    } else {
        Err(ProtoError::VersionMismatch {
            remote,
            remote_min: *remote_range.start(),
            remote_max: *remote_range.end(),
            local_min: *local.start(),
            local_max: *local.end(),
        })
    }
}
