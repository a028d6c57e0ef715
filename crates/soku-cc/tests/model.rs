//! The state machine driven by synthetic ack/loss/RTT sequences: one ack-clocked
//! "round" at a time over a path that carries `cap` packets per 100 ms round trip.

#[path = "sim/rtt.rs"]
mod rtt;

use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn_proto::congestion::{Controller, ControllerFactory};
use quinn_proto::RttEstimator;
use soku_cc::{
    BoardSlot, MemoryBoard, MinRttRecord, Mode, PathBoard, ShareRecord, SokuCc, SokuCcConfig,
};

const MTU: u64 = 1200;
const RTT: Duration = Duration::from_millis(100);

struct Driver {
    cc: Box<dyn Controller>,
    now: Instant,
    pn: u64,
    est: RttEstimator,
}

impl Driver {
    fn new(config: SokuCcConfig) -> Self {
        let now = Instant::now();
        Self { cc: Arc::new(config).build(now, MTU as u16), now, pn: 0, est: rtt::estimator(RTT) }
    }

    /// One round trip: send what the window allows (at most `cap` packets get through,
    /// `lost` of them are lost on the way), ack the rest one RTT later, two packets a
    /// frame as quinn's peer does (`SokuCcConfig::ack_every_packets`).
    fn round(&mut self, cap: u64, lost: u64, app_limited: bool) {
        self.round_taking(RTT, cap, lost, app_limited);
    }

    /// [`Driver::round`] with acks `took` after the sends (a queue when above `RTT`).
    fn round_taking(&mut self, took: Duration, cap: u64, lost: u64, app_limited: bool) {
        let sent_at = self.now;
        let n = (self.cc.window() / MTU).min(cap + lost).max(1);
        let first = self.send(n);
        self.now += took;
        let delivered = n.saturating_sub(lost);
        let mut in_flight = n * MTU;
        for i in 0..delivered {
            in_flight -= MTU;
            self.cc.on_ack(self.now, sent_at, MTU, app_limited, &self.est);
            if i % 2 == 1 || i + 1 == delivered {
                self.cc.on_end_acks(self.now, in_flight, app_limited, Some(first + lost + i));
            }
        }
        if lost > 0 {
            self.cc.on_congestion_event(self.now, sent_at, false, lost.min(n) * MTU);
        }
    }

    /// Sends `n` packets now; the first one's number.
    fn send(&mut self, n: u64) -> u64 {
        for _ in 0..n {
            self.cc.on_sent(self.now, MTU, self.pn);
            self.pn += 1;
        }
        self.pn - n
    }

    fn soku(&self) -> SokuCc {
        let boxed = self.cc.clone_box();
        *boxed.into_any().downcast::<SokuCc>().expect("a SokuCc")
    }
}

#[test]
fn startup_finds_bandwidth_then_probes() {
    let mut d = Driver::new(SokuCcConfig::default());
    let mut modes = Vec::new();
    for _ in 0..40 {
        d.round(500, 0, false);
        modes.push(d.soku().mode());
    }
    assert_eq!(modes[0], Mode::Startup);
    // Startup ends a few rounds after the pipe is full (about round 9 here); this
    // driver empties the pipe every round, so drain ends in the same ack batch.
    let startup = modes.iter().take_while(|m| **m == Mode::Startup).count();
    assert!((8..=16).contains(&startup), "{modes:?}");
    let s = d.soku();
    assert_eq!(s.mode(), Mode::ProbeBw);
    // 500 packets of 1200 bytes per 100 ms = 48 Mbit/s.
    let bw = s.bandwidth_bps().expect("bandwidth measured");
    assert!((46_000_000..=50_000_000).contains(&bw), "bw {bw}");
    assert_eq!(s.min_rtt(), Some(RTT));
    // This driver acks a whole round at one instant, the most ack aggregation there
    // is: the window carries up to one more BDP for it (BBR's extra_acked)...
    let agg = s.ack_aggregation();
    assert!((400_000..=610_000).contains(&agg), "ack aggregation {agg}");
    // ...on top of about 1-1.5 BDP (600 kB), never the startup overshoot.
    let w = d.cc.window() - agg;
    assert!((500_000..=950_000).contains(&w), "window {w} + {agg}");
}

