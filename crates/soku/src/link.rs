//! The data path between sender and receiver, whichever carries it: a QUIC connection
//! (control on one bidirectional stream, one unidirectional stream per chunk) or the ssh
//! channel itself (control frames and chunks interleaved on one byte stream).
//!
//! Outgoing control messages go through one writer task per link, so any task may send
//! without holding a lock across an await.

use bytes::Bytes;
use soku_proto::chunk::ChunkHeader;
use soku_proto::frame::{self, MAX_CONTROL_FRAME, PREFIX_LEN};
use soku_proto::message::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Largest chunk-header frame on a QUIC data stream.
const MAX_HEADER_FRAME: usize = 256;
/// Outgoing messages queued before senders wait.
const OUTBOX: usize = 64;

/// Boxed byte streams for the ssh-channel transport.
pub type BoxRead = Box<dyn AsyncRead + Send + Unpin>;

/// Something to write on the control channel.
#[derive(Debug)]
pub enum Outbound {
    /// A control message.
    Control(Message),
    /// A chunk (ssh-channel transport only): header, then its wire bytes.
    Chunk(ChunkHeader, Bytes),
}

/// Sends on the control channel; cheap to clone.
#[derive(Debug, Clone)]
pub struct ControlTx(mpsc::Sender<Outbound>);

impl ControlTx {
    /// Queues a control message.
    pub async fn send(&self, msg: Message) -> anyhow::Result<()> {
        self.0
            .send(Outbound::Control(msg))
            .await
            .map_err(|_| anyhow::anyhow!("connection closed while sending"))
    }

    async fn send_chunk(&self, header: ChunkHeader, data: Bytes) -> anyhow::Result<()> {
        self.0
            .send(Outbound::Chunk(header, data))
            .await
            .map_err(|_| anyhow::anyhow!("connection closed while sending"))
    }
}

/// Starts the writer task for a control channel; it ends when every [`ControlTx`] is
/// dropped, after flushing and closing the stream.
pub fn spawn_writer<W: AsyncWrite + Send + Unpin + 'static>(
    mut out: W,
) -> (ControlTx, tokio::task::JoinHandle<anyhow::Result<()>>) {
    let (tx, mut rx) = mpsc::channel::<Outbound>(OUTBOX);
    let task = tokio::spawn(async move {
        let mut buf = Vec::with_capacity(64 * 1024);
        while let Some(first) = rx.recv().await {
            let mut next = Some(first);
            // Batch what is queued into one write: small frames never wait alone.
            while let Some(item) = next.take() {
                match item {
                    Outbound::Control(msg) => frame::encode(&msg, &mut buf)?,
                    Outbound::Chunk(header, data) => {
                        frame::encode(&Message::Chunk(header), &mut buf)?;
                        out.write_all(&buf).await?;
                        buf.clear();
                        out.write_all(&data).await?;
                    }
                }
                if buf.len() < 64 * 1024 {
                    next = rx.try_recv().ok();
                }
            }
            out.write_all(&buf).await?;
            buf.clear();
            out.flush().await?;
        }
        out.shutdown().await?;
        Ok(())
    });
    (ControlTx(tx), task)
}

/// Reads one control frame; `Ok(None)` at a clean end of stream.
pub async fn read_message<R: AsyncRead + Unpin>(input: &mut R) -> anyhow::Result<Option<Message>> {
    read_frame(input, MAX_CONTROL_FRAME).await
}

async fn read_frame<R: AsyncRead + Unpin, T: serde::de::DeserializeOwned>(
    input: &mut R,
    limit: usize,
) -> anyhow::Result<Option<T>> {
    let mut prefix = [0u8; PREFIX_LEN];
    let mut got = 0;
    while got < PREFIX_LEN {
        let n = input.read(&mut prefix[got..]).await?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(soku_proto::ProtoError::Truncated.into());
        }
        got += n;
    }
    let len = frame::payload_len(prefix, limit)?;
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload).await.map_err(truncated)?;
    Ok(Some(frame::decode_payload(&payload)?))
}

fn truncated(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        soku_proto::ProtoError::Truncated.into()
    } else {
        e.into()
    }
}

