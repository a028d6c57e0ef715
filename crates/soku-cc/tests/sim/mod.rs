//! A discrete-event path simulator for congestion controllers, on a virtual clock.
//!
//! One bottleneck of `rate_bps` with a drop-tail queue of `queue_bytes`, then Bernoulli
//! random loss `loss` on the link, a fixed propagation RTT `rtt` (split evenly between
//! the two directions) and a loss-free return path. Each flow is a bulk sender (always
//! has data) that sends `pkt`-byte packets, paced like quinn (`connection/pacing.rs`:
//! a token bucket refilled at `1.25 x window / srtt`, bursts of 2 ms worth, 10 to 256
//! packets) and limited by `window()`, unless sent as kernel TCP (`Path::kernel_tcp`). The receiver acks every `ack_every` packets or
//! after `max_ack_delay`, one ACK frame per event. The
//! controller is fed as quinn feeds it: `on_sent` per packet, `on_ack` per newly acked
//! packet, then `on_end_acks`, then loss detection (RFC 9002 §6.1: three packets or
//! 9/8 RTT behind the largest acked) and one `on_congestion_event` per batch. A 10 ms
//! tick stands in for quinn's loss timer and PTO when a whole window is lost.
//! Optional disturbances, all off by default: acks released in bursts at multiples of
//! `ack_burst` (an aggregating hop: Wi-Fi block acks, GRO, a receiver reading in
//! batches), a random extra delay of each ack frame up to `ack_jitter` (order kept),
//! a sender that runs only at wake-ups spaced `sched` apart (a loaded host's
//! scheduler: acks and pacing timers wait for the next wake-up), an ack path that
//! stalls now and then (`ack_stalls`: a receiver or a hop descheduled for a few
//! milliseconds, which holds the acks due meanwhile), and a `policer` in
//! front of the bottleneck: a token bucket that drops what exceeds its rate once its
//! burst is spent (a provider's rate limit on UDP; no queue, so no delay signal).
//! A flow may stop sending at a given time (other traffic that leaves).
//! Simplifications: lost data is resent as new data (as quinn does), acks report no
//! ack delay, no ack loss, no persistent-congestion signal.

pub mod rtt;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use quinn_proto::congestion::Controller;
use quinn_proto::RttEstimator;

/// The path every flow shares.
#[derive(Debug, Clone, Copy)]
pub struct Path {
    pub rate_bps: u64,
    pub rtt: Duration,
    pub queue_bytes: u64,
    pub loss: f64,
    /// Simulated packet size (also the controllers' MTU).
    pub pkt: u64,
    /// The receiver acks every `ack_every` packets (quinn: 2)...
    pub ack_every: usize,
    /// ...or this long after the first unacknowledged one arrived (quinn: 25 ms).
    pub max_ack_delay: Duration,
    /// Acks reach the sender only at multiples of this (zero: as they come).
    pub ack_burst: Duration,
    /// Each ack frame is delayed by a uniform `[0, ack_jitter]` more (order kept).
    pub ack_jitter: Duration,
    /// The sender runs only at wake-ups spaced uniformly in `[lo, hi]` (`None`: always).
    pub sched: Option<(Duration, Duration)>,
    /// The ack path stalls at random, on average once per `gap` (exponential gaps),
    /// each stall lasting a uniform `[0, longest]`: acks due in a stall leave at its
    /// end (`None`: never).
    pub ack_stalls: Option<(Duration, Duration)>,
    /// A token-bucket policer before the bottleneck (`None`: none).
    pub policer: Option<Policer>,
    /// Flows, by bit of their index, sent as Linux TCP sends CUBIC without the `fq`
    /// qdisc: no pacer, as soon as the window allows (clocked by the acks alone), and
    /// acked every second packet whatever `ack_every` says (delayed ACK, RFC 1122
    /// §4.2.3.2).
    pub kernel_tcp: u32,
}

/// A token bucket: `rate_bps` refills it, up to `burst_bytes`; a packet that finds
/// fewer tokens than its size is dropped.
#[derive(Debug, Clone, Copy)]
pub struct Policer {
    pub rate_bps: u64,
    pub burst_bytes: u64,
}

