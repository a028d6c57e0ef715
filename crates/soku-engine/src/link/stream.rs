//! A link over one ordered byte stream (the ssh channel): control
//! frames and chunks interleaved, each chunk a header frame followed by its bytes. The
//! sender queues a file's entry before its chunks, so on this link the receiver always
//! knows the file first.

use std::sync::Arc;

use bytes::Bytes;
use soku_proto::chunk::ChunkHeader;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::control_writer::ControlWriter;
use super::frames::read_loop;
use super::{BoxFuture, ChunkMemory, Link, LinkTraits, Transport};
use crate::LinkError;

/// Chunks in flight on one byte stream, where they queue behind each other anyway.
pub const STREAM_IN_FLIGHT: usize = 8;

/// The outgoing half: one writer for everything.
struct StreamTransport(ControlWriter);

impl Transport for StreamTransport {
    fn control(&self) -> &ControlWriter {
        &self.0
    }

    fn send_chunk(
        &self,
        header: ChunkHeader,
        wire: Bytes,
        _order: u64,
    ) -> BoxFuture<'_, Result<(), LinkError>> {
        Box::pin(self.0.chunk(header, wire))
    }
}

/// A link over `input` and `output`, which must be the two directions of one ordered,
/// reliable byte stream to the peer.
pub fn link<R, W>(input: R, output: W) -> Link
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let mut tasks = JoinSet::new();
    let (writer, write_task) = ControlWriter::start(output);
    tasks.spawn(write_task);
    let (inbox_tx, inbox) = mpsc::channel(super::CHUNKS_IN_MEMORY);
    tasks.spawn(read_loop(input, inbox_tx, Some(ChunkMemory::new())));
    let traits = LinkTraits { ordered: true, chunks_in_flight: STREAM_IN_FLIGHT };
    Link::new(Arc::new(StreamTransport(writer)), inbox, traits, tasks)
}
