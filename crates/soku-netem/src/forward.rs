//! The forwarding loop: one thread per direction, reading one TUN device and writing
//! the other.
//!
//! Each turn of the loop: read packets until `EAGAIN` (at most [`BATCH`] per turn),
//! stamp each with the clock and ask the [`LinkModel`] for its fate; write every packet
//! whose delivery time has come; then sleep in `ppoll` on the input fd and a stop
//! eventfd until the next delivery time. Timer slack is set to 1 ns so the kernel's
//! hrtimer wakes us on time. There is no spinning: on this VM a wake-up comes
//! 60-130 us after its deadline (see docs/netem.md), and spinning that away would
//! cost a core the endpoints need.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::delay_line::{DelayLine, Pool};
use crate::model::{DropReason, LinkModel, Verdict};
use crate::sys;

/// Packets read per turn before deliveries get a chance to go out.
pub(crate) const BATCH: usize = 64;
/// SCHED_FIFO priority of the forwarding threads when `PathSpec::realtime` is set.
pub(crate) const RT_PRIORITY: i32 = 10;
/// Nice value of the forwarding threads otherwise (best effort; needs root).
pub(crate) const NICE: i32 = -10;
/// How often the thread refreshes its published CPU time.
const CPU_EVERY_NS: u64 = 20_000_000;

/// Live counters of one direction, written by its thread, read by anyone.
#[derive(Debug, Default)]
pub(crate) struct DirCounters {
    pub(crate) packets_in: AtomicU64,
    pub(crate) packets: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) dropped_loss: AtomicU64,
    pub(crate) dropped_fault: AtomicU64,
    pub(crate) dropped_queue: AtomicU64,
    pub(crate) dropped_queue_bytes: AtomicU64,
    pub(crate) dropped_overflow: AtomicU64,
    pub(crate) write_errors: AtomicU64,
    pub(crate) max_queue_bytes: AtomicU64,
    pub(crate) in_flight: AtomicU64,
    pub(crate) late_sum_ns: AtomicU64,
    pub(crate) late_max_ns: AtomicU64,
    pub(crate) cpu_ns: AtomicU64,
    pub(crate) user_ns: AtomicU64,
}

/// A snapshot of one direction's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirStats {
    /// Packets read from the sending TUN device.
    pub packets_in: u64,
    /// Packets delivered to the receiving TUN device.
    pub packets: u64,
    /// IP bytes delivered.
    pub bytes: u64,
    /// Packets dropped by random or Gilbert-Elliott loss.
    pub dropped_loss: u64,
    /// Packets dropped by a fault switched on at run time ([`crate::Faults`]).
    pub dropped_fault: u64,
    /// Packets dropped because the drop-tail queue was full.
    pub dropped_queue: u64,
    /// IP bytes of the packets in `dropped_queue`: what a sender offered beyond what
    /// the link and its queue could take (packets differ in size, so the count alone
    /// does not say how much).
    pub dropped_queue_bytes: u64,
    /// Packets dropped because the emulator's buffer pool was exhausted.
    pub dropped_overflow: u64,
    /// Writes to the receiving TUN device that failed (packet lost).
    pub write_errors: u64,
    /// Largest queue occupancy seen, bytes.
    pub max_queue_bytes: u64,
    /// Packets currently in flight (queued or propagating).
    pub in_flight: u64,
    /// Sum over delivered packets of how late they left versus schedule, ns.
    pub late_sum_ns: u64,
    /// Worst lateness of a delivered packet, ns.
    pub late_max_ns: u64,
    /// CPU time (user + system) used by this direction's thread, ns. Includes the
    /// kernel's receive processing that runs inside the TUN `write` calls.
    pub cpu_ns: u64,
    /// The user-space part of `cpu_ns`: the emulator's own logic.
    pub user_ns: u64,
}

impl DirStats {
    /// Counts a packet of `len` bytes the link model dropped for `reason`.
    fn count_drop(&mut self, reason: DropReason, len: usize) {
        match reason {
            DropReason::Loss => self.dropped_loss += 1,
            DropReason::Queue => {
                self.dropped_queue += 1;
                self.dropped_queue_bytes += len as u64;
            }
        }
    }

    /// Mean lateness of deliveries versus schedule (timer precision), if any.
    pub fn mean_late(&self) -> Duration {
        Duration::from_nanos(self.late_sum_ns.checked_div(self.packets).unwrap_or(0))
    }
}