impl Path {
    /// `rate_bps` x `rtt_ms` with random `loss`, a drop-tail queue of one
    /// bandwidth-delay product, 1500-byte packets, quinn's default acks (every 2
    /// packets or 25 ms), no disturbances.
    pub fn one_bdp(rate_bps: u64, rtt_ms: u64, loss: f64) -> Path {
        let rtt = Duration::from_millis(rtt_ms);
        let bdp = (rate_bps as u128 * rtt.as_nanos() / 8_000_000_000) as u64;
        Path {
            rate_bps,
            rtt,
            queue_bytes: bdp,
            loss,
            pkt: 1500,
            ack_every: 2,
            max_ack_delay: Duration::from_millis(25),
            ack_burst: Duration::ZERO,
            ack_jitter: Duration::ZERO,
            sched: None,
            ack_stalls: None,
            policer: None,
            kernel_tcp: 0,
        }
    }
}

/// What one flow achieved within the measurement window.
#[derive(Debug, Clone, Default)]
pub struct FlowStats {
    /// Bytes that reached the receiver within the window.
    pub delivered: u64,
    /// Goodput as a share of the link rate.
    pub util: f64,
    pub sent: u64,
    pub dropped_queue: u64,
    pub dropped_random: u64,
    pub dropped_policer: u64,
    /// Largest window seen (bytes), over the whole run.
    pub max_window: u64,
    /// Bytes acknowledged since the flow started (for traces).
    pub acked: u64,
}

/// Results of one run.
// Not every test binary that includes the simulator reads every field.
#[allow(dead_code)]
pub struct Report {
    /// The controllers as the run left them, for inspection.
    pub controllers: Vec<Box<dyn Controller>>,
    pub flows: Vec<FlowStats>,
    /// Mean queueing delay met by packets entering the bottleneck in the window.
    pub mean_queue_delay: Duration,
    /// Share of packets sent in the window that the full queue dropped.
    pub queue_drop_fraction: f64,
}

impl FlowStats {
    // Not every test binary that includes the simulator asks for it.
    #[allow(dead_code)]
    /// Share of the packets sent in the window that were dropped, for any reason.
    pub fn loss_share(&self) -> f64 {
        let dropped = self.dropped_queue + self.dropped_random + self.dropped_policer;
        dropped as f64 / self.sent.max(1) as f64
    }
}

impl Report {
    pub fn total_util(&self) -> f64 {
        self.flows.iter().map(|f| f.util).sum()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    InFlight,
    Done,
}

struct Pkt {
    pn: u64,
    sent: u64,
    size: u64,
    state: State,
}

struct Flow {
    cc: Box<dyn Controller>,
    start: u64,
    /// The flow sends nothing new from this time on.
    stop: u64,
    next_pn: u64,
    in_flight: u64,
    unacked: VecDeque<Pkt>,
    largest_acked: Option<u64>,
    srtt: f64,
    latest_rtt: f64,
    has_rtt: bool,
    tokens: u64,
    capacity: u64,
    last_window: u64,
    last_refill: u64,
    wake_at: Option<u64>,
    /// When this flow's latest ack reaches the sender (acks are not reordered).
    last_ack_at: u64,
    pending: Pending,
    stats: FlowStats,
}

#[derive(PartialEq, Eq, PartialOrd, Ord, Clone)]
enum Ev {
    Wake(usize),
    /// One ACK frame: the packets it newly acknowledges.
    Ack(usize, Vec<u64>),
    Tick(usize),
    /// Hand the tracer a look at every flow.
    Trace,
}

/// Flows for [`run`]: each controller and when it starts sending.
pub type Flows = Vec<(Box<dyn Controller>, Duration)>;

/// A look at the flows during a run: the time, then per flow its controller and the
/// bytes acknowledged so far.
pub type Tracer<'a> = &'a mut dyn FnMut(Duration, &[(&dyn Controller, u64)]);

/// The receiver's packets not yet acknowledged: (first arrival, packet numbers).
#[derive(Default)]
struct Pending {
    first_arrival: u64,
    pns: Vec<u64>,
}

struct Sim<'a> {
    path: Path,
    trace: Option<(u64, Tracer<'a>)>,
    base: Instant,
    now: u64,
    end: u64,
    measure_from: u64,
    link_free_at: u64,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    rng: u64,
    rtt_est: RttEstimator,
    flows: Vec<Flow>,
    queue_delay_sum: u128,
    queue_delay_n: u64,
    sent_in_window: u64,
    dropped_in_window: u64,
    /// The sender's wake-ups from `now` on (with `sched`).
    wakes: VecDeque<u64>,
    /// The ack path's stalls (start, end) from `now` on (with `ack_stalls`).
    stalls: VecDeque<(u64, u64)>,
    /// The policer's tokens (bytes) and when they were last refilled.
    policer_tokens: u64,
    policer_refill: u64,
}

const BURST_NS: u128 = 2_000_000;

fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

impl Sim<'_> {
    fn at(&self, t: u64) -> Instant {
        self.base + Duration::from_nanos(t)
    }

