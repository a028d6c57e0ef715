//! A UDP socket for quinn that wakes once per batch of datagrams, not once per datagram.
//!
//! At moderate rates the receiver's CPU goes to waking up, not to the data: at
//! 100 Mbit/s datagrams arrive ~120 us apart, and with quinn's tokio socket every one of
//! them wakes the runtime from `epoll_wait`, runs the endpoint and connection drivers and
//! is read by a `recvmmsg` of its own (UDP GRO coalesces nothing when packets arrive one
//! by one). Profiled at 100 Mbit/s x 50 ms, that was about one context switch per packet
//! and a receiver whose CPU per GB went mostly to waking up (`lab/2026-11-24-cpu-per-byte`).
//!
//! This socket does what a NIC's interrupt moderation does. While datagrams stream in
//! fast enough that a short rest gathers several of them, it takes the socket out of
//! epoll, sleeps [`REST`] on a timerfd, then reads everything that queued with a few
//! `recvmmsg` calls; when a read after a rest finds the queue empty, or the stream
//! slows, the socket goes back into epoll and the next datagram is read at once. Idle
//! and slow traffic (handshakes, control messages, a sender's acknowledgements at
//! 100 Mbit/s) is never delayed. A rest is only taken when what can queue meanwhile
//! fits a small share of the socket's receive buffer ([`budget_from`]), so it cannot
//! cause drops.
//!
//! The cost is latency, and the sender feels it: the packets of a rested batch are
//! acknowledged together, up to a rest after the first of them arrived, so the
//! sender's window must cover the rest on top of the path's round trip. The rest's
//! length was chosen by A/B runs, old and new binaries alternated
//! (from `lab/2026-11-24-cpu-per-byte`, medians). At 100 Mbit/s x 50 ms a
//! 1-2 ms rest (tokio's millisecond timer) cut the receiver's CPU per byte by 41 % but
//! cost 1.6 points of link; 1 ms cut 35 % for 1.5 points; 500 us 19 % for 0.9 (the
//! ranges overlap); 250 us gathers too few datagrams at that rate to rest at all. At
//! 10 ms, 500 us: 18 % for 0.2 points. At 1 Gbit/s x 50 ms, where two cores bound the
//! copy, 500 us took the receiver from 3.6 to 2.7 CPU-s/GB, the sender from 2.8 to 2.6
//! (it rests on the acknowledgements there), and the copy from 77 to 80 % of the link.
//! Measured again once the congestion controller carried an ack-aggregation allowance
//! and the sender kept only a few windows in flight
//! (`lab/2026-11-27-receiver-rest`), 1 ms against 500 us cut the `soku
//! serve` process's CPU by 16-28 % at 100 Mbit/s x 10, 50 and 200 ms (1 % loss) for
//! no loss of link beyond the runs' spread. But a `--background` copy beside CUBIC at
//! 50 ms then left CUBIC 67-76 % of the link in three runs, where the aim is 80 % and
//! 500 us left it 81-90 % in three. The background flow started inside CUBIC's queue
//! and took it for the path; a longer rest let it compete harder while it did. Once
//! background mode took its first probe-RTT right after startup and kept a ten-minute
//! baseline (`soku_cc::base_delay`), 1 ms left CUBIC 91.2-94.7 Mbit/s (500 us:
//! 94.7-95.1) and cut `soku serve`'s CPU by 20 % at 100 Mbit/s x 50 ms, lower in 4 of 4
//! rounds at the same link (from `lab/2026-11-27-background-baseline`): the rest
//! is 1 ms.
//! A timerfd, not a tokio timer: tokio's timer wheel counts whole milliseconds.
//!
//! Each rest costs as few system calls as it can: arming the timer, the wake-up, one
//! read of the timer and one `recvmmsg` for what queued. A read that returns fewer
//! datagrams than it had room for found the kernel's queue empty, so no second read
//! asks again before the next rest; a datagram that came meanwhile waits for that rest,
//! as one that came just after an empty read would. Reading the one-shot timer's expiry
//! also clears its readiness, which an extra read finding nothing used to do. At
//! 100 Mbit/s x 50 ms that took the receiver from about 7 to 4.3 such calls per rest.
//!
//! The send side registers for write readiness only while a send waits for buffer
//! space. quinn asks for writability before every send, and a UDP socket registered for
//! it is woken each time the kernel frees a sent buffer: one more wake-up per sent
//! batch for nothing.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use quinn::udp::{RecvMeta, Transmit, UdpSocketState};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::time::Instant;

