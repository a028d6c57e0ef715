//! Opening a job on a kept server (one that stays after its first job): the
//! version that brought it, and the first frame of each later job.

use serde::{Deserialize, Serialize};

use super::client::ReceivePreview;
use super::decode::optional_field;
use crate::ProtoError;

/// The first protocol whose server stays when the client's hello asks it to
/// ([`ClientHello::keep`](super::ClientHello::keep)): it then takes more connections from the client's
/// certificate on its QUIC endpoint, a job each, until it has been idle a while, and
/// ends each job that went well with its [`ServerNote::Summary`](super::ServerNote::Summary) on a bidirectional
/// stream it opens on that connection.
pub const KEEP_SINCE_VERSION: u16 = 7;

/// The first frame on the stream a client opens for its job on a kept server (since
/// protocol 7, see [`KEEP_SINCE_VERSION`]), before the job's request: what the client's
/// hello carried over ssh for the first job, where it still applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptOpening {
    /// A download's [`ReceivePreview::NothingHeld`]. An upload's preview is not sent:
    /// its answer would come a round trip after the handshake, as late as the held
    /// report it spares.
    pub receive_preview: Option<ReceivePreview>,
    /// [`ClientHello::open_files`](super::ClientHello::open_files) of this client, which may not be the process whose
    /// hello the server read over ssh. Absent from an older client's opening (none);
    /// read with [`decode_kept_opening`].
    pub open_files: Option<u64>,
}

/// Decodes a [`KeptOpening`]: an older client's ends after its preview.
pub fn decode_kept_opening(payload: &[u8]) -> Result<KeptOpening, ProtoError> {
    let (receive_preview, rest) = postcard::take_from_bytes::<Option<ReceivePreview>>(payload)
        .map_err(|e| ProtoError::Malformed(e.to_string()))?;
    let (open_files, _) = optional_field::<Option<u64>>(rest)?;
    Ok(KeptOpening { receive_preview, open_files: open_files.flatten() })
}
