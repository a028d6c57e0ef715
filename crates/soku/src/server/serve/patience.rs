//! How long the server waits for the client, on the first job and on a kept server's.

use std::time::Duration;

use soku_engine::LinkError;

/// How long the server waits at the end for the client to end its side of the link,
/// and then for it to close the QUIC connection.
pub const CLOSE_PATIENCE: Duration = Duration::from_secs(10);

/// `work`, unless the client lets `stall` pass first: the link's own stall error, so a
/// stalled handshake reads like a stalled copy.
pub async fn within<T>(
    stall: Duration,
    work: impl std::future::Future<Output = T>,
) -> Result<T, LinkError> {
    tokio::time::timeout(stall, work).await.map_err(|_| LinkError::Stalled(stall))
}