/// A background flow leaves startup at its first loss (LEDBAT's answer to any loss); a
/// normal flow keeps doubling through a few lost packets, which random loss brings.
#[test]
fn a_background_startup_ends_at_the_first_loss() {
    for (config, ends) in [(SokuCcConfig::background(), true), (SokuCcConfig::default(), false)] {
        let mut d = Driver::new(config);
        for _ in 0..3 {
            d.round(500, 0, false);
        }
        assert_eq!(d.soku().mode(), Mode::Startup);
        d.round(500, 1, false);
        assert_eq!(d.soku().mode() != Mode::Startup, ends, "{:?}", d.soku().mode());
    }
}

/// One startup round whose packets the peer acknowledges ten at a time, one RTT after
/// they left, but for the round's last five, which wait `timer` more for its ack timer.
fn round_with_a_tail_on_the_timer(d: &mut Driver, timer: Duration) {
    let sent_at = d.now;
    let n = d.cc.window() / MTU;
    let first = d.send(n);
    let mut in_flight = n * MTU;
    let mut ack = |d: &mut Driver, packets: std::ops::Range<u64>, took: Duration| {
        d.now = sent_at + took;
        for _ in packets.clone() {
            in_flight -= MTU;
            d.cc.on_ack(d.now, sent_at, MTU, false, &d.est);
        }
        d.cc.on_end_acks(d.now, in_flight, false, Some(first + packets.end - 1));
    };
    for start in (0..n - 5).step_by(10) {
        ack(d, start..(start + 10).min(n - 5), RTT);
    }
    ack(d, n - 5..n, RTT + timer);
}

#[test]
fn startup_takes_the_top_of_the_rtt_range_from_frames_of_the_full_count() {
    let timer = Duration::from_millis(25);
    for (mut config, tail_sets_the_top) in
        [(SokuCcConfig::default(), false), (SokuCcConfig::background(), true)]
    {
        config.ack_every_packets = 10;
        let mut d = Driver::new(config);
        for _ in 0..4 {
            round_with_a_tail_on_the_timer(&mut d, timer);
        }
        let s = d.soku();
        assert_eq!(s.mode(), Mode::Startup);
        let top = s.queue_view().rtt_top.expect("a top");
        assert_eq!(top >= RTT + timer, tail_sets_the_top, "top {top:?}");
    }
}

#[test]
fn random_loss_keeps_the_window() {
    let mut d = Driver::new(SokuCcConfig::default());
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    let before = d.soku().bandwidth_bps().unwrap_or(0);
    for _ in 0..40 {
        d.round(500, 25, false); // 5 % loss, every round
    }
    let s = d.soku();
    assert_eq!(s.inflight_bound(), None, "5 % random loss read as congestion");
    let after = s.bandwidth_bps().unwrap_or(0);
    assert!(after as f64 >= 0.9 * before as f64, "bw {before} -> {after}");
    assert!(d.cc.window() >= 500 * MTU, "window {}", d.cc.window());
}

#[test]
fn heavy_loss_bounds_inflight() {
    let mut d = Driver::new(SokuCcConfig::default());
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    let before = d.cc.window();
    for _ in 0..3 {
        d.round(300, 200, false); // 40 % of each round lost
    }
    let s = d.soku();
    assert!(s.inflight_bound().is_some(), "no bound after heavy loss");
    assert!(d.cc.window() < before, "window {} -> {}", before, d.cc.window());
}

#[test]
fn persistent_congestion_collapses_then_restarts() {
    let mut d = Driver::new(SokuCcConfig::default());
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    d.cc.on_congestion_event(d.now, d.now, true, 100 * MTU);
    assert_eq!(d.cc.window(), 4 * MTU);
    assert_eq!(d.soku().mode(), Mode::Startup);
    assert_eq!(d.soku().bandwidth_bps(), None);
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    assert_eq!(d.soku().mode(), Mode::ProbeBw);
}

#[test]
fn app_limited_rounds_do_not_lower_bandwidth() {
    let mut d = Driver::new(SokuCcConfig::default());
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    let before = d.soku().bandwidth_bps().unwrap_or(0);
    for _ in 0..30 {
        d.round(20, 0, true); // the application only has 20 packets per round
    }
    let after = d.soku().bandwidth_bps().unwrap_or(0);
    assert_eq!(before, after);
}

