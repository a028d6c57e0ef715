//! A link over a QUIC connection (RFC 9000): control frames on one bidirectional
//! stream, each chunk on a unidirectional stream of its own, so a lost packet delays
//! only its chunk and chunks are read, verified and written in parallel.

use std::sync::Arc;

use bytes::Bytes;
use soku_proto::chunk::ChunkHeader;
use soku_proto::frame;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::control_writer::ControlWriter;
use super::frames::{read_chunk_body, read_frame, read_loop};
use super::{BoxFuture, ChunkMemory, Inbound, Link, LinkTraits, Transport};
use crate::LinkError;

/// Largest chunk-header frame on a data stream.
const MAX_HEADER_FRAME: usize = 256;
/// Chunks in flight from a sender: enough for 1 Gbit/s x 300 ms at 1 MiB chunks (the
/// sender also keeps them within `soku_transport::BULK_BUDGET`).
pub const QUIC_IN_FLIGHT: usize = 64;

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

/// The outgoing half: the control writer, and the connection for chunk streams.
struct QuicTransport {
    conn: quinn::Connection,
    control: ControlWriter,
}

impl Transport for QuicTransport {
    fn control(&self) -> &ControlWriter {
        &self.control
    }

    fn window(&self) -> Option<u64> {
        Some(self.conn.stats().path.cwnd)
    }

    fn loss(&self) -> Option<f64> {
        let path = self.conn.stats().path;
        // A thousand packets: a share to a tenth of a percent, past the handshake.
        (path.sent_packets >= 1000).then(|| path.lost_packets as f64 / path.sent_packets as f64)
    }

    fn send_chunk(
        &self,
        header: ChunkHeader,
        wire: Bytes,
        order: u64,
    ) -> BoxFuture<'_, Result<(), LinkError>> {
        Box::pin(async move {
            // The connection's own reason (timed out, closed by the peer) says more than
            // the stream's ("connection lost").
            let lost = |e: &dyn std::fmt::Display| {
                LinkError::Lost(
                    self.conn.close_reason().map_or_else(|| e.to_string(), |r| r.to_string()),
                )
            };
            let mut stream = self.conn.open_uni().await.map_err(|e| lost(&e))?;
            stream.set_priority(chunk_priority(order)).map_err(|e| lost(&e))?;
            let head = Bytes::from(frame::to_vec(&header)?);
            stream.write_all_chunks(&mut [head, wire]).await.map_err(|e| lost(&e))?;
            stream.finish().map_err(|e| lost(&e))?;
            // Done when acknowledged, not when buffered: the sender bounds chunk data in
            // flight by this, within the budget that leaves room for control frames
            // (`soku_transport::BULK_BUDGET`). A stop code means the receiver dropped
            // the stream after reading its bytes but before the FIN: done too (whether
            // the bytes were right is the receiver's hash check to say).
            stream.stopped().await.map_err(|e| lost(&e))?;
            Ok(())
        })
    }
}

/// A link over `conn`, whose control stream is `send`/`recv` (opened by the client,
/// accepted by the server).
pub fn link(conn: quinn::Connection, send: quinn::SendStream, recv: quinn::RecvStream) -> Link {
    let _ = send.set_priority(CONTROL_PRIORITY);
    let mut tasks = JoinSet::new();
    let (control, write_task) = ControlWriter::start(send);
    tasks.spawn(write_task);
    let (inbox_tx, inbox) = mpsc::channel(super::CHUNKS_IN_MEMORY);
    tasks.spawn(read_loop(recv, inbox_tx.clone(), None));
    tasks.spawn(accept_chunks(conn.clone(), inbox_tx));
    let traits = LinkTraits { ordered: false, chunks_in_flight: QUIC_IN_FLIGHT };
    Link::new(Arc::new(QuicTransport { conn, control }), inbox, traits, tasks)
}

/// Accepts data streams, one chunk each, and reads them concurrently (each within the
/// link's chunk memory). The readers stop with this task.
async fn accept_chunks(conn: quinn::Connection, inbox: mpsc::Sender<Result<Inbound, LinkError>>) {
    let memory = ChunkMemory::new();
    let mut readers = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = conn.accept_uni() => accepted,
            // Reap finished readers so the set does not grow with the copy.
            Some(_) = readers.join_next(), if !readers.is_empty() => continue,
        };
        let mut stream = match accepted {
            Ok(stream) => stream,
            Err(e) => {
                let _ = inbox.send(Err(LinkError::Lost(e.to_string()))).await;
                return;
            }
        };
        let (memory, inbox) = (memory.clone(), inbox.clone());
        readers.spawn(async move {
            let chunk = async {
                let header: ChunkHeader = read_frame(&mut stream, MAX_HEADER_FRAME)
                    .await?
                    .ok_or(soku_proto::ProtoError::Truncated)?;
                read_chunk_body(&mut stream, &memory, &header).await
            }
            .await;
            let _ = inbox.send(chunk.map(Inbound::Chunk)).await;
        });
    }
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
