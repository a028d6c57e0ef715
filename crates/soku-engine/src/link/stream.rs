//! A link over one ordered byte stream (the ssh channel): control
//! frames and chunks interleaved, each chunk a header frame followed by its bytes. The
//! sender queues a file's entry before its chunks, so on this link the receiver always
//! knows the file first.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use soku_proto::chunk::ChunkHeader;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::control_writer::{ControlWriter, KEEPALIVE_EVERY};
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
    link_beating(input, output, KEEPALIVE_EVERY)
}

/// Like [`link`], with a keep-alive after each `keepalive` of silence.
fn link_beating<R, W>(input: R, output: W, keepalive: Duration) -> Link
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let mut tasks = JoinSet::new();
    let (writer, write_task) = ControlWriter::start_beating(output, keepalive);
    tasks.spawn(write_task);
    let (inbox_tx, inbox) = mpsc::channel(super::CHUNKS_IN_MEMORY);
    tasks.spawn(read_loop(input, inbox_tx, Some(ChunkMemory::new())));
    let traits = LinkTraits { ordered: true, chunks_in_flight: STREAM_IN_FLIGHT };
    Link::new(Arc::new(StreamTransport(writer)), inbox, traits, tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two stream links over an in-memory pipe, each sending keep-alives after
    /// `keepalive` of silence.
    fn pair(keepalive: Duration) -> (Link, Link) {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let (a_in, a_out) = tokio::io::split(a);
        let (b_in, b_out) = tokio::io::split(b);
        (link_beating(a_in, a_out, keepalive), link_beating(b_in, b_out, keepalive))
    }

    /// A peer whose role is busy (nothing to say for a long time) still sends
    /// keep-alives, so it is not taken for stalled; one that sends none is. Real time,
    /// scaled down: keep-alives every 50 ms, three stall limits of quiet.
    #[tokio::test]
    async fn keep_alives_keep_a_quiet_peer_from_being_taken_for_stalled() {
        let (quiet, mut waiting) = pair(Duration::from_millis(50));
        waiting.set_stall_limit(Some(Duration::from_secs(1)));
        let heard = tokio::time::timeout(Duration::from_secs(3), waiting.recv()).await;
        assert!(heard.is_err(), "three quiet seconds, no stall: {heard:?}");
        drop(quiet);

        let (silent, mut waiting) = pair(Duration::from_secs(3600));
        waiting.set_stall_limit(Some(Duration::from_millis(300)));
        let heard = tokio::time::timeout(Duration::from_secs(3), waiting.recv()).await;
        let stalled = matches!(heard, Ok(Some(Err(LinkError::Stalled(_)))));
        assert!(stalled, "no keep-alives: a stall, {heard:?}");
        drop(silent);
    }
}
