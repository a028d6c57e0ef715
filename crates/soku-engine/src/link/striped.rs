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
//! Each chunk goes to the lane in use with the fewest bytes waiting to be written, so a
//! lane slowed by loss recovery gets less, and a chunk counts as sent once its bytes are
//! in the kernel's socket buffer.
//!
//! Which lanes are in use: with gauges ([`soku_transport::SendTimes`], TCP's own
//! account of what held each connection back), only the first at the start, and one
//! more each time those in use spent a quarter of their sending time held back by a
//! buffer (their send buffer, or the receiver's window) rather than by the network.
//! Where one connection's buffers hold the path's window, more connections would only
//! add flows competing in the bottleneck's queue: four BBR connections made 10x the
//! queue drops of scp's one at 100 Mbit/s x 0-10 ms
//! (`lab/2026-11-24-transport`), for no more rate. Where
//! the buffers are capped (no CAP_NET_ADMIN, default sysctls), the lanes open within a
//! second and raise the window as before. Without gauges every lane is in use.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use soku_proto::chunk::ChunkHeader;
use soku_proto::message::Message;
use soku_proto::ProtoError;
use soku_transport::SendTimes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::control_writer::ControlWriter;
use super::frames::{read_chunk_body, read_loop, read_message};
use super::{BoxFuture, ChunkMemory, Inbound, Link, LinkTraits, Transport};
use crate::LinkError;

/// Chunks a sender keeps in flight per lane (read and hashed, or being written): one
/// being written and the next ready, with slack for a lane that drains faster.
pub const IN_FLIGHT_PER_LANE: usize = 4;

/// How often the lanes in use are looked at for whether to open one more: several
/// round trips of a short path, and time for a gauge's samples (every 50 ms) to move.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// One more lane opens when those in use were held back by a buffer for at least this
/// share (1/N) of their sending time since the last look.
const HELD_SHARE_DENOMINATOR: u64 = 4;

/// One lane's writer and the chunk bytes handed to it and not yet written.
struct Lane {
    writer: ControlWriter,
    waiting: std::sync::atomic::AtomicU64,
}

/// The outgoing half: the control writer, and the lanes for chunks.
struct StripedTransport {
    control: ControlWriter,
    lanes: Vec<Lane>,
    spread: Spread,
}

impl StripedTransport {
    /// The lane in use with the fewest bytes waiting; `order` breaks ties so idle lanes
    /// take turns.
    fn pick(&self, order: u64) -> &Lane {
        let n = self.spread.in_use().clamp(1, self.lanes.len());
        let start = usize::try_from(order % n as u64).unwrap_or(0);
        (0..n)
            .map(|k| &self.lanes[(start + k) % n])
            .min_by_key(|lane| lane.waiting.load(Ordering::Relaxed))
            .unwrap_or(&self.lanes[start])
    }
}

/// How many lanes take chunks (see the module's doc).
struct Spread {
    /// One per lane, or none (every lane in use).
    gauges: Vec<Arc<SendTimes>>,
    in_use: AtomicUsize,
    last: Mutex<Look>,
    /// [`LOOK_EVERY`] (tests look at once).
    look_every: Duration,
}

/// The summed times of the lanes in use at the last look.
struct Look {
    at: Instant,
    busy_us: u64,
    held_us: u64,
}

impl Spread {
    fn new(lanes: usize, gauges: Vec<Arc<SendTimes>>, look_every: Duration) -> Spread {
        let gauged = !gauges.is_empty() && gauges.len() == lanes;
        let gauges = if gauged { gauges } else { Vec::new() };
        let in_use = if gauged { 1 } else { lanes };
        let last = Look { at: Instant::now(), busy_us: 0, held_us: 0 };
        Spread { gauges, in_use: AtomicUsize::new(in_use), last: Mutex::new(last), look_every }
    }

