//! Links between two roles in one process, for tests that need no sshd, no network and
//! no root.
//!
//! - [`ordered_pair`]: two [`super::stream`] links over an in-memory byte pipe: the very
//!   code that carries a copy over the ssh channel.
//! - [`streams_pair`]: like QUIC, chunks travel apart from the control messages and may
//!   overtake them (a file's chunks before its entry); `control_delay` holds every
//!   control message back that long to make that happen on purpose.
//! - [`windowed_pair`]: a [`streams_pair`] whose sending end tells a congestion window
//!   and takes a round trip to acknowledge each chunk, counting the most chunk bytes it
//!   held at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use soku_proto::chunk::ChunkHeader;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::control_writer::ControlWriter;
use super::frames::read_loop;
use super::{BoxFuture, ChunkMemory, Inbound, Link, LinkTraits, Transport};
use crate::page_buf::PageBuf;
use crate::LinkError;

/// Bytes buffered in each direction of an in-memory pipe.
const PIPE: usize = 256 * 1024;

/// Two ends of an ordered byte-stream link.
pub fn ordered_pair() -> (Link, Link) {
    let (a, b) = tokio::io::duplex(PIPE);
    let (a_in, a_out) = tokio::io::split(a);
    let (b_in, b_out) = tokio::io::split(b);
    (super::stream::link(a_in, a_out), super::stream::link(b_in, b_out))
}

/// Two ends of a striped link: control on one pipe, chunks over `lanes` more.
pub fn striped_pair(lanes: usize) -> (Link, Link) {
    let mut a_ends = Vec::new();
    let mut b_ends = Vec::new();
    for _ in 0..=lanes.max(1) {
        let (a, b) = tokio::io::duplex(PIPE);
        a_ends.push(tokio::io::split(a));
        b_ends.push(tokio::io::split(b));
    }
    let (a_control, b_control) = (a_ends.remove(0), b_ends.remove(0));
    (
        super::striped::link(a_control, a_ends, Vec::new()),
        super::striped::link(b_control, b_ends, Vec::new()),
    )
}

/// One end of a link whose raw bytes the test writes and reads itself (a peer that
/// sends garbage, or stops answering).
pub fn raw_peer() -> (Link, tokio::io::DuplexStream) {
    let (ours, theirs) = tokio::io::duplex(PIPE);
    let (input, output) = tokio::io::split(ours);
    (super::stream::link(input, output), theirs)
}

/// Two ends of a link that carries chunks apart from control messages, as QUIC does.
pub fn streams_pair(control_delay: Duration) -> (Link, Link) {
    streams_pair_on(control_delay, SimulatedPath::default())
}

/// What the first end of a [`windowed_pair`] plays: a path with a congestion window.
#[derive(Debug, Clone, Default)]
struct SimulatedPath {
    /// The window the transport tells the sender, which a [`WindowDial`] may change.
    window: Option<Arc<AtomicU64>>,
    /// How long each chunk takes to be "acknowledged".
    round_trip: Duration,
    /// Chunk bytes handed over and not yet acknowledged, now and at most.
    held: Arc<AtomicU64>,
    peak: Arc<AtomicU64>,
}

/// Like [`streams_pair`], but the first end tells `window` as its congestion window
/// (as QUIC does) and takes `round_trip` to acknowledge each chunk. The second value
/// is the most chunk bytes it held unacknowledged at once, read after the copy.
pub fn windowed_pair(window: Option<u64>, round_trip: Duration) -> ((Link, Link), Arc<AtomicU64>) {
    let window = window.map(|w| Arc::new(AtomicU64::new(w)));
    let path = SimulatedPath { window, round_trip, ..SimulatedPath::default() };
    let peak = path.peak.clone();
    (streams_pair_on(Duration::ZERO, path), peak)
}

/// Like [`windowed_pair`] with a `window`, which the returned dial changes while a copy
/// runs, as a congestion window grows with acknowledgements that complete no chunk.
pub fn dialled_pair(window: u64, round_trip: Duration) -> ((Link, Link), WindowDial) {
    let dial =
        WindowDial { window: Arc::new(AtomicU64::new(window)), held: Arc::new(AtomicU64::new(0)) };
    let path = SimulatedPath {
        window: Some(dial.window.clone()),
        round_trip,
        held: dial.held.clone(),
        ..SimulatedPath::default()
    };
    (streams_pair_on(Duration::ZERO, path), dial)
}

