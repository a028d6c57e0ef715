//! The data-path seam: everything the engine needs from a connection, and nothing more.
//!
//! A [`Link`] is two halves:
//! - outgoing, a [`Transport`] (shared by every task of a copy): control messages in
//!   order, chunks (each on its own stream on QUIC, interleaved with the control
//!   messages on an ordered byte stream), and the end of our direction;
//! - incoming, an [`Inbox`]: control messages, whole chunks, and the peer's clean end,
//!   in one channel fed by the link's own reader tasks. Reading it is cancel-safe, so a
//!   role can wait for the peer and for its own tasks at once.
//!
//! Implementations: [`quic`] (a QUIC connection), [`stream`] (one ordered byte stream:
//! the ssh channel), [`striped`] (several: TLS over TCP connections) and [`memory`]
//! (pairs in one process, for tests). A link's reader and writer tasks belong to it and stop when it is dropped, so
//! a copy can be moved to a new link by dropping the old one.

pub mod control_writer;
pub mod frames;
pub mod memory;
pub mod quic;
pub mod stream;
pub mod striped;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use soku_proto::chunk::{max_wire_len, ChunkHeader, MAX_CHUNK_SIZE};
use soku_proto::message::Message;
use soku_proto::ProtoError;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use self::control_writer::ControlWriter;
use crate::page_buf::PageBuf;
use crate::LinkError;

/// A boxed future, so that [`Transport`] can be used as a trait object.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Chunks received and not yet handled by the receiver, per link, at most (the depth of
/// the inbox).
pub const CHUNKS_IN_MEMORY: usize = 64;

/// Bytes of received chunks held per link, at most: what a peer can make us buffer,
/// whatever chunk size it asked for (64 chunks of the default 1 MiB; four of the
/// largest, 16 MiB). The sender keeps less in flight anyway (`BULK_BUDGET`, 48 MiB).
pub const CHUNK_MEMORY_BYTES: u64 = 64 << 20;

/// The unit [`CHUNK_MEMORY_BYTES`] is counted in.
const MEMORY_UNIT: u64 = 64 << 10;

/// The outgoing half of a link: control messages through its [`ControlWriter`], chunks
/// however the link carries them.
pub trait Transport: Send + Sync {
    /// The writer of the control channel (one per link).
    fn control(&self) -> &ControlWriter;

    /// Sends one chunk, the `order`-th of this copy (earlier chunks go first where the
    /// link can choose). Returns once the link has it in hand: acknowledged by the peer
    /// on QUIC, queued in order on a byte stream.
    fn send_chunk(
        &self,
        header: ChunkHeader,
        wire: Bytes,
        order: u64,
    ) -> BoxFuture<'_, Result<(), LinkError>>;

    /// The congestion window in bytes, where the link has one to tell (QUIC): what it
    /// puts on the wire per round trip now. A sender keeps a few of them in flight
    /// (`crate::pipeline`); `None` keeps the whole budget.
    fn window(&self) -> Option<u64> {
        None
    }

    /// The share of the packets sent so far that were lost, where the link counts them
    /// (QUIC) and has sent enough for the share to mean something.
    fn loss(&self) -> Option<f64> {
        None
    }

    /// Sends a control message, after every control message sent before it.
    fn send_control(&self, msg: Message) -> BoxFuture<'_, Result<(), LinkError>> {
        Box::pin(self.control().control(msg))
    }

    /// Ends our direction of the control channel once everything queued was written.
    fn finish(&self) -> BoxFuture<'_, Result<(), LinkError>> {
        Box::pin(self.control().finish())
    }
}

/// The stall limit both sides of a copy use ([`Link::set_stall_limit`]): eight
/// keep-alive periods without a word from the peer.
pub const DEFAULT_STALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// What the peer sent.
#[derive(Debug)]
pub enum Inbound {
    /// A control message.
    Control(Message),
    /// A whole chunk.
    Chunk(Incoming),
    /// The peer ended its direction of the control channel cleanly.
    Closed,
}