/// The count of round trips in which the sender had less to send than its window
/// allowed: what says whether anything but the window held a copy back.
#[test]
fn app_limited_rounds_are_counted() {
    let mut d = Driver::new(SokuCcConfig::default());
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    let (rounds, limited) = d.soku().rounds();
    assert!(rounds >= 30, "{rounds} rounds");
    assert_eq!(limited, 0);
    for _ in 0..10 {
        d.round(20, 0, true);
    }
    let (after, limited) = d.soku().rounds();
    assert!(after >= rounds + 8, "{after} rounds");
    assert!((8..=10).contains(&limited), "{limited} app-limited rounds");
}

#[test]
fn rate_cap_bounds_window_and_is_exposed() {
    let mut d = Driver::new(SokuCcConfig::with_rate_cap(8_000_000));
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    let s = d.soku();
    assert_eq!(s.rate_cap_bps(), Some(8_000_000));
    // 1 MB/s x 100 ms = 100 kB.
    assert!(d.cc.window() <= 100_000, "window {}", d.cc.window());
}

#[test]
fn probe_rtt_after_min_rtt_window() {
    let mut d = Driver::new(SokuCcConfig::default());
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    // The RTT never gets back to its minimum (a standing queue of 20 ms)...
    let mut seen = false;
    for _ in 0..120 {
        let sent_at = d.now;
        d.cc.on_sent(sent_at, MTU, d.pn);
        d.pn += 1;
        d.now += RTT + Duration::from_millis(20);
        d.cc.on_ack(d.now, sent_at, MTU, false, &d.est);
        d.cc.on_end_acks(d.now, 0, false, Some(d.pn - 1));
        seen |= d.soku().mode() == Mode::ProbeRtt;
    }
    // ...so after 10 s the controller probes for it and adopts the new minimum.
    assert!(seen, "never entered probe-rtt");
    assert_eq!(d.soku().min_rtt(), Some(RTT + Duration::from_millis(20)));
}

#[test]
fn background_mode_uses_smaller_window() {
    let mut fg = Driver::new(SokuCcConfig::default());
    let mut bg = Driver::new(SokuCcConfig::background());
    for _ in 0..40 {
        fg.round(500, 0, false);
        bg.round(500, 0, false);
    }
    assert!(bg.cc.window() < fg.cc.window());
}

/// A driver three rounds in, its min RTT the path's.
fn driver_with_min_rtt() -> Driver {
    let mut d = Driver::new(SokuCcConfig::default());
    for _ in 0..3 {
        d.round(10, 0, false);
    }
    assert_eq!(d.soku().min_rtt(), Some(RTT));
    d
}

/// Sends a packet at `d.now` and another `second_send_after` later, then acks the first
/// with a receive stamp of `d.now + stamp_after`; returns the min RTT after that.
fn ack_first_of_two_with_stamp(
    d: &mut Driver,
    second_send_after: Duration,
    stamp_after: Duration,
) -> Duration {
    let t = d.now;
    d.cc.on_sent(t, MTU, d.pn);
    d.cc.on_sent(t + second_send_after, MTU, d.pn + 1);
    d.cc.on_ack(t + stamp_after, t, MTU, false, &d.est);
    d.cc.on_end_acks(t + stamp_after, MTU, false, Some(d.pn));
    d.soku().min_rtt().expect("a min RTT")
}

/// A stamp can be stale by more than the time since our latest send (a 23.9 ms sample
/// came from a 50 ms emulated path): the time the ack is processed, read from the
/// clock, is the floor. Here every send happened 10 s ago as far as the clock knows,
/// so every sample is at least that, and an ack stamped 1 ms after the latest send
/// must not make a 2 ms one.
#[test]
fn a_stamp_staler_than_the_latest_send_does_not_lower_min_rtt() {
    let mut d = Driver::new(SokuCcConfig::default());
    d.now -= Duration::from_secs(10);
    for _ in 0..3 {
        d.round(10, 0, false);
    }
    let min =
        ack_first_of_two_with_stamp(&mut d, Duration::from_millis(1), Duration::from_millis(2));
    assert!(min >= Duration::from_secs(9), "min RTT {min:?}: a stale stamp became a sample");
}

/// quinn stamps acks with the start of its receive loop; a descheduled endpoint task
/// hands over a `now` older than packets already sent. Such a sample must not become
/// the min RTT (it did: 0.19 ms on a 10 ms emulated path).
#[test]
fn stale_ack_timestamps_do_not_lower_min_rtt() {
    let mut d = driver_with_min_rtt();
    // A packet sent at t, one more at t + 99 ms; the ack for the first is stamped
    // t + 1 ms although it is processed after the second send.
    let min =
        ack_first_of_two_with_stamp(&mut d, Duration::from_millis(99), Duration::from_millis(1));
    assert!(min >= Duration::from_millis(99), "min RTT {min:?} from a stale stamp");
}

