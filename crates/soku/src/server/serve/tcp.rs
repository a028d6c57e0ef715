//! The job over TLS on the TCP connections the client made (`crate::carrier::tcp_path`),
//! the ssh channel beside it (`side_channel.rs`).

use anyhow::Context as _;
use soku_transport::{TcpReport, TlsServerStream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;

use super::job::Ground;
use super::patience::CLOSE_PATIENCE;
use super::side_channel::{channel_closed, send_summary};
use crate::carrier::tcp_path::TcpConnections;
use crate::report::ServerSampler;

/// The TCP listener's socket report, and the task that gathers the client's
/// connections (bounded by its own timeout).
pub type Gathering =
    (TcpReport, JoinHandle<Result<TcpConnections<TlsServerStream>, tokio::time::error::Elapsed>>);

/// Serves the job over the `lanes` data connections the client chose.
pub async fn serve<R, W>(
    gathering: Option<Gathering>,
    lanes: u8,
    input: R,
    mut output: W,
    ground: &Ground,
) -> anyhow::Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let Some((report, gathering)) = gathering else {
        anyhow::bail!("client chose TCP, which this server does not offer");
    };
    let conns = gathering.await?.context("the client chose TCP but never connected")?;
    if conns.lanes.len() != usize::from(lanes) {
        anyhow::bail!(
            "client chose TCP with {lanes} data connections but opened {}",
            conns.lanes.len()
        );
    }
    let mut link = conns.into_link(&report);
    link.set_stall_limit(Some(ground.stall));
    let sampler = ServerSampler::start(ground.started, None);
    // The ssh channel's end means the client is gone: stop at once.
    let result = tokio::select! {
        result = ground.serve(&mut link, None) => result,
        () = channel_closed(input) => Err(anyhow::anyhow!("ssh channel closed")),
    };
    if let Ok(sent_data) = result {
        send_summary(&mut output, sampler.finish(sent_data)).await;
    }
    let _ = link.close(CLOSE_PATIENCE).await;
    result.map(drop)
}