/// A chunk as received: its header (not yet checked against the manifest) and wire
/// bytes. It counts against [`CHUNK_MEMORY_BYTES`] until dropped.
#[derive(Debug)]
pub struct Incoming {
    /// The header as the peer sent it.
    pub header: ChunkHeader,
    /// Exactly `header.wire_len` bytes.
    pub wire: PageBuf,
    /// BLAKE3 of `wire`, taken as the bytes arrived, when the link took it (a chunk sent
    /// uncompressed, read from a byte stream): the receiver checks it against the
    /// header instead of hashing the chunk again.
    pub wire_hash: Option<[u8; 32]>,
    _memory: OwnedSemaphorePermit,
}

/// The incoming half of a link.
pub type Inbox = mpsc::Receiver<Result<Inbound, LinkError>>;

/// How a link behaves, for the roles that drive it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkTraits {
    /// Chunks arrive in order with the control messages, so a file's entry always
    /// comes before its chunks (a chunk that does not is a protocol violation).
    pub ordered: bool,
    /// Chunks a sender keeps in flight on this link.
    pub chunks_in_flight: usize,
}

/// A data path between this side's role and the peer's.
pub struct Link {
    /// Sends to the peer; cheap to clone.
    pub tx: Arc<dyn Transport>,
    /// What the peer sent.
    inbox: Inbox,
    /// What a role took from the inbox early and put back ([`Link::hold`]).
    held: VecDeque<Inbound>,
    /// How the link behaves.
    pub traits: LinkTraits,
    /// How long [`Link::recv`] waits for anything from the peer before it calls the
    /// peer stalled; `None`: for ever.
    stall_limit: Option<std::time::Duration>,
    /// When the peer was last heard from (or the limit set): the limit runs from here,
    /// not from each call of [`Link::recv`].
    heard: tokio::time::Instant,
    /// The link's own reader and writer tasks: aborted when the link is dropped.
    _tasks: JoinSet<()>,
}

impl Link {
    /// Assembles a link from its halves and the tasks that feed them.
    pub fn new(
        tx: Arc<dyn Transport>,
        inbox: Inbox,
        traits: LinkTraits,
        tasks: JoinSet<()>,
    ) -> Self {
        Link {
            tx,
            inbox,
            held: VecDeque::new(),
            traits,
            stall_limit: None,
            heard: tokio::time::Instant::now(),
            _tasks: tasks,
        }
    }

    /// Calls the peer stalled when nothing from it (a message, a chunk, a keep-alive,
    /// which a live peer sends every [`frames::KEEPALIVE_EVERY`] at least) arrives for
    /// `limit` while [`Link::recv`] waits.
    pub fn set_stall_limit(&mut self, limit: Option<std::time::Duration>) {
        self.stall_limit = limit;
        self.heard = tokio::time::Instant::now();
    }

    /// The next thing the peer sent (what was held back first); `None` once the link's
    /// readers have all ended; [`LinkError::Stalled`] once the stall limit has passed
    /// since the peer was last heard from. A role that waits for its peer beside other
    /// work calls this afresh after each piece of that work: the limit is counted from
    /// the last thing heard, so a sender whose chunks keep finishing still notices a
    /// peer that went silent. Keep-alives are dropped here. Cancel-safe: nothing is
    /// lost if the future is dropped.
    pub async fn recv(&mut self) -> Option<Result<Inbound, LinkError>> {
        if let Some(held) = self.held.pop_front() {
            return Some(Ok(held));
        }
        loop {
            let next = match self.stall_limit {
                Some(limit) => {
                    match tokio::time::timeout_at(self.heard + limit, self.inbox.recv()).await {
                        Ok(next) => next,
                        Err(_) => return Some(Err(LinkError::Stalled(limit))),
                    }
                }
                None => self.inbox.recv().await,
            };
            self.heard = tokio::time::Instant::now();
            if !matches!(next, Some(Ok(Inbound::Control(Message::KeepAlive)))) {
                return next;
            }
        }
    }