/// The stamp can even predate the acked packet's own send (it gave a 0 ms min RTT on
/// a 10 ms emulated path with loss both ways).
#[test]
fn an_ack_stamped_before_its_packet_was_sent_gives_no_rtt_sample() {
    let mut d = driver_with_min_rtt();
    // The latest packet sent is acked with a stamp 1 ms older than its own send.
    let t = d.now;
    d.cc.on_sent(t, MTU, d.pn);
    d.cc.on_ack(t - Duration::from_millis(1), t, MTU, false, &d.est);
    d.cc.on_end_acks(t - Duration::from_millis(1), 0, false, Some(d.pn));
    assert_eq!(d.soku().min_rtt(), Some(RTT), "a stamp older than the send became a sample");
}

/// A driver whose controller shares its min RTT on `board`.
fn driver_on_board(board: &Arc<MemoryBoard>) -> Driver {
    let shared: Arc<dyn PathBoard> = board.clone();
    Driver::new(SokuCcConfig { board: BoardSlot::with(shared), ..SokuCcConfig::default() })
}

#[test]
fn a_flow_takes_a_smaller_fresh_min_rtt_from_its_path_board_and_publishes_its_own_otherwise() {
    // Another copy on this path saw 80 ms a moment ago: ours (100 ms, with that copy's
    // queue in it) gives way to it, stamp and all.
    let board = Arc::new(MemoryBoard::new());
    let mut d = driver_on_board(&board);
    let theirs =
        MinRttRecord { rtt: Duration::from_millis(80), at: d.now, alive: d.now, writer: 1 };
    board.write(theirs);
    d.round(10, 0, false);
    assert_eq!(d.soku().min_rtt(), Some(Duration::from_millis(80)));
    let kept = board.read().expect("a record");
    assert_eq!((kept.rtt, kept.at), (theirs.rtt, theirs.at), "the smaller record stays");
    assert!(kept.alive > theirs.alive, "and this flow vouched for it");

    // A record older than the min-RTT window says nothing about the path now: ours goes up.
    let board = Arc::new(MemoryBoard::new());
    let mut d = driver_on_board(&board);
    let stale = d.now.checked_sub(Duration::from_secs(11)).expect("a clock 11 s in");
    board.write(MinRttRecord {
        rtt: Duration::from_millis(80),
        at: stale,
        alive: d.now,
        writer: 1,
    });
    d.round(10, 0, false);
    assert_eq!(d.soku().min_rtt(), Some(RTT));
    assert_eq!(board.read().map(|r| r.rtt), Some(RTT));

    // Without a board, nothing is shared.
    let mut d = Driver::new(SokuCcConfig::default());
    d.round(10, 0, false);
    assert_eq!(d.soku().min_rtt(), Some(RTT));
}

/// Flows sending on one path hold their windows near the others' mean share while a
/// queue stands (`soku_cc::ensemble`), and only then.
#[test]
fn a_flow_in_a_queue_keeps_its_window_near_the_other_flows_share() {
    let board = Arc::new(MemoryBoard::new());
    let mut d = driver_on_board(&board);
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    assert_eq!(d.soku().mode(), Mode::ProbeBw);
    let theirs = 200_000;
    let other = |at: Instant| ShareRecord { writer: 1, in_flight: theirs, alive: at };
    let held = theirs + theirs / 20 + 2 * MTU;
    // No queue: another flow's smaller share holds nobody back.
    for _ in 0..3 {
        board.write_share(other(d.now));
        d.round(500, 0, false);
    }
    assert!(d.cc.window() > 2 * held, "held without a queue: {}", d.cc.window());
    // A queue (acks after 150 ms on a 100 ms path): held to the other's share + 5 % + 2
    // packets, giving up at most an eighth of what was in flight a round.
    let queued = RTT * 3 / 2;
    for _ in 0..20 {
        board.write_share(other(d.now));
        // What the round keeps in flight (`Driver::round_taking`).
        let sent = (d.cc.window() / MTU).min(500) * MTU;
        d.round_taking(queued, 500, 0, false);
        let window = d.cc.window();
        assert!(window >= sent - sent / 8, "{sent} in flight, then a window of {window}");
        if window == held {
            break;
        }
    }
    assert_eq!(d.cc.window(), held);
    let ours = board.shares().into_iter().find(|s| s.writer != 1).expect("our share");
    assert!(ours.in_flight >= held, "our share {} is what we had in flight", ours.in_flight);
    // Gone quiet (no write for 0.3 s): not held.
    for _ in 0..3 {
        d.round_taking(queued, 500, 0, false);
    }
    assert!(d.cc.window() > 2 * held, "held by a quiet flow: {}", d.cc.window());
    // App-limited: this flow withdraws its share and is not held.
    for _ in 0..3 {
        board.write_share(other(d.now));
        d.round_taking(queued, 500, 0, true);
    }
    let ours = board.shares().into_iter().find(|s| s.writer != 1).expect("our share");
    assert_eq!(ours.in_flight, 0, "an app-limited flow shows no share");
    assert!(d.cc.window() > 2 * held, "app-limited and held: {}", d.cc.window());
}