/// quinn priority of the control stream over chunk streams (0). Control frames are
/// few and small, and one of them (a file's entry) is what the receiver needs before
/// it can take that file's chunks: sent after chunk data already queued, it could wait
/// for flow-control credit that only its own arrival would free (with
/// `soku_transport::BULK_BUDGET`; a copy of three 1 GiB files stalled for good at a
/// file boundary in 3 of 5 runs before both).
pub const CONTROL_PRIORITY: i32 = 1;

/// quinn priority of the chunk sent `order`-th: earlier chunks first, all below the
/// control stream. New chunks would go out in order anyway (`send_fairness(false)`),
/// but quinn queues a stream with lost data behind every stream waiting at its
/// priority (quinn-proto `PendingStreamsQueue::push_pending`), so at one priority for
/// all a retransmission waited behind up to the whole bulk budget (48 MiB, 0.4 s at
/// 1 Gbit/s) and its chunk held that budget, unverified, for as long. By order, the
/// oldest chunk's lost bytes go next. The order wraps every 2^30 chunks (1 PiB at
/// 1 MiB): for a moment then the newest chunk goes first, which costs nothing but order.
pub fn chunk_priority(order: u64) -> i32 {
    const SPAN: u64 = 1 << 30;
    CONTROL_PRIORITY - 1 - i32::try_from(order % SPAN).unwrap_or(0)
}

/// Reads exactly `len` bytes (a chunk's wire bytes). The buffer is reserved, not zeroed:
/// `read_to_end` fills spare capacity directly, which saves a memset per chunk.
pub async fn read_bytes<R: AsyncRead + Unpin>(input: &mut R, len: u32) -> anyhow::Result<Vec<u8>> {
    let mut data = Vec::with_capacity(len as usize);
    (&mut *input).take(u64::from(len)).read_to_end(&mut data).await?;
    if data.len() != len as usize {
        return Err(soku_proto::ProtoError::Truncated.into());
    }
    Ok(data)
}

/// How chunks leave the sender.
#[derive(Clone)]
pub enum ChunkOut {
    /// One QUIC unidirectional stream per chunk.
    Quic(quinn::Connection),
    /// Interleaved with control frames on the ssh channel.
    Stream(ControlTx),
}

impl ChunkOut {
    /// Sends one chunk, the `order`-th of this copy (see [`chunk_priority`]).
    pub async fn send(&self, header: ChunkHeader, data: Bytes, order: u64) -> anyhow::Result<()> {
        match self {
            ChunkOut::Quic(conn) => {
                let mut stream = conn.open_uni().await?;
                stream.set_priority(chunk_priority(order))?;
                let head = Bytes::from(frame::to_vec(&header)?);
                stream.write_all_chunks(&mut [head, data]).await?;
                stream.finish()?;
                // Done when acknowledged, not when buffered: the caller bounds chunk
                // data in flight by its permits, which must stay within the budget
                // that leaves room for control frames (`soku_transport::BULK_BUDGET`).
                // A stop code means the receiver dropped the stream after reading its
                // bytes but before the FIN: done too (whether the bytes were right is
                // the receiver's hash check to say, on the control stream).
                stream.stopped().await?;
                Ok(())
            }
            ChunkOut::Stream(tx) => tx.send_chunk(header, data).await,
        }
    }
}

/// Reads a chunk header at the start of a QUIC data stream.
pub async fn read_chunk_header<R: AsyncRead + Unpin>(input: &mut R) -> anyhow::Result<ChunkHeader> {
    read_frame(input, MAX_HEADER_FRAME)
        .await?
        .ok_or_else(|| soku_proto::ProtoError::Truncated.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_go_in_send_order_below_the_control_stream() {
        assert!(chunk_priority(0) < CONTROL_PRIORITY);
        assert!(chunk_priority(0) > chunk_priority(1));
        assert!(chunk_priority(1) > chunk_priority(47));
        // The last order before the wrap still fits an i32 and stays below control.
        let last = chunk_priority((1 << 30) - 1);
        assert!(last < chunk_priority((1 << 30) - 2));
        assert_eq!(chunk_priority(1 << 30), chunk_priority(0));
    }
}