    /// Puts back something taken too early, to be received again in the same order.
    /// On QUIC a chunk can arrive before the control message it follows (the request),
    /// and the role that will handle it has not started yet.
    pub fn hold(&mut self, inbound: Inbound) {
        self.held.push_back(inbound);
    }

    /// Ends our direction and waits, at most `patience`, for the peer to end its own:
    /// what a side does once its role is done, so that nothing it sent is cut off.
    pub async fn close(mut self, patience: std::time::Duration) -> Result<(), LinkError> {
        let finished = self.tx.finish().await;
        let _ = tokio::time::timeout(patience, async {
            while let Some(Ok(inbound)) = self.recv().await {
                if matches!(inbound, Inbound::Closed) {
                    break;
                }
            }
        })
        .await;
        finished
    }
}

/// The memory bound of a link's incoming chunks.
#[derive(Debug, Clone)]
pub(crate) struct ChunkMemory(Arc<Semaphore>);

impl ChunkMemory {
    pub(crate) fn new() -> Self {
        ChunkMemory(Arc::new(Semaphore::new((CHUNK_MEMORY_BYTES / MEMORY_UNIT) as usize)))
    }

    /// Waits for room for one more chunk, after checking that the header's length is
    /// one any chunk could have (before a single byte of it is buffered).
    pub(crate) async fn admit(&self, header: &ChunkHeader) -> Result<ChunkSlot, LinkError> {
        let limit = max_wire_len(MAX_CHUNK_SIZE, header.compressed);
        if header.wire_len > limit {
            return Err(ProtoError::Violation(format!(
                "chunk {} of file {} has wire length {}, more than any chunk's {limit}",
                header.index, header.file, header.wire_len
            ))
            .into());
        }
        // Rounded up to whole units, at least one: many tiny chunks are bounded too.
        let units = u32::try_from(u64::from(header.wire_len).div_ceil(MEMORY_UNIT).max(1))
            .unwrap_or(u32::MAX);
        let permit =
            self.0.clone().acquire_many_owned(units).await.map_err(|_| LinkError::Closed)?;
        Ok(ChunkSlot { header: *header, permit })
    }
}

/// Room for one chunk, taken before its bytes are read.
pub(crate) struct ChunkSlot {
    header: ChunkHeader,
    permit: OwnedSemaphorePermit,
}

impl ChunkSlot {
    /// The chunk, once its bytes are read.
    pub(crate) fn fill(self, wire: PageBuf, wire_hash: Option<[u8; 32]>) -> Incoming {
        Incoming { header: self.header, wire, wire_hash, _memory: self.permit }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Catches: the stall limit counted afresh at each call of `recv`. A sender waits
    /// for its peer beside its chunk tasks and calls `recv` again after each one ends,
    /// so against a peer that reads everything and says nothing (its chunks keep
    /// ending) the limit never ran out.
    #[tokio::test]
    async fn the_stall_limit_runs_from_the_last_word_heard_not_from_each_wait() {
        let (mut ours, _silent_peer) = memory::ordered_pair();
        let limit = Duration::from_millis(200);
        ours.set_stall_limit(Some(limit));
        let began = tokio::time::Instant::now();
        // Bounded: 40 waits of 50 ms, ten times the limit.
        for _ in 0..40 {
            match tokio::time::timeout(Duration::from_millis(50), ours.recv()).await {
                Err(_) => continue,
                Ok(Some(Err(LinkError::Stalled(at)))) => {
                    assert_eq!(at, limit);
                    assert!(began.elapsed() >= limit, "{:?}", began.elapsed());
                    return;
                }
                Ok(other) => panic!("the silent peer sent {other:?}"),
            }
        }
        panic!("no stall after {:?} of silence, with a limit of {limit:?}", began.elapsed());
    }
}