/// A blackout's end: the first ack after it declares the whole window lost at once, as
/// persistent congestion (RFC 9002 §7.6). Those losses are answered by the collapse;
/// counted again in the first round after it, they ended the restart's startup at the
/// minimum window with an inflight bound there (a copy then took seconds, not round
/// trips, to come back to the link's rate after a 10 s blackout on 100 Mbit/s x 50 ms).
#[test]
fn a_blackouts_losses_do_not_end_the_restart_after_it() {
    let mut d = Driver::new(SokuCcConfig::default());
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    let window = d.cc.window();
    assert!(window >= 500 * MTU);
    d.cc.on_congestion_event(d.now, d.now, true, window);
    assert_eq!(d.cc.window(), 4 * MTU);
    // The restart doubles from the minimum window and is back at the link's within a
    // few rounds, as a fresh start would be.
    let mut windows = Vec::new();
    for _ in 0..5 {
        d.round(500, 0, false);
        windows.push(d.cc.window() / MTU);
    }
    assert_eq!(d.soku().inflight_bound(), None, "no bound from the blackout's losses");
    assert!(windows[4] >= 500, "the link's window again in 5 rounds: {windows:?} packets");
}

/// A background flow cruising at 500 packets per 100 ms round, then rounds of `lost`
/// packets lost in 500 whose acks take `took`; the inflight bound it ends with.
fn background_after_rounds(took: Duration, lost: u64) -> Option<u64> {
    let mut d = Driver::new(SokuCcConfig::background());
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    assert_eq!(d.soku().inflight_bound(), None);
    for _ in 0..3 {
        d.round_taking(took, 480, lost, false);
    }
    d.soku().inflight_bound()
}

/// Loss with a fifth of the RTT queued is a queue overflowing: a background flow that
/// started inside another flow's queue sees no more of a full one than that. Random
/// loss with no queue, or a queue without loss below a quarter, is not congestion.
#[test]
fn background_takes_moderate_loss_with_a_small_queue_for_congestion() {
    let queued = RTT + RTT / 5;
    assert!(background_after_rounds(queued, 20).is_some(), "4 % loss, 20 % queue");
    assert_eq!(background_after_rounds(RTT, 20), None, "4 % loss, no queue");
    assert_eq!(background_after_rounds(queued, 0), None, "20 % queue, no loss");
    // A normal flow holds its rate through the same rounds.
    let mut d = Driver::new(SokuCcConfig::default());
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    for _ in 0..3 {
        d.round_taking(queued, 480, 20, false);
    }
    assert_eq!(d.soku().inflight_bound(), None);
}

/// A background flow that yielded to a standing queue keeps yielding after its
/// probe-RTTs, measured inside that queue, have raised the model's min RTT to it: it
/// measures queues against the smallest RTT of ten minutes (`soku_cc::base_delay`).
#[test]
fn background_keeps_yielding_after_probe_rtts_raise_its_min_rtt() {
    let mut d = Driver::new(SokuCcConfig::background());
    for _ in 0..40 {
        d.round(500, 0, false);
    }
    // Someone else's queue: 30 ms on every round from now on, for a minute.
    let queued = RTT + Duration::from_millis(30);
    for _ in 0..460 {
        d.round_taking(queued, 500, 0, false);
    }
    let s = d.soku();
    assert_eq!(s.min_rtt(), Some(queued), "the probe-RTTs did not raise the model's min RTT");
    assert!(d.cc.window() < 50 * MTU, "window {} after the raise", d.cc.window());
}