use crate::reactor::{arm_once, read_expiry, register};

/// How long a read rests between batches while datagrams stream in; see the module
/// docs for how it was chosen. `SOKU_REST_US` overrides it (microseconds, 0: never
/// rest), read once per socket, for A/B runs.
pub(crate) const REST: Duration = Duration::from_millis(1);

fn rest_from_env() -> Duration {
    std::env::var("SOKU_REST_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(REST, Duration::from_micros)
}

/// A rest is worth its timer wake-up when it gathers at least this many datagrams.
const WORTH_RESTING: f64 = 4.0;

/// The arrival rate is measured over windows of at least this long.
const RATE_WINDOW: Duration = Duration::from_millis(4);

/// The bytes a rest may let queue: an eighth of the receive buffer's read-back size.
/// Linux reports twice the payload it holds (it counts its bookkeeping), and a small
/// datagram's bookkeeping can exceed its payload: an eighth keeps a rest's arrivals well
/// inside the buffer.
pub(crate) fn budget_from(recv_buffer: usize) -> usize {
    recv_buffer / 8
}

/// quinn's socket, resting between batches while datagrams stream in (module docs).
pub(crate) struct BatchedUdp {
    io: UdpSocket,
    state: UdpSocketState,
    recv: Mutex<Receiver>,
    /// Set when a send was refused for want of buffer space, cleared once the socket
    /// reported space again: quinn asks whether the socket is writable before every
    /// send, and only after a refusal is the question worth a trip through epoll.
    send_refused: AtomicBool,
}

impl fmt::Debug for BatchedUdp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchedUdp").field("io", &self.io).finish()
    }
}

impl BatchedUdp {
    /// Wraps a bound socket; `recv_buffer` is its SO_RCVBUF as read back.
    /// Must be called inside a tokio runtime (the socket registers with its reactor).
    pub(crate) fn new(io: UdpSocket, recv_buffer: usize) -> io::Result<Self> {
        io.set_nonblocking(true)?;
        let state = UdpSocketState::new((&io).into())?;
        let fd = Arc::new(io.as_fd().try_clone_to_owned()?);
        let watch = Watch::Armed(register(fd.clone(), Interest::READABLE)?);
        let recv = Receiver {
            fd,
            watch,
            rest: rest_from_env(),
            rests: 0,
            timer: crate::reactor::timer()?,
            arrivals: Arrivals::new(Instant::now()),
            budget: budget_from(recv_buffer),
            emptied: false,
            short_read: false,
            confirming_reads: 0,
        };
        Ok(BatchedUdp { io, state, recv: Mutex::new(recv), send_refused: AtomicBool::new(false) })
    }
}

/// How the socket waits for datagrams.
enum Watch {
    /// In epoll: the next datagram wakes us. Dropping the registration takes the
    /// socket out of epoll.
    Armed(AsyncFd<Arc<OwnedFd>>),
    /// Out of epoll, asleep until the timer; datagrams queue in the kernel.
    Resting,
    /// Out of epoll, reading what queued during a rest until the queue is empty.
    Draining,
}

struct Receiver {
    /// The duplicate of the socket's descriptor that is put into epoll for reading (a
    /// descriptor of its own, so the write side can register the socket separately).
    fd: Arc<OwnedFd>,
    watch: Watch,
    rest: Duration,
    /// Rests taken so far (for tests and traces).
    rests: u64,
    /// A timerfd in epoll, armed for each rest: tokio's timers count whole
    /// milliseconds, too coarse for a rest.
    timer: AsyncFd<Arc<OwnedFd>>,
    arrivals: Arrivals,
    budget: usize,
    /// The last read returned fewer datagrams than it had room for: the kernel's queue
    /// was empty then, and asking again at once would only find it so.
    emptied: bool,
    /// The last read came back short, and no rest has been taken since (kept apart from
    /// `emptied`, which the reads act on, to count what they do).
    short_read: bool,
    /// Reads after a rest that found the queue empty right after a short read: the
    /// calls `emptied` saves (for tests).
    confirming_reads: u64,
}

