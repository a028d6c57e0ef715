//! The control writer every link uses: one writer task per link, so any task may send
//! without holding a lock across an await; what is queued is batched into one write, so
//! a small frame never waits alone for an ACK (the small-packet problem: a separate
//! short `write` meets Nagle's algorithm and delayed ACKs, RFC 896 and RFC 1122 4.2.3.2).

use std::time::Duration;

use bytes::Bytes;
use soku_proto::chunk::ChunkHeader;
use soku_proto::frame;
use soku_proto::message::Message;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::LinkError;

/// Outgoing messages queued before senders wait.
const OUTBOX: usize = 64;
/// Bytes batched into one write at most.
const BATCH: usize = 64 * 1024;
/// After this long with nothing to write, the writer sends a [`Message::KeepAlive`], so
/// the peer can tell a side that is busy (hashing a large partial file, pacing a slow
/// `-l` copy) from one that stalled ([`super::Link::set_stall_limit`]).
pub const KEEPALIVE_EVERY: Duration = Duration::from_secs(15);

/// Something for the writer task.
enum Outbound {
    /// A control message.
    Control(Message),
    /// A chunk, interleaved with control messages (ordered byte streams only); the
    /// sender, if any, hears when its bytes are written.
    Chunk(ChunkHeader, Bytes, Option<oneshot::Sender<()>>),
    /// Write what is queued, flush, end the stream, and say so.
    Finish(oneshot::Sender<Result<(), LinkError>>),
}

/// The sending end of a writer task; cheap to clone.
#[derive(Debug, Clone)]
pub struct ControlWriter(mpsc::Sender<Outbound>);

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outbound::Control(msg) => write!(f, "Control({})", msg.kind()),
            Outbound::Chunk(header, ..) => write!(f, "Chunk({}/{})", header.file, header.index),
            Outbound::Finish(_) => write!(f, "Finish"),
        }
    }
}

impl ControlWriter {
    /// Starts the writer task on `out`; the caller owns the task.
    pub fn start<W: AsyncWrite + Send + Unpin + 'static>(
        out: W,
    ) -> (ControlWriter, impl std::future::Future<Output = ()> + Send + 'static) {
        Self::start_beating(out, KEEPALIVE_EVERY)
    }

    /// Like [`ControlWriter::start`], with a keep-alive after each `keepalive` of silence.
    pub(crate) fn start_beating<W: AsyncWrite + Send + Unpin + 'static>(
        out: W,
        keepalive: Duration,
    ) -> (ControlWriter, impl std::future::Future<Output = ()> + Send + 'static) {
        let (tx, rx) = mpsc::channel(OUTBOX);
        (ControlWriter(tx), write_loop(out, rx, keepalive))
    }

    /// Queues a control message.
    pub async fn control(&self, msg: Message) -> Result<(), LinkError> {
        self.0.send(Outbound::Control(msg)).await.map_err(|_| LinkError::Closed)
    }

    /// Queues a chunk: its header frame, then its wire bytes.
    pub async fn chunk(&self, header: ChunkHeader, wire: Bytes) -> Result<(), LinkError> {
        self.0.send(Outbound::Chunk(header, wire, None)).await.map_err(|_| LinkError::Closed)
    }

    /// Queues a chunk and waits until its bytes are written to the stream (into the
    /// kernel's socket buffer), so a sender holds no more chunks than it keeps in flight.
    pub async fn chunk_written(&self, header: ChunkHeader, wire: Bytes) -> Result<(), LinkError> {
        let (done, written) = oneshot::channel();
        let item = Outbound::Chunk(header, wire, Some(done));
        self.0.send(item).await.map_err(|_| LinkError::Closed)?;
        written.await.map_err(|_| LinkError::Closed)
    }

    /// Writes everything queued, ends the stream, and waits until that is done.
    pub async fn finish(&self) -> Result<(), LinkError> {
        let (done, wait) = oneshot::channel();
        self.0.send(Outbound::Finish(done)).await.map_err(|_| LinkError::Closed)?;
        wait.await.map_err(|_| LinkError::Closed)?
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut out: W,
    mut rx: mpsc::Receiver<Outbound>,
    keepalive: Duration,
) {
    let mut buf = Vec::with_capacity(BATCH);
    let mut failed: Option<String> = None;
    loop {
        let first = match tokio::time::timeout(keepalive, rx.recv()).await {
            Ok(Some(first)) => first,
            Ok(None) => return,
            Err(_) => Outbound::Control(Message::KeepAlive),
        };
        let mut next = Some(first);
        let mut finish = None;
        // Batch what is queued into one write: small frames never wait alone.
        while let Some(item) = next.take() {
            if failed.is_none() {
                if let Err(e) = queue(&mut out, &mut buf, item, &mut finish).await {
                    failed = Some(e.to_string());
                }
            } else if let Outbound::Finish(done) = item {
                finish = Some(done);
            }
            if finish.is_none() && buf.len() < BATCH {
                next = rx.try_recv().ok();
            }
        }
        if failed.is_none() {
            let written = async {
                out.write_all(&buf).await?;
                out.flush().await
            }
            .await;
            if let Err(e) = written {
                failed = Some(e.to_string());
            }
        }
        buf.clear();
        if let Some(done) = finish {
            let result = match &failed {
                Some(e) => Err(LinkError::Lost(e.clone())),
                None => out.shutdown().await.map_err(LinkError::from),
            };
            let _ = done.send(result);
            return;
        }
    }
}

/// Adds one item to the batch (writing the batch out first for a chunk's bytes).
async fn queue<W: AsyncWrite + Unpin>(
    out: &mut W,
    buf: &mut Vec<u8>,
    item: Outbound,
    finish: &mut Option<oneshot::Sender<Result<(), LinkError>>>,
) -> Result<(), LinkError> {
    match item {
        Outbound::Control(msg) => frame::encode(&msg, buf)?,
        Outbound::Chunk(header, data, written) => {
            frame::encode(&Message::Chunk(header), buf)?;
            out.write_all(buf).await?;
            buf.clear();
            out.write_all(&data).await?;
            if let Some(written) = written {
                let _ = written.send(());
            }
        }
        Outbound::Finish(done) => *finish = Some(done),
    }
    Ok(())
}