/// Time from the end of startup to the first probe-RTT. Startup's rounds take
/// `startup_rtt`; after it, each round takes `rtt_at(time since startup)` plus 20 ms
/// (the flow's own queue, more than the eighth of the min RTT a sample must come
/// within to stand for a probe), except the first round at each new value, which takes
/// it exactly: a new minimum, which restarts the min RTT's expiry.
fn first_probe_after_startup(
    startup_rtt: Duration,
    rtt_at: impl Fn(Duration) -> Duration,
) -> Duration {
    let mut d = Driver::new(SokuCcConfig::default());
    for _ in 0..50 {
        if d.soku().mode() == Mode::ProbeBw {
            break;
        }
        d.round_taking(startup_rtt, 500, 0, false);
    }
    assert_eq!(d.soku().mode(), Mode::ProbeBw, "startup did not end in 50 rounds");
    let startup_end = d.now;
    let mut last = None;
    while d.now - startup_end < Duration::from_secs(30) {
        let rtt = rtt_at(d.now - startup_end);
        let took = if last == Some(rtt) { rtt + Duration::from_millis(20) } else { rtt };
        last = Some(rtt);
        d.round_taking(took, 500, 0, false);
        if d.soku().mode() == Mode::ProbeRtt {
            return d.now - startup_end;
        }
    }
    panic!("no probe-RTT in the 30 s after startup");
}

/// A flow that started inside someone else's 40 ms queue sees its min RTT fall in
/// steps as that queue drains (every 2.5 s: 30, 20, then 10 ms of queue), and each
/// step restarts the min RTT's expiry. Its first probe-RTT still comes 10 s after
/// startup, not 10 s after the last step (17.5 s): its own window, sized for the
/// longer path, holds most of the queue by then, and the probe drains it.
#[test]
fn a_flow_whose_min_rtt_falls_after_startup_probes_ten_seconds_after_it() {
    let queued = |ms| RTT + Duration::from_millis(ms);
    let at = first_probe_after_startup(queued(40), |since| match since.as_millis() {
        0..2500 => queued(40),
        2500..5000 => queued(30),
        5000..7500 => queued(20),
        _ => queued(10),
    });
    assert!(at >= Duration::from_secs(10) && at < Duration::from_millis(10_500), "{at:?}");
}

/// A lone flow's minimum comes from startup. A later sample at that minimum restarts
/// the expiry (5 s after startup here), and the first probe-RTT comes 10 s after it.
#[test]
fn a_lone_flows_first_probe_rtt_follows_its_min_rtt_expiry() {
    let at = first_probe_after_startup(RTT, |since| {
        if since.as_millis() < 5000 {
            RTT + Duration::from_millis(20)
        } else {
            RTT
        }
    });
    assert!(at >= Duration::from_secs(15) && at < Duration::from_millis(15_500), "{at:?}");
}

/// A startup still growing is not cut by probe-RTT, however old its min RTT. The
/// path's 100 ms are seen in the first rounds only, then every round takes 120 ms (a
/// lower tail not seen again, as with jittery acks, and above the eighth of the min RTT
/// that would confirm it without a probe), and the path's rate grows by 27 %
/// a round, so startup needs more rounds than the min-RTT window (1 s here, so forty
/// round trips, 4 s) lasts. Without the rule the probe came 41 rounds into startup
/// and the flow went back to startup after it. The probe comes once startup has ended.
#[test]
fn a_growing_startup_is_not_cut_by_probe_rtt() {
    let second = Duration::from_secs(1);
    let config = SokuCcConfig {
        min_rtt_window: second,
        first_min_rtt_window: second,
        ..SokuCcConfig::default()
    };
    let mut d = Driver::new(config);
    let mut cap = 10.0_f64;
    for _ in 0..2 {
        d.round(cap as u64, 0, false);
        cap *= 1.27;
    }
    assert_eq!(d.soku().min_rtt(), Some(RTT));
    let mut modes = Vec::new();
    for _ in 0..60 {
        d.round_taking(RTT + Duration::from_millis(20), cap as u64, 0, false);
        modes.push(d.soku().mode());
        if modes.len() <= 45 {
            cap *= 1.27;
        }
    }
    // Startup ends and the probe begins in one batch of acks, as its min RTT expired
    // long before; a probe taken in startup would return to startup.
    let probe = modes.iter().position(|m| *m == Mode::ProbeRtt).expect("no probe-RTT");
    assert!(probe * 120 > 4_000, "startup too short for the test: {modes:?}");
    let after = modes[probe..].iter().find(|m| **m != Mode::ProbeRtt);
    assert_eq!(after, Some(&Mode::ProbeBw), "probe-RTT in startup: {modes:?}");
}