impl DirCounters {
    pub(crate) fn snapshot(&self) -> DirStats {
        DirStats {
            packets_in: self.packets_in.load(Relaxed),
            packets: self.packets.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            dropped_loss: self.dropped_loss.load(Relaxed),
            dropped_fault: self.dropped_fault.load(Relaxed),
            dropped_queue: self.dropped_queue.load(Relaxed),
            dropped_queue_bytes: self.dropped_queue_bytes.load(Relaxed),
            dropped_overflow: self.dropped_overflow.load(Relaxed),
            write_errors: self.write_errors.load(Relaxed),
            max_queue_bytes: self.max_queue_bytes.load(Relaxed),
            in_flight: self.in_flight.load(Relaxed),
            late_sum_ns: self.late_sum_ns.load(Relaxed),
            late_max_ns: self.late_max_ns.load(Relaxed),
            cpu_ns: self.cpu_ns.load(Relaxed),
            user_ns: self.user_ns.load(Relaxed),
        }
    }

    fn publish(&self, s: &DirStats) {
        self.packets_in.store(s.packets_in, Relaxed);
        self.packets.store(s.packets, Relaxed);
        self.bytes.store(s.bytes, Relaxed);
        self.dropped_loss.store(s.dropped_loss, Relaxed);
        self.dropped_fault.store(s.dropped_fault, Relaxed);
        self.dropped_queue.store(s.dropped_queue, Relaxed);
        self.dropped_queue_bytes.store(s.dropped_queue_bytes, Relaxed);
        self.dropped_overflow.store(s.dropped_overflow, Relaxed);
        self.write_errors.store(s.write_errors, Relaxed);
        self.max_queue_bytes.store(s.max_queue_bytes, Relaxed);
        self.in_flight.store(s.in_flight, Relaxed);
        self.late_sum_ns.store(s.late_sum_ns, Relaxed);
        self.late_max_ns.store(s.late_max_ns, Relaxed);
        self.cpu_ns.store(s.cpu_ns, Relaxed);
        self.user_ns.store(s.user_ns, Relaxed);
    }
}

/// Faults switched on and off while the path runs, shared by both directions: what a
/// test needs beyond the statistical model (an outage of the whole path; a network
/// that blocks, polices or shapes UDP).
#[derive(Debug, Default)]
pub struct Faults {
    blackout: AtomicBool,
    drop_udp: AtomicBool,
    /// UDP's policed rate per direction in bits per second; 0 for none.
    udp_rate_bps: AtomicU64,
    /// UDP's shaped rate per direction in bits per second; 0 for none.
    udp_shape_bps: AtomicU64,
}

/// What the faults do to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultVerdict {
    /// On to the link model untouched.
    Pass,
    /// On to the link model, delivered this many ns later than it would be (it waited
    /// in a UDP shaper's queue).
    Delay(u64),
    /// Dropped.
    Drop,
}

/// One direction's state for the UDP faults that keep some.
#[derive(Debug, Default)]
pub(crate) struct UdpLimits {
    pub(crate) policer: UdpPolicer,
    pub(crate) shaper: UdpShaper,
}

impl Faults {
    /// Drops every packet both ways while `on` (the cable pulled, the Wi-Fi gone).
    pub fn set_blackout(&self, on: bool) {
        self.blackout.store(on, Relaxed);
    }

    /// Drops every UDP packet both ways while `on` (a firewall that blocks UDP).
    pub fn set_drop_udp(&self, on: bool) {
        self.drop_udp.store(on, Relaxed);
    }

    /// Polices UDP to `bps` bits per second in each direction (`None`: no limit): UDP
    /// packets beyond the rate are dropped, TCP is untouched (a middlebox that
    /// rate-limits UDP). See [`UdpPolicer`].
    pub fn set_udp_rate(&self, bps: Option<u64>) {
        self.udp_rate_bps.store(bps.unwrap_or(0), Relaxed);
    }

    /// Shapes UDP to `bps` bits per second in each direction (`None`: no shaping): UDP
    /// packets beyond the rate wait in a queue of their own (dropped only when it holds
    /// [`UdpShaper::QUEUE`] of the rate), TCP is untouched and never waits behind them
    /// (a middlebox that throttles UDP with a shaper rather than a policer). See
    /// [`UdpShaper`].
    pub fn set_udp_shape(&self, bps: Option<u64>) {
        self.udp_shape_bps.store(bps.unwrap_or(0), Relaxed);
    }

