//! The job over the client's QUIC connection, the ssh channel beside it
//! (`side_channel.rs`). If this side sends the data and UDP turns out rate-limited, it
//! says so on the ssh channel, and the client moves to TCP (`crate::carrier::policing`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use soku_proto::frame;
use soku_proto::hello::ServerNote;
use soku_transport::TransportError;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

use super::job::Ground;
use super::patience::{within, CLOSE_PATIENCE};
use super::side_channel::{answer_pings_until_closed, send_summary};
use crate::carrier::policing;
use crate::report::ServerSampler;
use soku_engine::link;

/// The task that accepts the client's connection (bounded by its own timeout).
pub type Accepting =
    JoinHandle<Result<Result<quinn::Connection, TransportError>, tokio::time::error::Elapsed>>;

/// How a QUIC job that did not fail ended.
pub enum Ended {
    /// It went well: the endpoint may take the client's next copies (`kept.rs`).
    WentWell,
    /// UDP looked rate-limited: the client was told, and goes on over TCP.
    Policed,
}

/// Serves the job on the connection `accepting` brings. `tcp_ready`: the client can
/// move to TCP, so a UDP rate limit is watched for.
pub async fn serve<R, W>(
    endpoint: &quinn::Endpoint,
    accepting: Accepting,
    tcp_ready: bool,
    input: R,
    output: W,
    ground: &Ground,
) -> anyhow::Result<Ended>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let stall = ground.stall;
    // The client chooses QUIC once its handshake is done, so ours is done too or about
    // to be: a client that says so and stays away is stalled.
    let never =
        || format!("the client chose QUIC but never connected (waited {} s)", stall.as_secs());
    let accepted = within(stall, accepting).await.map_err(|_| anyhow::anyhow!(never()))?;
    let conn = accepted?.map_err(|_| anyhow::anyhow!(never()))??;
    // Woken while the path is silent, so that a blackout's end is noticed within half a
    // second (`soku_transport::wake_when_silent`); kept for the session.
    let _wake = soku_transport::wake_when_silent(&conn);
    // If we send the data and UDP turns out rate-limited, the client moves to TCP.
    let watching = tcp_ready.then(|| tokio::spawn(policing::watch(conn.clone())));
    // The ssh channel's end means the client is gone: stop at once.
    let (watched, gone) = (conn.clone(), Arc::new(AtomicBool::new(false)));
    let channel_gone = gone.clone();
    // Meanwhile the client's pings there are answered (`crate::carrier::shaping`): our
    // output is shared with the notes below from here on.
    let output = Arc::new(tokio::sync::Mutex::new(output));
    let answering = output.clone();
    tokio::spawn(async move {
        answer_pings_until_closed(input, answering).await;
        channel_gone.store(true, Ordering::SeqCst);
        soku_transport::close(&watched, 1, b"ssh channel closed");
    });
    // What failed because of that says so (not QUIC's "closed").
    let why = |err: anyhow::Error| {
        if gone.load(Ordering::SeqCst) {
            anyhow::anyhow!("ssh channel closed")
        } else {
            err
        }
    };
    let (send, recv) = within(stall, conn.accept_bi()).await?.map_err(|e| why(e.into()))?;
    let mut link = link::quic::link(conn.clone(), send, recv);
    link.set_stall_limit(Some(stall));
    let sampler = ServerSampler::start(ground.started, Some(&conn));
    let result = ground.serve(&mut link, Some(&conn)).await.map_err(why);
    // A copy cut short may have been cut by the watch (whose task can still be
    // returning its verdict: it ends within one look once QUIC is closed).
    let policed = match watching {
        Some(watching) if result.is_err() => policing::verdict(watching).await,
        Some(watching) => {
            watching.abort();
            None
        }
        None => None,
    };
    if let Some(why) = policed {
        // The copy goes on over TCP in the client's next session, once the client has
        // our reason. QUIC's close may be lost to the very rate limit it reports; the
        // ssh channel is not, and the client would otherwise see only ssh end, and take
        // it for an outage.
        let mut note = Vec::new();
        frame::encode(&ServerNote::Policed { why }, &mut note)?;
        let mut output = output.lock().await;
        output.write_all(&note).await?;
        output.flush().await?;
        let _ = tokio::time::timeout(CLOSE_PATIENCE, endpoint.wait_idle()).await;
        return Ok(Ended::Policed);
    }
    if let Ok(sent_data) = result {
        send_summary(&mut *output.lock().await, sampler.finish(sent_data)).await;
    }
    // The client closes the connection once it has what it needs.
    let _ = link.close(CLOSE_PATIENCE).await;
    if result.is_err() {
        // A client that took our reason (a `Fatal`) has closed by now, in `link.close`;
        // one that did not (a broken or hostile one) is not given the patience a second
        // time.
        soku_transport::close(&conn, 1, b"aborted");
    }
    let _ = tokio::time::timeout(CLOSE_PATIENCE, conn.closed()).await;
    result.map(|_| Ended::WentWell)
}