    /// The first moment at or after `t` at which the sender runs.
    fn gate(&mut self, t: u64) -> u64 {
        let Some((lo, hi)) = self.path.sched else {
            return t;
        };
        while self.wakes.len() > 1 && self.wakes[1] <= self.now {
            self.wakes.pop_front();
        }
        while self.wakes.back().is_none_or(|&w| w < t) {
            let last = self.wakes.back().copied().unwrap_or(0);
            let gap = ns(lo) as f64 + self.random() * (ns(hi) - ns(lo)) as f64;
            self.wakes.push_back(last + gap as u64);
        }
        let i = self.wakes.partition_point(|&w| w < t);
        self.wakes[i]
    }

    /// When an ack the receiver sends so as to arrive at `t` reaches the sender.
    fn ack_at(&mut self, i: usize, t: u64) -> u64 {
        let mut t = t;
        if !self.path.ack_jitter.is_zero() {
            t += (self.random() * ns(self.path.ack_jitter) as f64) as u64;
        }
        t = self.after_stalls(t);
        let n = ns(self.path.ack_burst);
        if n > 0 {
            t = t.div_ceil(n) * n;
        }
        let f = &mut self.flows[i];
        t = t.max(f.last_ack_at);
        f.last_ack_at = t;
        t
    }

    /// `t`, or the end of the stall of the ack path (`ack_stalls`) that `t` falls in.
    fn after_stalls(&mut self, t: u64) -> u64 {
        let Some((gap, longest)) = self.path.ack_stalls else {
            return t;
        };
        while self.stalls.front().is_some_and(|&(_, end)| end < self.now) {
            self.stalls.pop_front();
        }
        while self.stalls.back().is_none_or(|&(start, _)| start <= t) {
            let last = self.stalls.back().map_or(self.now, |&(_, end)| end);
            let wait = -(1.0 - self.random()).ln() * ns(gap) as f64;
            let start = last + wait as u64;
            let end = start + (self.random() * ns(longest) as f64) as u64;
            self.stalls.push_back((start, end));
        }
        self.stalls.iter().find(|&&(start, end)| start <= t && t < end).map_or(t, |&(_, end)| end)
    }