    /// What the faults do to the IP `packet` now; `udp` is this direction's state.
    pub(crate) fn judge(&self, packet: &[u8], udp: &mut UdpLimits, now_ns: u64) -> FaultVerdict {
        if self.blackout.load(Relaxed) {
            return FaultVerdict::Drop;
        }
        // IPv4 protocol field (RFC 791): 17 is UDP. The namespaces carry no IPv6.
        let is_udp = packet.len() > 9 && packet[0] >> 4 == 4 && packet[9] == 17;
        if !is_udp {
            return FaultVerdict::Pass;
        }
        if self.drop_udp.load(Relaxed) {
            return FaultVerdict::Drop;
        }
        let policed = match self.udp_rate_bps.load(Relaxed) {
            0 => false,
            bps => !udp.policer.admit(now_ns, packet.len(), bps),
        };
        if policed {
            return FaultVerdict::Drop;
        }
        match self.udp_shape_bps.load(Relaxed) {
            0 => FaultVerdict::Pass,
            bps => match udp.shaper.admit(now_ns, packet.len(), bps) {
                Some(0) => FaultVerdict::Pass,
                Some(wait) => FaultVerdict::Delay(wait),
                None => FaultVerdict::Drop,
            },
        }
    }
}

/// A token bucket (RFC 2697's single-rate policer, one bucket): tokens in bytes fill
/// at the rate up to [`UdpPolicer::BURST`] worth of time, and a packet passes only if
/// the bucket holds its size. Excess is dropped, not queued, as rate-limiting firewalls
/// do.
#[derive(Debug, Default)]
pub(crate) struct UdpPolicer {
    tokens: f64,
    last_ns: u64,
}

impl UdpPolicer {
    /// Bucket depth in time at the rate (at least 16 full-size packets).
    const BURST: Duration = Duration::from_millis(20);

    fn admit(&mut self, now_ns: u64, len: usize, bps: u64) -> bool {
        let rate = bps as f64 / 8.0 / 1e9;
        let depth = (rate * Self::BURST.as_nanos() as f64).max(16.0 * 1500.0);
        let elapsed = now_ns.saturating_sub(self.last_ns) as f64;
        self.tokens = (self.tokens + elapsed * rate).min(depth);
        self.last_ns = now_ns;
        if self.tokens >= len as f64 {
            self.tokens -= len as f64;
            true
        } else {
            false
        }
    }
}

/// A shaper (as Linux's `tbf` with a latency limit, on UDP alone): packets leave one
/// after another at the rate, each waiting until the ones before it have left; a packet
/// that would wait longer than [`UdpShaper::QUEUE`] is dropped (the queue is full).
/// Its queue is its own: other traffic does not wait behind it.
#[derive(Debug, Default)]
pub(crate) struct UdpShaper {
    /// When the last admitted packet has left the shaper (ns).
    free_at_ns: u64,
}

impl UdpShaper {
    /// The longest wait in the queue, in time at the rate (a typical `tbf` latency).
    const QUEUE: Duration = Duration::from_millis(100);

    /// The wait of a packet of `len` bytes arriving at `now_ns`, or `None` if the queue
    /// is full.
    fn admit(&mut self, now_ns: u64, len: usize, bps: u64) -> Option<u64> {
        let start = self.free_at_ns.max(now_ns);
        let wait = start - now_ns;
        if wait > Self::QUEUE.as_nanos() as u64 {
            return None;
        }
        let send_ns = (len as u64 * 8).saturating_mul(1_000_000_000) / bps.max(1);
        self.free_at_ns = start + send_ns;
        Some(wait + send_ns)
    }
}

/// Shutdown signal shared by both directions.
#[derive(Debug)]
pub(crate) struct Stop {
    pub(crate) flag: AtomicBool,
    pub(crate) fd: OwnedFd,
}

impl Stop {
    pub(crate) fn trigger(&self) {
        self.flag.store(true, Relaxed);
        sys::eventfd_signal(self.fd.as_raw_fd());
    }
}

/// Everything one direction's thread owns.
pub(crate) struct Direction {
    pub(crate) input: Arc<OwnedFd>,
    pub(crate) output: Arc<OwnedFd>,
    pub(crate) model: LinkModel,
    pub(crate) pool: Pool,
    pub(crate) line: DelayLine,
    pub(crate) counters: Arc<DirCounters>,
    pub(crate) faults: Arc<Faults>,
    pub(crate) udp_limits: UdpLimits,
    pub(crate) stop: Arc<Stop>,
    pub(crate) epoch: Instant,
    pub(crate) realtime: bool,
}