    /// The lanes in use now, after one more look if one is due.
    fn in_use(&self) -> usize {
        let n = self.in_use.load(Ordering::Relaxed);
        if n >= self.gauges.len() {
            return n;
        }
        let Ok(mut last) = self.last.try_lock() else { return n };
        let now = Instant::now();
        if now.duration_since(last.at) < self.look_every {
            return n;
        }
        let (busy_us, held_us) = self.summed(n);
        let busy = busy_us.saturating_sub(last.busy_us);
        let held = held_us.saturating_sub(last.held_us);
        let grown =
            if busy > 0 && held.saturating_mul(HELD_SHARE_DENOMINATOR) >= busy { n + 1 } else { n };
        // The next look compares the lanes then in use with their own times now.
        let (busy_us, held_us) = if grown > n { self.summed(grown) } else { (busy_us, held_us) };
        *last = Look { at: now, busy_us, held_us };
        self.in_use.store(grown, Ordering::Relaxed);
        grown
    }

    /// The first `n` gauges' times, summed.
    fn summed(&self, n: usize) -> (u64, u64) {
        self.gauges[..n]
            .iter()
            .map(|g| g.busy_and_held())
            .fold((0, 0), |(b, h), (gb, gh)| (b.saturating_add(gb), h.saturating_add(gh)))
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
/// both directions of one chunk stream); `lanes` must not be empty. `gauges`, one per
/// lane in order, open the lanes as they are needed; with none, every lane is in use.
pub fn link<R, W>(control: (R, W), lanes: Vec<(R, W)>, gauges: Vec<Arc<SendTimes>>) -> Link
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
    let spread = Spread::new(writers.len(), gauges, LOOK_EVERY);
    let transport = StripedTransport { control, lanes: writers, spread };
    Link::new(Arc::new(transport), inbox, traits, tasks)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn gauges(n: usize) -> Vec<Arc<SendTimes>> {
        (0..n).map(|_| Arc::new(SendTimes::default())).collect()
    }

    #[test]
    fn without_gauges_every_lane_is_in_use() {
        assert_eq!(Spread::new(4, Vec::new(), Duration::ZERO).in_use(), 4);
        // Gauges that do not match the lanes count as none.
        assert_eq!(Spread::new(4, gauges(3), Duration::ZERO).in_use(), 4);
    }

    #[test]
    fn a_lane_opens_only_when_those_in_use_are_held_back_by_a_buffer() {
        let g = gauges(3);
        let spread = Spread::new(3, g.clone(), Duration::ZERO);
        assert_eq!(spread.in_use(), 1, "one lane at the start");
        // Busy, held back 10 % of the time: the network is the limit; stay on one.
        g[0].record(1_000_000, 100_000);
        assert_eq!(spread.in_use(), 1);
        // The next 1 s held back 40 %: open a second lane.
        g[0].record(2_000_000, 500_000);
        assert_eq!(spread.in_use(), 2);
        assert_eq!(spread.in_use(), 2, "no time passed on either lane since the look");
        // Both then 20 % held back (under a quarter): no more.
        g[0].record(3_000_000, 700_000);
        g[1].record(1_000_000, 200_000);
        assert_eq!(spread.in_use(), 2);
        // Then a quarter of the two lanes' time: the third opens, and there it stops.
        g[0].record(4_000_000, 950_000);
        g[1].record(2_000_000, 450_000);
        assert_eq!(spread.in_use(), 3);
        g[2].record(1_000_000, 1_000_000);
        assert_eq!(spread.in_use(), 3);
    }

    #[test]
    fn an_idle_lane_opens_nothing() {
        let g = gauges(2);
        let spread = Spread::new(2, g.clone(), Duration::ZERO);
        assert_eq!(spread.in_use(), 1);
        assert_eq!(spread.in_use(), 1, "no sending time, so nothing to judge");
    }

    #[test]
    fn looks_are_spaced() {
        let g = gauges(2);
        let spread = Spread::new(2, g.clone(), Duration::from_secs(3600));
        g[0].record(1_000_000, 1_000_000);
        assert_eq!(spread.in_use(), 1, "the first look is an hour away");
    }
}