    fn push(&mut self, t: u64, ev: Ev) {
        let t = self.gate(t);
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, ev)));
    }

    fn random(&mut self) -> f64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn tx_ns(&self, bytes: u64) -> u64 {
        (u128::from(bytes) * 8 * 1_000_000_000 / u128::from(self.path.rate_bps)) as u64
    }

    fn is_kernel_tcp(&self, i: usize) -> bool {
        self.path.kernel_tcp & (1 << i) != 0
    }

    fn try_send(&mut self, i: usize) {
        let now = self.now;
        let pkt = self.path.pkt;
        if now < self.flows[i].start || now >= self.flows[i].stop {
            return;
        }
        let unpaced = self.is_kernel_tcp(i);
        loop {
            let f = &mut self.flows[i];
            let window = f.cc.window();
            f.stats.max_window = f.stats.max_window.max(window);
            if f.in_flight + pkt > window {
                return; // congestion-blocked: an ack will wake us
            }
            if unpaced {
                self.send_one(i);
                continue;
            }
            // quinn's pacer.
            let srtt = f.srtt.max(1.0);
            if window != f.last_window {
                let cap = (u128::from(window) * BURST_NS / srtt as u128) as u64;
                f.capacity = cap.clamp(10 * pkt, 256 * pkt);
                f.tokens = f.tokens.min(f.capacity);
                f.last_window = window;
            }
            if f.tokens < pkt {
                let elapsed = (now - f.last_refill) as f64;
                let add = window as f64 * 1.25 * elapsed / srtt;
                f.tokens = (f.tokens + add as u64).min(f.capacity);
                f.last_refill = now;
            }
            if f.tokens < pkt {
                let need = (pkt.max(f.capacity) - f.tokens) as f64;
                let delay = (need * srtt / window as f64 / 1.25).max(1_000.0) as u64;
                let t = self.gate(now + delay);
                let f = &mut self.flows[i];
                if f.wake_at.is_none_or(|w| w <= now || w > t) {
                    f.wake_at = Some(t);
                    self.push(t, Ev::Wake(i));
                }
                return;
            }
            f.tokens -= pkt;
            self.send_one(i);
        }
    }

    fn send_one(&mut self, i: usize) {
        let now = self.now;
        let pkt = self.path.pkt;
        let at = self.at(now);
        let in_window = now >= self.measure_from;
        let f = &mut self.flows[i];
        let pn = f.next_pn;
        f.next_pn += 1;
        f.in_flight += pkt;
        f.cc.on_sent(at, pkt, pn);
        f.unacked.push_back(Pkt { pn, sent: now, size: pkt, state: State::InFlight });
        if in_window {
            f.stats.sent += 1;
            self.sent_in_window += 1;
        }
        if let Some(policer) = self.path.policer {
            let refill = u128::from(now - self.policer_refill) * u128::from(policer.rate_bps)
                / 8_000_000_000;
            if refill > 0 {
                self.policer_tokens =
                    (self.policer_tokens + refill as u64).min(policer.burst_bytes);
                self.policer_refill = now;
            }
            if self.policer_tokens < pkt {
                if in_window {
                    self.flows[i].stats.dropped_policer += 1;
                }
                return;
            }
            self.policer_tokens -= pkt;
        }
        let backlog_ns = self.link_free_at.saturating_sub(now);
        let backlog =
            (u128::from(backlog_ns) * u128::from(self.path.rate_bps) / 8_000_000_000) as u64;
        if backlog + pkt > self.path.queue_bytes {
            if in_window {
                self.flows[i].stats.dropped_queue += 1;
                self.dropped_in_window += 1;
            }
            return;
        }
        if in_window {
            self.queue_delay_sum += u128::from(backlog_ns);
            self.queue_delay_n += 1;
        }
        self.link_free_at = now.max(self.link_free_at) + self.tx_ns(pkt);
        if self.random() < self.path.loss {
            if in_window {
                self.flows[i].stats.dropped_random += 1;
            }
            return;
        }
        let rtt = ns(self.path.rtt);
        let arrive = self.link_free_at + rtt / 2;
        if arrive >= self.measure_from && arrive < self.end {
            self.flows[i].stats.delivered += pkt;
        }
        self.receive(i, pn, arrive);
    }

    /// The receiver got `pn` at `arrive`: ack every `ack_every` packets, or when the
    /// oldest unacknowledged one has waited `max_ack_delay`. Arrival times are known
    /// at send time and rise per flow, so the receiver runs ahead of the clock.
    fn receive(&mut self, i: usize, pn: u64, arrive: u64) {
        let back = ns(self.path.rtt) / 2;
        let delay = ns(self.path.max_ack_delay);
        let every = if self.is_kernel_tcp(i) { 2 } else { self.path.ack_every };
        let p = &mut self.flows[i].pending;
        if !p.pns.is_empty() && arrive > p.first_arrival + delay {
            let batch = std::mem::take(&mut p.pns);
            let first = p.first_arrival;
            let t = self.ack_at(i, first + delay + back);
            self.push(t, Ev::Ack(i, batch));
        }
        let p = &mut self.flows[i].pending;
        if p.pns.is_empty() {
            p.first_arrival = arrive;
        }
        p.pns.push(pn);
        if p.pns.len() >= every {
            let batch = std::mem::take(&mut p.pns);
            let t = self.ack_at(i, arrive + back);
            self.push(t, Ev::Ack(i, batch));
        }
    }

    /// The delayed-ack timer, checked on each tick (so up to 10 ms late).
    fn flush_acks(&mut self, i: usize) {
        let delay = ns(self.path.max_ack_delay);
        let p = &mut self.flows[i].pending;
        if !p.pns.is_empty() && self.now >= p.first_arrival + delay {
            let batch = std::mem::take(&mut p.pns);
            let t = self.ack_at(i, self.now + ns(self.path.rtt) / 2);
            self.push(t, Ev::Ack(i, batch));
        }
    }

    fn on_ack(&mut self, i: usize, pns: &[u64]) {
        let now = self.now;
        let at = self.at(now);
        let est = self.rtt_est;
        let base = self.base;
        let f = &mut self.flows[i];
        let mut newly = false;
        for &pn in pns {
            let Some(front) = f.unacked.front() else {
                break;
            };
            if pn < front.pn {
                continue; // already declared lost
            }
            let idx = (pn - front.pn) as usize;
            let Some(p) = f.unacked.get_mut(idx) else {
                continue;
            };
            if p.state != State::InFlight {
                continue;
            }
            p.state = State::Done;
            let (sent, size) = (p.sent, p.size);
            f.in_flight -= size;
            f.stats.acked += size;
            let largest = f.largest_acked.is_none_or(|l| pn > l);
            if largest {
                // RFC 9002 §5.1: one RTT sample per ACK frame, from its largest packet.
                let sample = (now - sent) as f64;
                if f.has_rtt {
                    f.srtt = 0.875 * f.srtt + 0.125 * sample;
                } else {
                    f.srtt = sample;
                    f.has_rtt = true;
                }
                f.latest_rtt = sample;
                f.largest_acked = Some(pn);
            }
            f.cc.on_ack(at, base + Duration::from_nanos(sent), size, false, &est);
            newly = true;
        }
        if !newly {
            return;
        }
        f.cc.on_end_acks(at, f.in_flight, false, f.largest_acked);
        self.detect_loss(i, false);
        self.try_send(i);
    }

    fn detect_loss(&mut self, i: usize, timer: bool) {
        let now = self.now;
        let at = self.at(now);
        let base = self.base;
        let f = &mut self.flows[i];
        let loss_delay = (1.125 * f.srtt.max(f.latest_rtt)) as u64;
        let largest = f.largest_acked;
        let mut lost = 0;
        let mut lost_sent = 0;
        for p in f.unacked.iter_mut() {
            if p.state != State::InFlight {
                continue;
            }
            let behind = largest.is_some_and(|l| p.pn < l);
            let by_count = largest.is_some_and(|l| p.pn + 3 <= l);
            let by_time = p.sent + loss_delay <= now;
            // The tick stands in for the PTO: after three RTTs with no ack, give up.
            let by_pto = timer && p.sent + 3 * loss_delay <= now;
            if (behind && (by_count || by_time)) || by_pto {
                p.state = State::Done;
                f.in_flight -= p.size;
                lost += p.size;
                lost_sent = lost_sent.max(p.sent);
            } else if !behind {
                break;
            }
        }
        while f.unacked.front().is_some_and(|p| p.state == State::Done) {
            f.unacked.pop_front();
        }
        if lost > 0 {
            f.cc.on_congestion_event(at, base + Duration::from_nanos(lost_sent), false, lost);
        }
    }

    fn run(&mut self) {
        if self.trace.is_some() {
            self.push(0, Ev::Trace);
        }
        for i in 0..self.flows.len() {
            let s = self.flows[i].start;
            self.push(s, Ev::Wake(i));
            self.push(s, Ev::Tick(i));
        }
        while let Some(Reverse((t, _, ev))) = self.events.pop() {
            if t >= self.end {
                break;
            }
            self.now = t;
            match ev {
                Ev::Wake(i) => {
                    if self.flows[i].wake_at == Some(t) {
                        self.flows[i].wake_at = None;
                    }
                    self.try_send(i);
                }
                Ev::Ack(i, pns) => self.on_ack(i, &pns),
                Ev::Tick(i) => {
                    self.flush_acks(i);
                    self.detect_loss(i, true);
                    self.try_send(i);
                    self.push(t + 10_000_000, Ev::Tick(i));
                }
                Ev::Trace => {
                    if let Some((every, f)) = self.trace.as_mut() {
                        let every = *every;
                        let view: Vec<(&dyn Controller, u64)> =
                            self.flows.iter().map(|f| (&*f.cc, f.stats.acked)).collect();
                        f(Duration::from_nanos(t), &view);
                        self.seq += 1;
                        self.events.push(Reverse((t + every, self.seq, Ev::Trace)));
                    }
                }
            }
        }
    }
}