impl Direction {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Runs until stopped or the input device fails; returns the error, if any.
    pub(crate) fn run(mut self) -> io::Result<()> {
        sys::set_timer_slack(1);
        // The emulator is the network: let it win the CPU over the endpoints it serves.
        // SCHED_FIFO wakes it at once even when the endpoints keep both cores busy
        // (measured: 1.8 vs 0.9 Gbit/s under a parallel build); the kernel's RT
        // throttling still leaves others 5 % of each core. Fall back to nice.
        if !(self.realtime && sys::set_fifo(RT_PRIORITY)) {
            sys::set_nice(NICE);
        }
        let input = self.input.as_raw_fd();
        let output = self.output.as_raw_fd();
        let stop_fd = self.stop.fd.as_raw_fd();
        let mut scratch = vec![0u8; 65_536];
        let mut st = DirStats::default();
        let mut cpu_at = 0u64;
        let result = loop {
            if self.stop.flag.load(Relaxed) {
                break Ok(());
            }
            // 1. Read what is there.
            let mut drained = false;
            let mut read_err = None;
            for _ in 0..BATCH {
                let slot = self.pool.alloc();
                let buf = match slot {
                    Some(s) => self.pool.buf_mut(s),
                    None => &mut scratch[..],
                };
                match sys::read(input, buf) {
                    Ok(n) => {
                        st.packets_in += 1;
                        let Some(slot) = slot else {
                            st.dropped_overflow += 1;
                            continue;
                        };
                        let now = self.now();
                        let packet = self.pool.data(slot, n as u32);
                        let waited = match self.faults.judge(packet, &mut self.udp_limits, now) {
                            FaultVerdict::Pass => 0,
                            FaultVerdict::Delay(ns) => ns,
                            FaultVerdict::Drop => {
                                self.pool.free(slot);
                                st.dropped_fault += 1;
                                continue;
                            }
                        };
                        match self.model.offer(now, n) {
                            // A packet that waited in a shaper leaves after others that
                            // came later: out of the FIFO's order.
                            Verdict::Deliver { at, reordered } => {
                                self.line.push(at + waited, slot, n as u32, reordered || waited > 0)
                            }
                            Verdict::Drop(reason) => {
                                self.pool.free(slot);
                                st.count_drop(reason, n);
                            }
                        }
                    }
                    Err(e) => {
                        if let Some(s) = slot {
                            self.pool.free(s);
                        }
                        match e.kind() {
                            io::ErrorKind::WouldBlock => drained = true,
                            io::ErrorKind::Interrupted => continue,
                            _ => read_err = Some(e),
                        }
                        break;
                    }
                }
            }
            if let Some(e) = read_err {
                break Err(e);
            }
            // 2. Deliver what is due.
            // At most BATCH writes per turn, so reading (cheap) keeps the sending
            // device's ring from overflowing while writes (which run the receiver's
            // stack) take their time.
            let mut now = self.now();
            let mut written = 0;
            while written < BATCH {
                let Some(e) = self.line.pop_due(now) else {
                    break;
                };
                written += 1;
                match sys::write(output, self.pool.data(e.slot, e.len)) {
                    Ok(_) => {
                        st.packets += 1;
                        st.bytes += e.len as u64;
                        let late = now - e.at;
                        st.late_sum_ns += late;
                        st.late_max_ns = st.late_max_ns.max(late);
                    }
                    Err(_) => st.write_errors += 1,
                }
                self.pool.free(e.slot);
                now = self.now();
            }
            st.in_flight = self.line.len() as u64;
            st.max_queue_bytes = self.model.max_backlog_bytes();
            if now >= cpu_at {
                let (user, system) = sys::thread_cpu_ns();
                (st.user_ns, st.cpu_ns) = (user, user + system);
                cpu_at = now + CPU_EVERY_NS;
            }
            self.counters.publish(&st);
            if !drained || written == BATCH {
                continue;
            }
            // 3. Sleep until input, stop, or the next delivery.
            let timeout = match self.line.next_due() {
                Some(at) if at <= now => continue,
                Some(at) => Some(Duration::from_nanos(at - now)),
                None => None,
            };
            match sys::wait(input, stop_fd, timeout) {
                Ok(true) => break Ok(()),
                Ok(false) => {}
                Err(e) => break Err(e),
            }
        };
        for e in self.line.drain() {
            self.pool.free(e.slot);
        }
        st.in_flight = 0;
        let (user, system) = sys::thread_cpu_ns();
        (st.user_ns, st.cpu_ns) = (user, user + system);
        self.counters.publish(&st);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(protocol: u8, len: usize) -> Vec<u8> {
        let mut packet = vec![0u8; len];
        packet[0] = 0x45;
        packet[9] = protocol;
        packet
    }

    /// Queue drops are counted in packets and in bytes, random loss in packets.
    #[test]
    fn queue_drops_count_their_bytes() {
        let mut st = DirStats::default();
        st.count_drop(DropReason::Queue, 1480);
        st.count_drop(DropReason::Queue, 60);
        st.count_drop(DropReason::Loss, 1480);
        assert_eq!((st.dropped_queue, st.dropped_queue_bytes, st.dropped_loss), (2, 1540, 1));
    }

    fn drops(faults: &Faults, packet: &[u8], udp: &mut UdpLimits, now: u64) -> bool {
        faults.judge(packet, udp, now) == FaultVerdict::Drop
    }

    /// Over 10 s of 1500-byte UDP packets offered at 100 Mbit/s, a 5 Mbit/s policer lets
    /// 5 Mbit/s through (plus its one burst); TCP passes whatever the rate.
    #[test]
    fn the_udp_policer_passes_its_rate_and_leaves_tcp_alone() {
        let faults = Faults::default();
        faults.set_udp_rate(Some(5_000_000));
        let mut udp_state = UdpLimits::default();
        let (udp, tcp) = (ipv4(17, 1500), ipv4(6, 1500));
        let gap_ns = 1500 * 8 * 1_000_000_000 / 100_000_000; // 120 us at 100 Mbit/s
        let mut passed = 0u64;
        for k in 0..(10_000_000_000 / gap_ns) {
            let now = k * gap_ns;
            if !drops(&faults, &udp, &mut udp_state, now) {
                passed += 1500;
            }
            assert!(!drops(&faults, &tcp, &mut udp_state, now), "TCP was dropped");
        }
        let rate = passed as f64 * 8.0 / 10.0;
        assert!((4.9e6..=5.2e6).contains(&rate), "passed {rate} bit/s");
        faults.set_udp_rate(None);
        assert!(!drops(&faults, &udp, &mut udp_state, 0));
        faults.set_drop_udp(true);
        assert!(drops(&faults, &udp, &mut udp_state, 0));
        assert!(!drops(&faults, &tcp, &mut udp_state, 0));
    }

    /// UDP offered at 100 Mbit/s to a 5 Mbit/s shaper: what passes leaves at 5 Mbit/s,
    /// each packet after the ones before it, waiting at most the queue's 100 ms (plus its
    /// own send time); the rest is dropped. TCP neither waits nor drops.
    #[test]
    fn the_udp_shaper_queues_to_its_rate_and_leaves_tcp_alone() {
        let faults = Faults::default();
        faults.set_udp_shape(Some(5_000_000));
        let mut udp_state = UdpLimits::default();
        let (udp, tcp) = (ipv4(17, 1500), ipv4(6, 1500));
        let gap_ns = 1500 * 8 * 1_000_000_000 / 100_000_000;
        let send_ns = 1500 * 8 * 1_000_000_000 / 5_000_000; // 2.4 ms at 5 Mbit/s
        let (mut passed, mut last_leave, mut worst_wait) = (0u64, 0u64, 0u64);
        for k in 0..(10_000_000_000 / gap_ns) {
            let now = k * gap_ns;
            match faults.judge(&udp, &mut udp_state, now) {
                FaultVerdict::Drop => {}
                FaultVerdict::Pass => panic!("a packet skipped the shaper"),
                FaultVerdict::Delay(wait) => {
                    passed += 1500;
                    let leave = now + wait;
                    assert!(leave >= last_leave + send_ns, "packets left closer than the rate");
                    last_leave = leave;
                    worst_wait = worst_wait.max(wait);
                }
            }
            assert_eq!(faults.judge(&tcp, &mut udp_state, now), FaultVerdict::Pass);
        }
        let rate = passed as f64 * 8.0 / 10.0;
        assert!((4.9e6..=5.1e6).contains(&rate), "passed {rate} bit/s");
        let limit = UdpShaper::QUEUE.as_nanos() as u64 + send_ns;
        assert!(worst_wait <= limit && worst_wait > limit / 2, "worst wait {worst_wait} ns");
        // Below the rate nothing waits beyond its own send time, nothing is dropped.
        faults.set_udp_shape(Some(1_000_000_000));
        let later = 20_000_000_000;
        assert!(matches!(faults.judge(&udp, &mut udp_state, later), FaultVerdict::Delay(12_000)));
        faults.set_udp_shape(None);
        assert_eq!(faults.judge(&udp, &mut udp_state, later), FaultVerdict::Pass);
    }
}