/// Time a flow that cruised for 30 rounds at `rtt` takes to adopt `longer` as its min
/// RTT once every round takes that long (at most 60 s).
fn time_to_take_a_longer_rtt(rtt: Duration, longer: Duration) -> Duration {
    let mut d = Driver::new(SokuCcConfig::default());
    for _ in 0..30 {
        d.round_taking(rtt, 500, 0, false);
    }
    assert_eq!(d.soku().mode(), Mode::ProbeBw);
    assert_eq!(d.soku().min_rtt(), Some(rtt));
    let from = d.now;
    while d.soku().min_rtt() != Some(longer) {
        assert!(d.now - from < Duration::from_secs(60), "not taken in 60 s");
        d.round_taking(longer, 500, 0, false);
    }
    d.now - from
}

/// On a 1 s path a longer RTT is still taken up, by the first probe-RTT: the min RTT
/// of 1 s, last seen as startup ended, expires forty round trips later, and the probe
/// then sees the path's 1.2 s (`min_rtt_raise_probes` 1): 42 s after the change here,
/// against 12 s on the ten-second window alone.
#[test]
fn on_a_1s_path_a_longer_rtt_is_taken_after_forty_round_trips() {
    let second = Duration::from_secs(1);
    let took = time_to_take_a_longer_rtt(second, Duration::from_millis(1200));
    println!("1 s path, RTT up to 1.2 s: taken after {took:?}");
    assert!(took > Duration::from_secs(30) && took < Duration::from_secs(45), "{took:?}");
}

/// A lone flow whose RTT samples keep coming within an eighth of its min RTT (its
/// queue drained now and then, acks a little late) shows with them that the min RTT
/// still holds, and does not probe for it: not in 30 s of rounds at 110 ms on a 100 ms
/// path. At 115 ms, above that eighth, it probes on its ten-second window.
#[test]
fn samples_near_the_min_rtt_stand_for_probe_rtt() {
    let probes_within = |took: Duration| {
        let mut d = Driver::new(SokuCcConfig::default());
        for _ in 0..30 {
            d.round(500, 0, false);
        }
        assert_eq!(d.soku().mode(), Mode::ProbeBw);
        let from = d.now;
        while d.now - from < Duration::from_secs(30) {
            d.round_taking(took, 500, 0, false);
            if d.soku().mode() == Mode::ProbeRtt {
                return Some(d.now - from);
            }
        }
        None
    };
    assert_eq!(probes_within(Duration::from_millis(110)), None);
    let at = probes_within(Duration::from_millis(115)).expect("no probe-RTT at 115 ms");
    assert!(at >= Duration::from_secs(7) && at <= Duration::from_millis(10_500), "{at:?}");
}

/// On a 100 ms path whose RTT grows to 130 ms (beyond the eighth that would confirm the
/// old minimum), the first probe-RTT takes the longer RTT within the ten-second window.
#[test]
fn on_a_100ms_path_a_longer_rtt_is_taken_within_ten_seconds() {
    let took = time_to_take_a_longer_rtt(RTT, Duration::from_millis(130));
    assert!(took <= Duration::from_millis(11_000), "{took:?}");
}

/// The application opens the live controller's window through a clone (what
/// `quinn::Connection::congestion_state` hands out), so that its CONNECTION_CLOSE is not
/// held behind a full window (`SokuCc::open_for_close`).
#[test]
fn a_clone_opens_the_live_window_for_the_close() {
    let mut d = Driver::new(SokuCcConfig::default());
    d.round(10, 0, false);
    let before = d.cc.window();
    assert!(before < u64::from(u32::MAX), "an ordinary window: {before}");
    let clone = d.cc.clone_box().into_any().downcast::<SokuCc>().expect("soku-cc");
    clone.open_for_close();
    assert_eq!(d.cc.window(), u64::MAX, "open wide: quinn's pacer stands aside too");
    let fresh = Driver::new(SokuCcConfig::default());
    assert!(fresh.cc.window() < u64::from(u32::MAX), "another connection's stays as it was");
}
