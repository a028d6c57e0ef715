//! A link over several ordered byte streams (TLS over TCP, where UDP does not get
//! through): the first stream carries the control messages alone, the others ("lanes")
//! carry chunks, each chunk whole on one lane.
//!
//! - One TCP connection's window is bounded by its socket buffers and halves its rate
//!   at a loss; several lanes share the path's loss and buffer limits among them, so a
//!   big file's chunks are striped across all of them and small files spread out.
//! - Control travels alone so it never queues behind chunk bytes: a file's entry would
//!   otherwise wait behind chunks of that very file on another lane's reader, which
//!   holds them (and the link's chunk memory) until the entry arrives.
//! - As on QUIC, a chunk can arrive before its file's entry ([`LinkTraits::ordered`]
//!   is false) and the receiver keeps it until then.
//!
//! Each chunk goes to the lane with the fewest bytes waiting to be written, so a lane
//! slowed by loss recovery gets less, and a chunk counts as sent once its bytes are in
//! the kernel's socket buffer.

use std::sync::Arc;

use bytes::Bytes;
use soku_proto::chunk::ChunkHeader;
use soku_proto::message::Message;
use soku_proto::ProtoError;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::frames::{read_chunk_body, read_loop, read_message, ControlWriter};
use super::{BoxFuture, ChunkMemory, Inbound, Link, LinkTraits, Transport};
use crate::LinkError;

/// Chunks a sender keeps in flight per lane (read and hashed, or being written): one
/// being written and the next ready, with slack for a lane that drains faster.
pub const IN_FLIGHT_PER_LANE: usize = 4;

/// One lane's writer and the chunk bytes handed to it and not yet written.
struct Lane {
    writer: ControlWriter,
    waiting: std::sync::atomic::AtomicU64,
}

/// The outgoing half: the control writer, and the lanes for chunks.
struct StripedTransport {
    control: ControlWriter,
    lanes: Vec<Lane>,
}

impl StripedTransport {
    /// The lane with the fewest bytes waiting; `order` breaks ties so idle lanes take
    /// turns.
    fn pick(&self, order: u64) -> &Lane {
        use std::sync::atomic::Ordering;
        let n = self.lanes.len();
        let start = usize::try_from(order % n as u64).unwrap_or(0);
        (0..n)
            .map(|k| &self.lanes[(start + k) % n])
            .min_by_key(|lane| lane.waiting.load(Ordering::Relaxed))
            .unwrap_or(&self.lanes[start])
    }
}

impl Transport for StripedTransport {
    fn control(&self) -> &ControlWriter {
        &self.control
    }

    fn send_chunk(
        &self,
        header: ChunkHeader,
        wire: Bytes,
        order: u64,
    ) -> BoxFuture<'_, Result<(), LinkError>> {
        use std::sync::atomic::Ordering;
        Box::pin(async move {
            let lane = self.pick(order);
            let len = wire.len() as u64;
            lane.waiting.fetch_add(len, Ordering::Relaxed);
            let written = lane.writer.chunk_written(header, wire).await;
            lane.waiting.fetch_sub(len, Ordering::Relaxed);
            written
        })
    }

    fn finish(&self) -> BoxFuture<'_, Result<(), LinkError>> {
        Box::pin(async move {
            // Every chunk's bytes first: the control stream's end is the peer's signal
            // that we are done.
            for lane in &self.lanes {
                lane.writer.finish().await?;
            }
            self.control.finish().await
        })
    }
}

/// A link over `control` (both directions of the control stream) and `lanes` (each
/// both directions of one chunk stream); `lanes` must not be empty.
pub fn link<R, W>(control: (R, W), lanes: Vec<(R, W)>) -> Link
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let mut tasks = JoinSet::new();
    let (inbox_tx, inbox) = mpsc::channel(super::CHUNKS_IN_MEMORY);
    let (control_in, control_out) = control;
    let (control, write_task) = ControlWriter::start(control_out);
    tasks.spawn(write_task);
    tasks.spawn(read_loop(control_in, inbox_tx.clone(), None));
    let memory = ChunkMemory::new();
    let mut writers = Vec::with_capacity(lanes.len());
    for (input, output) in lanes {
        let (writer, write_task) = ControlWriter::start(output);
        tasks.spawn(write_task);
        tasks.spawn(read_lane(input, inbox_tx.clone(), memory.clone()));
        writers.push(Lane { writer, waiting: 0.into() });
    }
    let in_flight = IN_FLIGHT_PER_LANE * writers.len().max(1);
    let traits = LinkTraits { ordered: false, chunks_in_flight: in_flight };
    Link::new(Arc::new(StripedTransport { control, lanes: writers }), inbox, traits, tasks)
}

/// Reads chunks from one lane until it ends. Keep-alives (which every writer sends when
/// idle) are dropped; any other control message here is a violation. The end of a lane
/// says nothing: the control stream's end is the peer's.
async fn read_lane<R: AsyncRead + Unpin>(
    mut input: R,
    inbox: mpsc::Sender<Result<Inbound, LinkError>>,
    memory: ChunkMemory,
) {
    loop {
        let inbound = match read_message(&mut input).await {
            Ok(None) => return,
            Ok(Some(Message::KeepAlive)) => continue,
            Ok(Some(Message::Chunk(header))) => {
                read_chunk_body(&mut input, &memory, &header).await.map(Inbound::Chunk)
            }
            Ok(Some(other)) => {
                Err(ProtoError::Violation(format!("a {} message on a chunk stream", other.kind()))
                    .into())
            }
            Err(e) => Err(e),
        };
        let failed = inbound.is_err();
        if inbox.send(inbound).await.is_err() || failed {
            return;
        }
    }
}