/// The arrival rate of datagrams and bytes, measured over [`RATE_WINDOW`]s.
struct Arrivals {
    window_start: Instant,
    datagrams: u64,
    bytes: u64,
    /// Datagrams and bytes per second in the last full window.
    datagram_rate: f64,
    byte_rate: f64,
}

impl Arrivals {
    fn new(now: Instant) -> Self {
        Arrivals { window_start: now, datagrams: 0, bytes: 0, datagram_rate: 0.0, byte_rate: 0.0 }
    }

    fn record(&mut self, now: Instant, datagrams: u64, bytes: u64) {
        self.datagrams += datagrams;
        self.bytes += bytes;
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed >= RATE_WINDOW {
            let secs = elapsed.as_secs_f64();
            self.datagram_rate = self.datagrams as f64 / secs;
            self.byte_rate = self.bytes as f64 / secs;
            *self = Arrivals { window_start: now, datagrams: 0, bytes: 0, ..*self };
        }
    }

    /// True when a rest gathers enough datagrams to be worth it, and what queues during
    /// the longest rest fits `budget` bytes.
    fn worth_resting(&self, now: Instant, rest: Duration, budget: usize) -> bool {
        if rest.is_zero() {
            return false;
        }
        // A window that has run well past its length without a datagram says the
        // stream stopped, whatever the last full window measured.
        if now.saturating_duration_since(self.window_start) > 2 * RATE_WINDOW {
            return false;
        }
        // A timer may fire late on a busy host: what queues is counted over two rests.
        self.datagram_rate * rest.as_secs_f64() >= WORTH_RESTING
            && self.byte_rate * 2.0 * rest.as_secs_f64() <= budget as f64
    }
}

/// Datagrams and bytes in the first `count` entries of a read (GRO packs several
/// datagrams of `stride` bytes into one entry).
fn tally(meta: &[RecvMeta], count: usize) -> (u64, u64) {
    meta.iter().take(count).fold((0, 0), |(datagrams, bytes), m| {
        let each = m.stride.max(1);
        (datagrams + m.len.div_ceil(each) as u64, bytes + m.len as u64)
    })
}

impl Receiver {
    fn worth_resting(&self) -> bool {
        self.arrivals.worth_resting(Instant::now(), self.rest, self.budget)
    }

    /// Takes the socket out of epoll (if it is in) and arms the rest timer.
    fn rest(&mut self) -> io::Result<()> {
        arm_once(self.timer.get_ref(), self.rest)?;
        self.rests += 1;
        self.short_read = false;
        self.watch = Watch::Resting;
        Ok(())
    }

    /// The queue is empty: rest if the stream is worth it, otherwise wait in epoll (a
    /// datagram that came after the queue was found empty is reported at once: epoll
    /// checks readiness when the socket is inserted).
    fn settle(&mut self) -> io::Result<()> {
        self.emptied = false;
        if self.worth_resting() {
            return self.rest();
        }
        if !matches!(self.watch, Watch::Armed(_)) {
            self.watch = Watch::Armed(register(self.fd.clone(), Interest::READABLE)?);
        }
        Ok(())
    }
}