/// The window of a [`dialled_pair`], and what its sender holds unacknowledged.
#[derive(Debug, Clone)]
pub struct WindowDial {
    window: Arc<AtomicU64>,
    held: Arc<AtomicU64>,
}

impl WindowDial {
    /// The window the transport tells from now on.
    pub fn set(&self, window: u64) {
        self.window.store(window, Ordering::Relaxed);
    }

    /// Chunk bytes handed over and not yet acknowledged now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }
}

fn streams_pair_on(control_delay: Duration, path: SimulatedPath) -> (Link, Link) {
    let (a, b) = tokio::io::duplex(PIPE);
    let (a_tx, a_inbox) = mpsc::channel(super::CHUNKS_IN_MEMORY);
    let (b_tx, b_inbox) = mpsc::channel(super::CHUNKS_IN_MEMORY);
    let (a_memory, b_memory) = (ChunkMemory::new(), ChunkMemory::new());
    let a_end = StreamsEnd {
        inbox_tx: a_tx.clone(),
        inbox: a_inbox,
        peer: b_tx.clone(),
        peer_memory: b_memory,
    };
    let b_end = StreamsEnd { inbox_tx: b_tx, inbox: b_inbox, peer: a_tx, peer_memory: a_memory };
    (a_end.link(a, control_delay, path), b_end.link(b, control_delay, SimulatedPath::default()))
}

/// One end of a [`streams_pair`] before it is assembled.
struct StreamsEnd {
    inbox_tx: mpsc::Sender<Result<Inbound, LinkError>>,
    inbox: super::Inbox,
    peer: mpsc::Sender<Result<Inbound, LinkError>>,
    peer_memory: ChunkMemory,
}

impl StreamsEnd {
    fn link<S: AsyncRead + AsyncWrite + Send + 'static>(
        self,
        pipe: S,
        delay: Duration,
        path: SimulatedPath,
    ) -> Link {
        let (input, output) = tokio::io::split(pipe);
        let mut tasks = JoinSet::new();
        let (control, write_task) = ControlWriter::start(output);
        tasks.spawn(write_task);
        let (read_tx, mut read_rx) = mpsc::channel(super::CHUNKS_IN_MEMORY);
        tasks.spawn(read_loop(input, read_tx, None));
        let inbox_tx = self.inbox_tx;
        tasks.spawn(async move {
            while let Some(inbound) = read_rx.recv().await {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                if inbox_tx.send(inbound).await.is_err() {
                    return;
                }
            }
        });
        let transport =
            StreamsTransport { control, peer: self.peer, peer_memory: self.peer_memory, path };
        let traits = LinkTraits { ordered: false, chunks_in_flight: super::quic::QUIC_IN_FLIGHT };
        Link::new(Arc::new(transport), self.inbox, traits, tasks)
    }
}

/// Control messages through the pipe, chunks straight into the peer's inbox.
struct StreamsTransport {
    control: ControlWriter,
    peer: mpsc::Sender<Result<Inbound, LinkError>>,
    peer_memory: ChunkMemory,
    path: SimulatedPath,
}

impl Transport for StreamsTransport {
    fn control(&self) -> &ControlWriter {
        &self.control
    }

    fn window(&self) -> Option<u64> {
        self.path.window.as_ref().map(|w| w.load(Ordering::Relaxed))
    }

    fn send_chunk(
        &self,
        header: ChunkHeader,
        wire: Bytes,
        _order: u64,
    ) -> BoxFuture<'_, Result<(), LinkError>> {
        Box::pin(async move {
            let len = wire.len() as u64;
            let held = self.path.held.fetch_add(len, Ordering::Relaxed) + len;
            self.path.peak.fetch_max(held, Ordering::Relaxed);
            let sent = async {
                let slot = self.peer_memory.admit(&header).await?;
                let chunk = slot.fill(PageBuf::copy_of(&wire), None);
                self.peer.send(Ok(Inbound::Chunk(chunk))).await.map_err(|_| LinkError::Closed)
            }
            .await;
            if sent.is_ok() && !self.path.round_trip.is_zero() {
                tokio::time::sleep(self.path.round_trip).await;
            }
            self.path.held.fetch_sub(len, Ordering::Relaxed);
            sent
        })
    }
}
