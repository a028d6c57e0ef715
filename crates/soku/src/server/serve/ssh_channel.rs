//! The job in the ssh channel itself (`soku_engine::link::stream`): stdin and stdout
//! carry the data after the hellos.

use tokio::io::{AsyncRead, AsyncWrite};

use super::job::Ground;
use super::patience::CLOSE_PATIENCE;
use soku_engine::link;

/// Serves the job on the channel's halves.
pub async fn serve<R, W>(input: R, output: W, ground: &Ground) -> anyhow::Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let mut link = link::stream::link(input, output);
    link.set_stall_limit(Some(ground.stall));
    let result = ground.serve(&mut link, None).await;
    let _ = link.close(CLOSE_PATIENCE).await;
    result.map(drop)
}