/// The most datagrams one read can return into `bufs` and `meta` (quinn-udp reads at
/// most [`quinn::udp::BATCH_SIZE`] messages per call).
fn read_capacity(bufs: &[IoSliceMut<'_>], meta: &[RecvMeta]) -> usize {
    bufs.len().min(meta.len()).min(quinn::udp::BATCH_SIZE)
}

impl BatchedUdp {
    /// How many times the receive side has rested.
    #[cfg(test)]
    fn rests(&self) -> u64 {
        self.recv.lock().map_or(0, |r| r.rests)
    }

    /// How many reads after a rest only confirmed an empty queue after a short read.
    #[cfg(test)]
    fn confirming_reads(&self) -> u64 {
        self.recv.lock().map_or(0, |r| r.confirming_reads)
    }

    fn read(&self, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> io::Result<usize> {
        self.state.recv((&self.io).into(), bufs, meta)
    }
}

impl AsyncUdpSocket for BatchedUdp {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(WriteWait { socket: self, registered: None })
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        let sent = self.state.send((&self.io).into(), transmit);
        if matches!(&sent, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            self.send_refused.store(true, Ordering::Relaxed);
        }
        sent
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let mut guard = self.recv.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let recv = &mut *guard;
        let capacity = read_capacity(bufs, meta);
        loop {
            // The last read came back short: the queue was empty, no need to ask again.
            // In epoll, only a rest is taken here; waiting there reads until the kernel
            // says the queue is empty, which clears the socket's readiness.
            if recv.emptied && !matches!(recv.watch, Watch::Resting) {
                if matches!(recv.watch, Watch::Draining) || recv.worth_resting() {
                    recv.settle()?;
                    continue;
                }
                recv.emptied = false;
            }
            match &mut recv.watch {
                Watch::Armed(registered) => {
                    let mut ready = ready!(registered.poll_read_ready(cx))?;
                    if let Ok(result) = ready.try_io(|_| self.read(bufs, meta)) {
                        drop(ready);
                        return Poll::Ready(self.counted(recv, result, meta, capacity));
                    }
                    // The queue is empty and readiness cleared: rest, or wait in epoll
                    // (polling readiness again registers the waker).
                    drop(ready);
                    recv.settle()?;
                }
                Watch::Resting => {
                    let mut ready = ready!(recv.timer.poll_read_ready(cx))?;
                    let expired = ready.try_io(|timer| read_expiry(timer.get_ref())).is_ok();
                    if expired {
                        // A one-shot timer expires once per arming: nothing more is to be
                        // read from it until the next rest arms it again.
                        ready.clear_ready();
                        drop(ready);
                        recv.watch = Watch::Draining;
                    } // else not yet: readiness cleared, polling again waits
                }
                Watch::Draining => match self.read(bufs, meta) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if recv.short_read {
                            recv.confirming_reads += 1;
                        }
                        recv.settle()?;
                    }
                    result => return Poll::Ready(self.counted(recv, result, meta, capacity)),
                },
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.state.gro_segments()
    }

    fn may_fragment(&self) -> bool {
        self.state.may_fragment()
    }
}

impl BatchedUdp {
    /// Counts a successful read into the arrival rate, notes whether it emptied the
    /// queue (it returned fewer than `capacity` datagrams), and passes the result on.
    fn counted(
        &self,
        recv: &mut Receiver,
        result: io::Result<usize>,
        meta: &[RecvMeta],
        capacity: usize,
    ) -> io::Result<usize> {
        if let Ok(count) = result {
            let (datagrams, bytes) = tally(meta, count);
            recv.arrivals.record(Instant::now(), datagrams, bytes);
            recv.emptied = count < capacity;
            recv.short_read = recv.emptied;
        }
        result
    }
}

/// Waits for buffer space after a send was refused with `WouldBlock`. It registers a
/// duplicate of the socket's descriptor for write readiness only while it waits, and
/// answers at once while no send has been refused.
struct WriteWait {
    socket: Arc<BatchedUdp>,
    registered: Option<AsyncFd<Arc<OwnedFd>>>,
}

impl fmt::Debug for WriteWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteWait").field("waiting", &self.registered.is_some()).finish()
    }
}