/// Run `flows` (controller, start offset) over `path` for `duration`, measuring from
/// `measure_from`.
pub fn run(
    path: Path,
    flows: Flows,
    duration: Duration,
    measure_from: Duration,
    seed: u64,
) -> Report {
    run_traced(path, flows, duration, measure_from, seed, None)
}

/// [`run`], calling `trace` every `.0` of virtual time with a look at every flow.
pub fn run_traced(
    path: Path,
    flows: Flows,
    duration: Duration,
    measure_from: Duration,
    seed: u64,
    trace: Option<(Duration, Tracer<'_>)>,
) -> Report {
    let flows = flows.into_iter().map(|(cc, start)| (cc, start, None)).collect();
    run_stopping(path, flows, duration, measure_from, seed, trace)
}

/// [`run_traced`] with flows (controller, start, stop) of which some stop sending at
/// their `stop` time.
pub fn run_stopping(
    path: Path,
    flows: Vec<(Box<dyn Controller>, Duration, Option<Duration>)>,
    duration: Duration,
    measure_from: Duration,
    seed: u64,
    trace: Option<(Duration, Tracer<'_>)>,
) -> Report {
    let rtt_est = rtt::estimator(path.rtt);
    let flows = flows
        .into_iter()
        .map(|(cc, start, stop)| Flow {
            cc,
            start: ns(start),
            stop: stop.map_or(u64::MAX, ns),
            next_pn: 0,
            in_flight: 0,
            unacked: VecDeque::new(),
            largest_acked: None,
            srtt: path.rtt.as_nanos() as f64,
            latest_rtt: path.rtt.as_nanos() as f64,
            has_rtt: false,
            tokens: 10 * path.pkt,
            capacity: 10 * path.pkt,
            last_window: 0,
            last_refill: ns(start),
            wake_at: None,
            last_ack_at: 0,
            pending: Pending::default(),
            stats: FlowStats::default(),
        })
        .collect();
    let mut sim = Sim {
        path,
        trace: trace.map(|(every, f)| (ns(every), f)),
        base: Instant::now(),
        now: 0,
        end: ns(duration),
        measure_from: ns(measure_from),
        link_free_at: 0,
        events: BinaryHeap::new(),
        seq: 0,
        rng: seed | 1,
        stalls: VecDeque::new(),
        rtt_est,
        flows,
        queue_delay_sum: 0,
        queue_delay_n: 0,
        sent_in_window: 0,
        dropped_in_window: 0,
        wakes: VecDeque::new(),
        policer_tokens: path.policer.map_or(0, |p| p.burst_bytes),
        policer_refill: 0,
    };
    sim.run();
    let secs = (duration - measure_from).as_secs_f64();
    let link_bytes = path.rate_bps as f64 / 8.0 * secs;
    let mut controllers = Vec::new();
    let flows = sim
        .flows
        .into_iter()
        .map(|f| {
            controllers.push(f.cc);
            let mut s = f.stats;
            s.util = s.delivered as f64 / link_bytes;
            s
        })
        .collect();
    Report {
        controllers,
        flows,
        mean_queue_delay: Duration::from_nanos(
            (sim.queue_delay_sum / u128::from(sim.queue_delay_n.max(1))) as u64,
        ),
        queue_drop_fraction: sim.dropped_in_window as f64 / sim.sent_in_window.max(1) as f64,
    }
}
