//! The bootstrap frames the client sends before the data path is up.

use anyhow::Context as _;
use soku_proto::frame;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Reads a bootstrap frame (the client's hello or its transport choice), at most 4 KiB,
/// to be decoded by `soku_proto::hello` (which ignores fields a newer client appended).
pub async fn read_small_frame<R: AsyncRead + Unpin>(input: &mut R) -> anyhow::Result<Vec<u8>> {
    let mut prefix = [0u8; frame::PREFIX_LEN];
    input.read_exact(&mut prefix).await.context("the client closed the channel")?;
    let len = frame::payload_len(prefix, 4096)?;
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload).await.context("the client closed the channel")?;
    Ok(payload)
}