impl UdpPoller for WriteWait {
    fn poll_writable(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.registered.is_none() && !this.socket.send_refused.load(Ordering::Relaxed) {
            return Poll::Ready(Ok(()));
        }
        let registered = match &mut this.registered {
            Some(registered) => registered,
            // Inserting into epoll checks readiness, so space freed since the refused
            // send is not missed.
            None => this.registered.insert(register(
                Arc::new(this.socket.io.as_fd().try_clone_to_owned()?),
                Interest::WRITABLE,
            )?),
        };
        drop(ready!(registered.poll_write_ready(cx))?);
        // quinn sends again now; if that is refused too, the flag is set again and the
        // next question registers afresh, to be woken by the next freed buffer.
        this.registered = None;
        this.socket.send_refused.store(false, Ordering::Relaxed);
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    /// Arrivals after 8 ms of `per_ms` datagrams of `size` bytes every millisecond.
    fn streamed(base: Instant, per_ms: u64, size: u64) -> Arrivals {
        let mut arrivals = Arrivals::new(base);
        for ms in 1..=8 {
            arrivals.record(at(base, ms), per_ms, per_ms * size);
        }
        arrivals
    }

    #[test]
    fn a_stream_of_datagrams_is_worth_resting_for_and_a_trickle_is_not() {
        let base = Instant::now();
        // 100 Mbit/s of 1 400-byte datagrams: ~9 per millisecond.
        let stream = streamed(base, 9, 1400);
        assert!(stream.worth_resting(at(base, 8), REST, 1 << 20));
        // One acknowledgement a millisecond gathers one per rest: not worth a timer.
        let acks = streamed(base, 1, 60);
        assert!(!acks.worth_resting(at(base, 8), REST, 1 << 20));
    }

    #[test]
    fn no_rest_when_what_queues_meanwhile_would_crowd_the_buffer() {
        let base = Instant::now();
        // ~1 Gbit/s: a 1 ms rest of it is ~125 kB, too much for the 53 kB budget of a
        // default 425 984-byte buffer, fine for a 64 MiB one.
        let fast = streamed(base, 90, 1400);
        assert!(!fast.worth_resting(at(base, 8), REST, budget_from(425_984)));
        assert!(fast.worth_resting(at(base, 8), REST, budget_from(64 << 20)));
    }

    #[test]
    fn a_stream_that_stopped_is_not_rested_for() {
        let base = Instant::now();
        let stream = streamed(base, 9, 1400);
        assert!(!stream.worth_resting(at(base, 20), REST, 1 << 20));
    }

    #[test]
    fn gro_entries_count_each_datagram() {
        let mut meta = [RecvMeta::default(); 3];
        meta[0].len = 3 * 1200;
        meta[0].stride = 1200;
        meta[1].len = 1000;
        meta[1].stride = 1000;
        meta[2].len = 500; // not read
        meta[2].stride = 500;
        assert_eq!(tally(&meta, 2), (4, 4600));
    }

    /// Real sockets on loopback: a paced stream of datagrams is read in rests, every
    /// datagram arrives, and a lone datagram after the stream is read without waiting
    /// for another (the socket is back in epoll).
    #[tokio::test(flavor = "current_thread")]
    async fn a_stream_is_read_in_rests_and_a_lone_datagram_after_it_is_not_held() {
        let bound = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = bound.local_addr().unwrap();
        let socket = BatchedUdp::new(bound, 4 << 20).unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        const STREAM: u32 = 3000;
        let pacer = std::thread::spawn(move || {
            // ~20 000 datagrams a second: a 1 ms rest gathers about twenty.
            let start = std::time::Instant::now();
            for i in 0..STREAM {
                let due = start + Duration::from_micros(50 * u64::from(i));
                while std::time::Instant::now() < due {
                    std::hint::spin_loop();
                }
                sender.send_to(&i.to_be_bytes(), to).unwrap();
            }
            std::thread::sleep(Duration::from_millis(100));
            let lone_sent = std::time::Instant::now();
            sender.send_to(&u32::MAX.to_be_bytes(), to).unwrap();
            lone_sent
        });
        let mut seen = vec![false; STREAM as usize];
        let mut storage = vec![[0u8; 64]; 32];
        let lone_read = loop {
            let mut bufs: Vec<IoSliceMut<'_>> =
                storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            let mut meta = [RecvMeta::default(); 32];
            let read = tokio::time::timeout(
                Duration::from_secs(10),
                std::future::poll_fn(|cx| socket.poll_recv(cx, &mut bufs, &mut meta)),
            )
            .await
            .expect("a datagram within 10 s")
            .unwrap();
            let mut lone = None;
            for (m, b) in meta.iter().zip(&bufs).take(read) {
                let value = u32::from_be_bytes(b[..4].try_into().unwrap());
                assert_eq!(m.len, 4);
                match seen.get_mut(value as usize) {
                    Some(slot) => *slot = true,
                    None => lone = Some(std::time::Instant::now()),
                }
            }
            if let Some(at) = lone {
                break at;
            }
        };
        let lone_sent = pacer.join().unwrap();
        let missing = seen.iter().filter(|s| !**s).count();
        assert_eq!(missing, 0, "{missing} of {STREAM} datagrams never read");
        assert!(socket.rests() > 10, "only {} rests during the stream", socket.rests());
        // A rest's read comes back short (about twenty datagrams where 32 fit), and that
        // ends the drain: no second read asks the kernel again before the next rest.
        assert_eq!(socket.confirming_reads(), 0, "reads that only confirmed an empty queue");
        // Held for another datagram, it would wait for the 10 s timeout above; read
        // from epoll it comes at once. The bound only allows for a loaded machine.
        let waited = lone_read.saturating_duration_since(lone_sent);
        assert!(waited < Duration::from_secs(1), "lone datagram read after {waited:?}");
    }
}
