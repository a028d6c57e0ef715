//! Random loss against congestion on simulated paths (see `sim/mod.rs`): the rate under
//! heavy random loss, and the cases where loss is congestion after all (a loss-based flow
//! in a shallow buffer, a policer, another soku flow), and a background flow that must
//! yield while others send and take the link back when they leave. Run with
//! `--nocapture` to see the numbers.

mod sim;

use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn_proto::congestion::{Controller, ControllerFactory, CubicConfig};
use sim::{Path, Policer};
use soku_cc::{
    BoardSlot, ConnectionHint, HintSlot, MemoryBoard, Mode, PathBoard, RememberedPath, SokuCc,
    SokuCcConfig,
};

const MBIT: u64 = 1_000_000;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn soku(config: SokuCcConfig, p: &Path) -> Box<dyn Controller> {
    Arc::new(config).build(Instant::now(), p.pkt as u16)
}

fn cubic(p: &Path) -> Box<dyn Controller> {
    Arc::new(CubicConfig::default()).build(Instant::now(), p.pkt as u16)
}

/// Jain's fairness index of `shares`: 1 when all are equal, 1/n when one has it all.
fn jain(shares: &[f64]) -> f64 {
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|x| x * x).sum();
    sum * sum / (shares.len() as f64 * squares)
}

/// The random-loss rates of the sweep.
const SWEEP: [f64; 8] = [0.0, 0.01, 0.03, 0.05, 0.07, 0.10, 0.15, 0.20];

/// One soku flow on 100 Mbit/s x 100 ms (one-BDP drop-tail buffer) with random `loss`:
/// its goodput as a share of the link over seconds 5-30, the mean of three seeds.
fn sweep_point(loss: f64) -> f64 {
    let p = Path::one_bdp(100 * MBIT, 100, loss);
    let seeds = [3u64, 5, 7];
    let utils: Vec<f64> = seeds
        .iter()
        .map(|&seed| {
            let cfg = SokuCcConfig { seed: seed * 7919 + 1, ..SokuCcConfig::default() };
            sim::run(p, vec![(soku(cfg, &p), Duration::ZERO)], secs(30), secs(5), seed).total_util()
        })
        .collect();
    let mean = utils.iter().sum::<f64>() / utils.len() as f64;
    println!(
        "100M 100ms {:4.1} % random loss: soku {:5.1} % of the link (seeds {:?})",
        100.0 * loss,
        100.0 * mean,
        utils.iter().map(|u| (1000.0 * u).round() / 10.0).collect::<Vec<_>>()
    );
    mean
}

/// Random loss up to 10 % costs no more than the lost packets themselves, and beyond it
/// the rate slopes down instead of falling off a cliff: at least 85 % of the link up to
/// 10 % loss, 60 % at 20 %, and no step down of more than 15 points between neighbouring
/// loss rates. A fixed 10 % loss share per round as the mark of congestion cut the
/// bound on data in flight in half of the rounds at 10 % random loss.
#[test]
fn random_loss_sweep_has_no_cliff() {
    let utils: Vec<f64> = SWEEP.iter().map(|&loss| sweep_point(loss)).collect();
    let mut failed = Vec::new();
    for (i, (&loss, &util)) in SWEEP.iter().zip(&utils).enumerate() {
        let wanted = if loss <= 0.10 + 1e-9 {
            0.85
        } else if loss >= 0.20 - 1e-9 {
            0.60
        } else {
            0.0
        };
        if util < wanted {
            failed.push(format!("{:.0} %: {:.1} % of the link", 100.0 * loss, 100.0 * util));
        }
        if i > 0 && utils[i - 1] - util > 0.15 {
            failed.push(format!(
                "{:.0} % -> {:.0} %: a step down of {:.1} points",
                100.0 * SWEEP[i - 1],
                100.0 * loss,
                100.0 * (utils[i - 1] - util)
            ));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// soku and one CUBIC flow (started first) on 100 Mbit/s x `rtt_ms` with a drop-tail
/// buffer of `buffer_bdp` bandwidth-delay products and no random loss, seconds 20-60;
/// returns (soku, CUBIC) as shares of the link.
fn beside_cubic(config: SokuCcConfig, rtt_ms: u64, buffer_bdp: f64, seed: u64) -> (f64, f64) {
    let mut p = Path::one_bdp(100 * MBIT, rtt_ms, 0.0);
    p.queue_bytes = (p.queue_bytes as f64 * buffer_bdp) as u64;
    let background = config.background;
    let flows = vec![(cubic(&p), Duration::ZERO), (soku(config, &p), secs(2))];
    let r = sim::run(p, flows, secs(60), secs(20), seed);
    let (c, s) = (r.flows[0].util, r.flows[1].util);
    println!(
        "CUBIC + soku{} 100M {rtt_ms}ms, {buffer_bdp} BDP buffer, s 20-60, seed {seed}: \
         soku {:5.1} %  CUBIC {:5.1} %  soku's loss {:4.2} %  CUBIC's loss {:4.2} %",
        if background { " (background)" } else { "" },
        100.0 * s,
        100.0 * c,
        100.0 * r.flows[1].loss_share(),
        100.0 * r.flows[0].loss_share(),
    );
    (s, c)
}

/// Against one CUBIC flow in a shallow buffer (a quarter of the bandwidth-delay product,
/// no random loss) the loss soku sees is the buffer overflowing, with little queue to
/// show for it: soku must take neither the whole link nor nothing, 30-70 % of what the
/// two carry. It once took 96-97 % (the ~3.5 % it lost stayed under every threshold);
/// that loss comes only at the top of the RTT range (`soku_cc::queue_loss`).
#[test]
fn beside_cubic_in_a_quarter_bdp_buffer_soku_takes_30_to_70_pct() {
    let mut failed = Vec::new();
    for rtt in [50, 100] {
        for seed in [1u64, 2] {
            let (s, c) =
                beside_cubic(SokuCcConfig { seed, ..SokuCcConfig::default() }, rtt, 0.25, seed);
            let share = s / (s + c);
            if !(0.30..=0.70).contains(&share) {
                failed.push(format!("{rtt} ms seed {seed}: soku {s:.3} CUBIC {c:.3}"));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// Which of the two flows sharing a bottleneck starts first; the other follows 2 s
/// later.
#[derive(Debug, Clone, Copy)]
enum First {
    Cubic,
    Soku,
}

/// Linux's CUBIC and soku, one 2 s after the other, at 100 Mbit/s with a drop-tail
/// buffer of a quarter of the bandwidth-delay product: the path, the two flows, and
/// which of them is soku's.
fn kernel_cubic_and_soku(first: First, rtt: u64, seed: u64) -> (Path, sim::Flows, usize) {
    let mut p = Path::one_bdp(100 * MBIT, rtt, 0.0);
    p.queue_bytes /= 4;
    p.ack_every = 10;
    let config = SokuCcConfig { seed, ack_every_packets: 10, ..SokuCcConfig::default() };
    let (cubic, soku) = (cubic(&p), soku(config, &p));
    let (flows, soku_index) = match first {
        First::Cubic => (vec![(cubic, Duration::ZERO), (soku, secs(2))], 1),
        First::Soku => (vec![(soku, Duration::ZERO), (cubic, secs(2))], 0),
    };
    // A bit per flow index: the CUBIC flow is the kernel's.
    p.kernel_tcp = 1 << (1 - soku_index);
    (p, flows, soku_index)
}

/// soku's shares of what it and Linux's CUBIC carried (`kernel_cubic_and_soku`) at 50
/// and 100 ms over seeds 1-8, seconds 20-60, on paths that `disturb` may change; the
/// RTTs whose mean share is outside 30-70 % or whose seeds leave soku under a quarter
/// or over three quarters.
fn kernel_cubic_shares_off_aim(first: First, label: &str, disturb: fn(&mut Path)) -> Vec<String> {
    let mut failed = Vec::new();
    for rtt in [50, 100] {
        let mut shares = Vec::new();
        for seed in 1u64..=8 {
            let (mut p, flows, soku_index) = kernel_cubic_and_soku(first, rtt, seed);
            disturb(&mut p);
            let r = sim::run(p, flows, secs(60), secs(20), seed);
            let (s, c) = (r.flows[soku_index].util, r.flows[1 - soku_index].util);
            shares.push(s / (s + c));
        }
        let mean = shares.iter().sum::<f64>() / shares.len() as f64;
        let order = match first {
            First::Cubic => "kernel CUBIC + soku",
            First::Soku => "soku + kernel CUBIC",
        };
        println!(
            "{order} (ack 10){label} 100M {rtt}ms, 0.25 BDP buffer, s 20-60, \
             seeds 1-8: soku's share {:?}, mean {:.3}",
            shares.iter().map(|x| (x * 1000.0).round() / 1000.0).collect::<Vec<_>>(),
            mean
        );
        if !(0.30..=0.70).contains(&mean) || shares.iter().any(|x| !(0.25..=0.75).contains(x)) {
            failed.push(format!("{rtt} ms: {shares:?}"));
        }
    }
    failed
}

/// The same beside Linux's CUBIC as it sends without the `fq` qdisc (no pacer, acked
/// every second packet: `Path::kernel_tcp`), with soku's receiver acking every tenth
/// packet as soku-transport asks of it. At 50 ms soku's share falls in one of two
/// modes by seed (about 30 % or 42-48 %), so the mean over eight seeds is held to
/// 30-70 %, and no seed may leave soku under a quarter or over three quarters.
#[test]
fn beside_kernel_cubic_in_a_quarter_bdp_buffer_soku_takes_30_to_70_pct() {
    let failed = kernel_cubic_shares_off_aim(First::Cubic, "", |_| {});
    assert!(failed.is_empty(), "{failed:?}");
}

/// The other order: Linux's CUBIC joins 2 s after soku began, as a TCP flow arriving
/// while soku copies (the bench's `soku-cubic` case, whose CUBIC flow starts 2 s after
/// soku's data did). soku's startup is over by then, so CUBIC's own slow start meets
/// soku's window held at the path's BDP and a little queue.
#[test]
fn beside_kernel_cubic_that_joins_soku_in_a_quarter_bdp_buffer_soku_takes_30_to_70_pct() {
    let failed = kernel_cubic_shares_off_aim(First::Soku, "", |_| {});
    assert!(failed.is_empty(), "{failed:?}");
}

/// The same, with an ack path that stalls about once a second for up to 25 ms, as the
/// emulator's does on a busy two-core machine (there, 33 stalls in 45 s beside CUBIC
/// at 50 ms, frames up to 41 ms above the min RTT against a queue of 12.5 ms): the
/// top of the RTT range must stay the full queue's, not a stall's.
#[test]
fn beside_kernel_cubic_with_ack_stalls_soku_takes_30_to_70_pct() {
    let failed = kernel_cubic_shares_off_aim(First::Cubic, ", ack stalls", |p| {
        p.ack_stalls = Some((Duration::from_millis(1300), Duration::from_millis(25)));
    });
    assert!(failed.is_empty(), "{failed:?}");
}

/// soku alone behind a policer at half the link rate (a token bucket with a 64 kB
/// burst, no queue, so the RTT stays at its floor while it drops), seconds 10-40:
/// (share of the link, share of the packets sent that the policer dropped).
fn under_a_half_rate_policer(rtt_ms: u64, loss: f64) -> (f64, f64) {
    let mut p = Path::one_bdp(100 * MBIT, rtt_ms, loss);
    p.policer = Some(Policer { rate_bps: 50 * MBIT, burst_bytes: 64_000 });
    let r = sim::run(
        p,
        vec![(soku(SokuCcConfig::default(), &p), Duration::ZERO)],
        secs(40),
        secs(10),
        3,
    );
    let f = &r.flows[0];
    let policed = f.dropped_policer as f64 / f.sent.max(1) as f64;
    println!(
        "soku 100M {rtt_ms}ms {:.0}% random loss, policer at 50M, s 10-40: {:5.1} % of the link, \
         loss {:4.2} % (policer {:4.2} %)",
        100.0 * loss,
        100.0 * f.util,
        100.0 * f.loss_share(),
        100.0 * policed
    );
    (f.util, policed)
}

const HALF_RATE_POLICER_PATHS: [(u64, f64); 3] = [(50, 0.0), (100, 0.0), (50, 0.01)];

/// Behind a policer at half the link rate the loss comes with no delay signal, yet it
/// rises with the rate sent above the policed rate (`soku_cc::rate_loss`): soku must
/// not take it for random loss, and loses at most 5 % of what it sends to the policer.
/// It lost 3.1 % at 50 ms and 6.7 % at 100 ms while only a round losing 10 % was
/// congested.
#[test]
fn under_a_policer_at_half_rate_soku_loses_at_most_5_pct() {
    let mut failed = Vec::new();
    for (rtt, loss) in HALF_RATE_POLICER_PATHS {
        let (_, policed) = under_a_half_rate_policer(rtt, loss);
        if policed > 0.05 {
            failed.push(format!("{rtt} ms {loss}: the policer dropped {:.2} %", 100.0 * policed));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// ...and still gets at least 90 % of the policed rate through.
#[test]
#[ignore = "open: 44.7 % of the link at 50 ms, 42.1 % at 100 ms: the rate held is the one \
            delivered in the rounds that lost, 40-41 Mbit/s at 100 ms"]
fn under_a_policer_at_half_rate_soku_gets_90_pct_of_its_rate() {
    let mut failed = Vec::new();
    for (rtt, loss) in HALF_RATE_POLICER_PATHS {
        let (util, _) = under_a_half_rate_policer(rtt, loss);
        if util < 0.45 * (1.0 - loss) {
            failed.push(format!("{rtt} ms {loss}: {:.1} % of the link", 100.0 * util));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// Two soku flows (the second started 2 s later, no shared board: two hosts) on
/// 100 Mbit/s x 100 ms with 10 % random loss: taking the random loss for the path's
/// must not leave one flow with the link; Jain's index at least 0.95 over seconds 20-60.
#[test]
fn two_flows_at_10pct_random_loss_share_fairly() {
    let p = Path::one_bdp(100 * MBIT, 100, 0.10);
    let mut failed = Vec::new();
    for seed in [11u64, 22] {
        let flows = vec![
            (soku(SokuCcConfig { seed, ..SokuCcConfig::default() }, &p), Duration::ZERO),
            (soku(SokuCcConfig { seed: seed + 1, ..SokuCcConfig::default() }, &p), secs(2)),
        ];
        let r = sim::run(p, flows, secs(60), secs(20), seed);
        let u: Vec<f64> = r.flows.iter().map(|f| f.util).collect();
        let j = jain(&u);
        println!(
            "soku x2 100M 100ms 10% random loss, s 20-60, seed {seed}: {:5.1} % + {:5.1} %  Jain {j:.3}",
            100.0 * u[0],
            100.0 * u[1]
        );
        if j < 0.95 || u[0] + u[1] < 0.75 {
            failed.push(format!("seed {seed}: {u:?} Jain {j}"));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// Two soku flows from one host (one path board, `soku_cc::shared`), the second started
/// 2 s later, in a drop-tail buffer of a quarter of the bandwidth-delay product at
/// 100 Mbit/s x 20, 100 and 300 ms: together they keep at least 90 % of the link over
/// seconds 20-60. The second flow starts into the queue the first one's startup
/// filled and leaves startup with a bound of a few dozen packets; the first flow, held
/// to the others' share (`soku_cc::ensemble`) at once, fell to that too, and at 300 ms
/// the two used 73-76 % of the link here (40-44 % on the emulator).
#[test]
fn two_flows_on_one_board_in_a_quarter_bdp_buffer_keep_the_link_full() {
    let mut failed = Vec::new();
    for rtt in [20, 100, 300] {
        for seed in [1u64, 2] {
            let mut p = Path::one_bdp(100 * MBIT, rtt, 0.0);
            p.queue_bytes /= 4;
            p.ack_every = 10;
            let board: Arc<dyn PathBoard> = Arc::new(MemoryBoard::new());
            let flow = |seed: u64| {
                let board = BoardSlot::with(board.clone());
                soku(
                    SokuCcConfig { seed, ack_every_packets: 10, board, ..SokuCcConfig::default() },
                    &p,
                )
            };
            let flows = vec![(flow(seed), Duration::ZERO), (flow(seed + 100), secs(2))];
            let r = sim::run(p, flows, secs(60), secs(20), seed);
            let u: Vec<f64> = r.flows.iter().map(|f| f.util).collect();
            println!(
                "soku x2 on one board 100M {rtt}ms, 0.25 BDP buffer, s 20-60, seed {seed}: \
                 {:5.1} % + {:5.1} %  Jain {:.3}",
                100.0 * u[0],
                100.0 * u[1],
                jain(&u)
            );
            if u[0] + u[1] < 0.90 {
                failed.push(format!("{rtt} ms seed {seed}: {u:?}"));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// Background mode beside CUBIC at 50 and 100 ms with a drop-tail buffer of
/// `buffer_bdp` bandwidth-delay products: CUBIC keeps at least 80 % of the link.
fn background_leaves_cubic_80_pct(buffer_bdp: f64) {
    let mut failed = Vec::new();
    for rtt in [50, 100] {
        let cfg = SokuCcConfig { seed: 5, ..SokuCcConfig::background() };
        let (_, c) = beside_cubic(cfg, rtt, buffer_bdp, 29);
        if c < 0.80 {
            failed.push(format!("{rtt} ms, {buffer_bdp} BDP: CUBIC {c:.3}"));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

#[test]
fn background_leaves_cubic_at_least_80_pct_in_a_one_bdp_buffer() {
    background_leaves_cubic_80_pct(1.0);
}

/// In a quarter-BDP buffer the queue never reaches the quarter of the baseline that the
/// background rule asks, and CUBIC kept 57.7 % (50 ms) and 71.2 % (100 ms); a background
/// flow now also yields to a queue above a tenth of its depth (`soku_cc::nice`).
#[test]
fn background_leaves_cubic_at_least_80_pct_in_a_quarter_bdp_buffer() {
    background_leaves_cubic_80_pct(0.25);
}

/// One CUBIC flow from 0 to 40 s and a background soku flow (`config`) from 2 s on
/// path `p`: CUBIC's and the background flow's shares of the link over seconds `from`
/// to `until`.
fn cubic_leaves_background(p: Path, config: SokuCcConfig, until: u64, from: u64) -> (f64, f64) {
    let flows =
        vec![(cubic(&p), Duration::ZERO, Some(secs(40))), (soku(config, &p), secs(2), None)];
    let r = sim::run_stopping(p, flows, secs(until), secs(from), 29, None);
    (r.flows[0].util, r.flows[1].util)
}

/// A background flow beside one CUBIC flow that sends from 0 to 40 s, on 100 Mbit/s x
/// 50 ms (one-BDP buffer): CUBIC keeps at least 80 % while it sends, and the background
/// flow has the link (at least 90 %) from three seconds after CUBIC left.
#[test]
fn background_takes_the_link_back_when_cubic_leaves() {
    let p = Path::one_bdp(100 * MBIT, 50, 0.0);
    let cfg = SokuCcConfig { seed: 5, ..SokuCcConfig::background() };
    let run = |until, from| cubic_leaves_background(p, cfg.clone(), until, from);
    let (c, bg) = run(40, 10);
    println!(
        "CUBIC (0-40 s) + background soku, 100M 50ms, s 10-40: CUBIC {:5.1} %  background {:5.1} %",
        100.0 * c,
        100.0 * bg
    );
    let (_, back) = run(48, 43);
    println!("  s 43-48, CUBIC gone: background {:5.1} %", 100.0 * back);
    assert!(c >= 0.80, "CUBIC kept {c}");
    assert!(back >= 0.90, "background took back {back}");
}

/// The same in a drop-tail buffer of a quarter of the bandwidth-delay product, at 50 and
/// 100 ms: CUBIC keeps at least 80 % over seconds 20-40 (past both flows' startup, as
/// `background_leaves_cubic_at_least_80_pct_in_a_quarter_bdp_buffer` measures), and the
/// background flow has at least 90 % of the link from three seconds after CUBIC left.
/// Nice's rule once halved the flow on the queue of its own regrowth, which it cannot
/// tell from CUBIC's, and its bound grew back along CUBIC's function from a few
/// packets: 26 % at 50 ms, 72 % at 100 ms (`soku_cc::nice`).
#[test]
fn background_takes_a_quarter_bdp_buffer_back_when_cubic_leaves() {
    let mut failed = Vec::new();
    for rtt in [50, 100] {
        let mut p = Path::one_bdp(100 * MBIT, rtt, 0.0);
        p.queue_bytes /= 4;
        let cfg = SokuCcConfig { seed: 5, ..SokuCcConfig::background() };
        let run = |until, from| cubic_leaves_background(p, cfg.clone(), until, from);
        let (c, bg) = run(40, 20);
        let (_, back) = run(48, 43);
        println!(
            "CUBIC (0-40 s) + background soku, 100M {rtt}ms, 0.25 BDP buffer, s 20-40: \
             CUBIC {:5.1} %  background {:5.1} %; s 43-48, CUBIC gone: background {:5.1} %",
            100.0 * c,
            100.0 * bg,
            100.0 * back
        );
        if c < 0.80 || back < 0.90 {
            failed.push(format!("{rtt} ms: CUBIC {c:.3}, background back at {back:.3}"));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// A background flow beside one CUBIC flow that sends from 0 to 40 s, with the peer
/// acknowledging every tenth packet as soku asks of it (`soku_transport`'s ACK
/// frequency), in a one-BDP buffer at 50 and 100 ms and a quarter-BDP one at 50 ms:
/// CUBIC keeps at least 80 % while it sends, and the background flow has at least 90 %
/// of the link over seconds 50-60. With rounds of fewer than ten packets judged by
/// their RTT, which the peer's 25 ms ack timer makes, the flow stayed at its minimum
/// window after CUBIC left: 0.6 % of the link at 50 ms in either buffer.
#[test]
fn background_takes_the_link_back_when_the_peer_acks_every_tenth_packet() {
    background_back_with_acks_every_tenth(&[(50, 1.0), (100, 1.0), (50, 0.25)]);
}

/// The same at 100 ms in a quarter-BDP buffer, with the peer acking every tenth packet.
/// The flow once came back slowly, 0.7 % of the link in the 3-8 s after CUBIC left and
/// 59.9 % over seconds 50-60: rounds of 10-16 packets were acknowledged in frames of
/// fewer, each on the peer's timer, and the fall of their smallest RTT when a full
/// frame came was taken for a queue that another flow's cut drained.
#[test]
fn background_takes_a_quarter_bdp_buffer_back_at_100_ms_when_the_peer_acks_every_tenth() {
    background_back_with_acks_every_tenth(&[(100, 0.25)]);
}

fn background_back_with_acks_every_tenth(paths: &[(u64, f64)]) {
    let mut failed = Vec::new();
    for &(rtt, buffer_bdp) in paths {
        let mut p = Path::one_bdp(100 * MBIT, rtt, 0.0);
        p.queue_bytes = (p.queue_bytes as f64 * buffer_bdp) as u64;
        p.ack_every = 10;
        let cfg = SokuCcConfig { seed: 5, ack_every_packets: 10, ..SokuCcConfig::background() };
        let run = |until, from| cubic_leaves_background(p, cfg.clone(), until, from);
        let (c, bg) = run(40, 20);
        let (_, back) = run(48, 43);
        let (_, later) = run(60, 50);
        println!(
            "CUBIC (0-40 s) + background soku, acks every 10, 100M {rtt}ms, {buffer_bdp} BDP \
             buffer, s 20-40: CUBIC {:5.1} %  background {:5.1} %; CUBIC gone, s 43-48: \
             {:5.1} %, s 50-60: {:5.1} %",
            100.0 * c,
            100.0 * bg,
            100.0 * back,
            100.0 * later
        );
        if c < 0.80 || later < 0.90 {
            failed.push(format!("{rtt} ms {buffer_bdp} BDP: CUBIC {c:.3}, background {later:.3}"));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// A background flow alone on 100 Mbit/s x 50 ms whose path memory says 20 ms (the
/// host moved to a slower network): the memory's min RTT, which the path never comes
/// near, must not count as a queue standing for good. The flow carries at least 85 %
/// of the link over seconds 3-13, as it does with no memory.
#[test]
fn background_drops_a_remembered_min_rtt_the_path_contradicts() {
    let p = Path::one_bdp(100 * MBIT, 50, 0.0);
    let mut failed = Vec::new();
    for remembered in [false, true] {
        let mut cfg = SokuCcConfig { seed: 5, ..SokuCcConfig::background() };
        if remembered {
            let path = RememberedPath { bandwidth_bps: 100 * MBIT, min_rtt: ms(20) };
            cfg.hint = HintSlot::with(ConnectionHint { remembered: Some(path), background: true });
        }
        let r = sim::run(p, vec![(soku(cfg, &p), Duration::ZERO)], secs(13), secs(3), 29);
        let u = r.total_util();
        println!(
            "background soku alone 100M 50ms{}, s 3-13: {:5.1} %",
            if remembered { ", memory says 20 ms" } else { "" },
            100.0 * u
        );
        if u < 0.85 {
            failed.push(format!("remembered {remembered}: {u:.3}"));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// A policer at a twentieth of the link (5 of 100 Mbit/s, a 64 kB burst), as an office
/// network's UDP limit: soku, fresh or resuming from a memory of the whole link, must
/// not send far beyond what gets through. At this rate a round is a few dozen packets,
/// and the window's fixed allowances (two sender bursts, ack aggregation) are two to
/// three times the bandwidth-delay product: every round, the draining one included,
/// sends above the policed rate, so the loss floor took the policer's drops for the
/// path's own and no rule cut the window (21-61 % lost). The policer detector
/// (`soku_cc::policer`) tells it by its flat delivery rate.
#[test]
fn under_a_policer_at_a_twentieth_of_the_link_soku_loses_at_most_10_pct() {
    let mut failed = Vec::new();
    for resumed in [false, true] {
        for rtt in [50u64, 100] {
            let mut p = Path::one_bdp(100 * MBIT, rtt, 0.0);
            p.policer = Some(Policer { rate_bps: 5 * MBIT, burst_bytes: 64_000 });
            let mut cfg = SokuCcConfig::default();
            if resumed {
                let path = RememberedPath { bandwidth_bps: 100 * MBIT, min_rtt: ms(rtt) };
                let hint = ConnectionHint { remembered: Some(path), background: false };
                cfg.hint = HintSlot::with(hint);
            }
            let r = sim::run(p, vec![(soku(cfg, &p), Duration::ZERO)], secs(30), secs(5), 3);
            let f = &r.flows[0];
            let floor = r.controllers[0]
                .clone_box()
                .into_any()
                .downcast::<soku_cc::SokuCc>()
                .ok()
                .and_then(|cc| cc.loss_floor());
            println!(
                "soku {} 100M {rtt}ms, policer at 5M, s 5-30: {:5.2} % of the link, loss \
                 {:5.2} %, loss floor {floor:?}",
                if resumed { "resumed" } else { "fresh" },
                100.0 * f.util,
                100.0 * f.loss_share(),
            );
            if f.loss_share() > 0.10 || f.util < 0.045 {
                failed.push(format!(
                    "{} {rtt} ms: loss {:.1} %, {:.2} % of the link",
                    if resumed { "resumed" } else { "fresh" },
                    100.0 * f.loss_share(),
                    100.0 * f.util
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// At 20 % random loss the flow once either held about 77 % of the link or collapsed to
/// 2-3 % for good, by seed (half of twelve at 50 ms): its window, cut before the loss
/// floor was known, left rounds under the 50 packets a floor sample needed, so the
/// floor was never learned. Every seed must now hold at least 60 %.
#[test]
fn twenty_pct_random_loss_holds_the_link_whatever_the_seed() {
    let mut failed = Vec::new();
    for rtt in [50u64, 100] {
        let p = Path::one_bdp(100 * MBIT, rtt, 0.20);
        let mut utils = Vec::new();
        for seed in 1u64..=12 {
            let cfg = SokuCcConfig { seed: seed * 7919 + 1, ..SokuCcConfig::default() };
            let r = sim::run(p, vec![(soku(cfg, &p), Duration::ZERO)], secs(30), secs(5), seed);
            utils.push((1000.0 * r.total_util()).round() / 10.0);
        }
        println!("100M {rtt}ms 20 % random loss, s 5-30, seeds 1-12: {utils:?} % of the link");
        if let Some(low) = utils.iter().copied().find(|&u| u < 60.0) {
            failed.push(format!("{rtt} ms: {low} % of the link ({utils:?})"));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// Random loss costs the lost packets and no more: at 10-20 % on 100 Mbit/s x 100 ms,
/// soku carries at least 99 % of what the lossy link delivers over seconds 5-30. The
/// windows were built on the delivery rate alone, so every cycle's draining round, at
/// one BDP of that rate, sent a round at the delivered share of the link: 97.4-98.4 %
/// of it (path simulator); the windows now count the packets lost on the way.
#[test]
fn random_loss_costs_only_the_lost_packets() {
    let mut failed = Vec::new();
    for loss in [0.10, 0.15, 0.20] {
        let p = Path::one_bdp(100 * MBIT, 100, loss);
        let cfg = SokuCcConfig { seed: 3 * 7919 + 1, ..SokuCcConfig::default() };
        let r = sim::run(p, vec![(soku(cfg, &p), Duration::ZERO)], secs(30), secs(5), 3);
        let of_lossy = r.total_util() / (1.0 - loss);
        println!(
            "100M 100ms {:.0} % random loss, s 5-30: {:5.1} % of what the lossy link delivers",
            100.0 * loss,
            100.0 * of_lossy
        );
        if of_lossy < 0.99 {
            failed.push(format!("{:.0} %: {:.1} %", 100.0 * loss, 100.0 * of_lossy));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// Startup on a long path ends near the link whatever the seed's random loss: with 10
/// and 20 % on 100 Mbit/s x 300 ms and x 1 s, no seed may leave startup with a loss
/// bound under a quarter of the bandwidth-delay product. Judged against the least loss
/// share of its few small rounds, a larger round read random loss as congestion, and
/// startup ended at 447-874 kB in 2 of 8 seeds at 10 % and 4 of 8 at 20 %; growing
/// from there along the bound took 40 s.
#[test]
fn startup_on_a_long_lossy_path_ends_near_the_link_whatever_the_seed() {
    let mut failed = Vec::new();
    for rtt in [300u64, 1000] {
        for loss in [0.10, 0.20] {
            let bdp = 100 * MBIT / 8 * rtt / 1000;
            for seed in 1u64..=8 {
                let mut ended = None;
                trace_lone_soku(rtt, loss, seed, 30, |_, cc| {
                    if ended.is_none() && cc.mode() != Mode::Startup {
                        ended = Some(cc.inflight_bound());
                    }
                });
                match ended {
                    Some(Some(bound)) if bound < bdp / 4 => failed.push(format!(
                        "{rtt} ms {:.0} % seed {seed}: a bound of {} kB",
                        100.0 * loss,
                        bound / 1000
                    )),
                    None => failed.push(format!(
                        "{rtt} ms {:.0} % seed {seed}: still in startup",
                        100.0 * loss
                    )),
                    _ => {}
                }
            }
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// Runs soku alone for `rounds` round trips of `rtt_ms` over a 100 Mbit/s one-BDP path
/// losing `loss` at random, showing `look` the controller every quarter round trip.
fn trace_lone_soku(
    rtt_ms: u64,
    loss: f64,
    seed: u64,
    rounds: u64,
    mut look: impl FnMut(Duration, &SokuCc),
) {
    let p = Path::one_bdp(100 * MBIT, rtt_ms, loss);
    let cfg = SokuCcConfig { seed: seed * 7919 + 1, ..SokuCcConfig::default() };
    let mut tracer = |t: Duration, f: &[(&dyn Controller, u64)]| {
        let cc = f[0].0.clone_box().into_any().downcast::<SokuCc>().expect("soku");
        look(t, &cc);
    };
    let step = Some((ms(rtt_ms / 4), &mut tracer as sim::Tracer<'_>));
    sim::run_traced(
        p,
        vec![(soku(cfg, &p), Duration::ZERO)],
        ms(rtt_ms * rounds),
        secs(0),
        seed,
        step,
    );
}

/// The loss floor startup leaves behind: its first rounds of 50-100 packets stray far
/// from the path's loss, and when their least share stood as the floor the first
/// cruising rounds read random loss as congestion and cut the loss bound under one BDP
/// (300 ms and 1 s with 10 % random loss: 5 of 32 seeds, to 0.64 BDP). Pooled into
/// samples of 200 packets, no seed's bound falls under one BDP in the 20 round trips
/// after startup.
#[test]
fn random_loss_cuts_no_bound_right_after_startup() {
    let mut cut = Vec::new();
    for rtt in [300u64, 1000] {
        let bdp = 100 * MBIT / 8 * rtt / 1000;
        for seed in 1u64..=16 {
            let (mut ended, mut lowest) = (None, u64::MAX);
            trace_lone_soku(rtt, 0.10, seed, 60, |t, cc| {
                if ended.is_none() && cc.mode() != Mode::Startup {
                    ended = Some(t);
                }
                if ended.is_some_and(|end| t < end + ms(rtt * 20)) {
                    lowest = lowest.min(cc.inflight_bound().unwrap_or(u64::MAX));
                }
            });
            if lowest < bdp {
                cut.push(format!("{rtt} ms seed {seed}: {} kB", lowest / 1000));
            }
        }
    }
    assert!(cut.is_empty(), "bounds under one BDP after startup: {cut:?}");
}

/// Startup on a long path with heavy random loss: the first rounds are too small to
/// tell 10-20 % random loss from congestion, and a rule that judged them ended startup
/// at a hundred packets (300 ms: 55-67 % of the link over the first 40 s; 1 s with
/// 20 %: 1.9 %). Over a copy's first 40 s soku must come within 15 points of what the
/// loss leaves at 300 ms, and hold 45 % at 1 s with 20 %, whose startup alone takes
/// about 17 s.
#[test]
fn startup_on_a_long_path_is_not_ended_by_heavy_random_loss() {
    let mut failed = Vec::new();
    for (rtt, loss, least) in
        [(300, 0.10, 0.75), (300, 0.15, 0.70), (300, 0.20, 0.65), (1000, 0.20, 0.45)]
    {
        let p = Path::one_bdp(100 * MBIT, rtt, loss);
        let r = sim::run(
            p,
            vec![(soku(SokuCcConfig::default(), &p), Duration::ZERO)],
            secs(40),
            secs(0),
            3,
        );
        let util = r.flows[0].util;
        println!(
            "soku 100M {rtt}ms {:.0}% random loss, s 0-40: {:5.1} % of the link",
            100.0 * loss,
            100.0 * util
        );
        if util < least {
            failed.push(format!("{rtt} ms {loss}: {:.1} %", 100.0 * util));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// A shared bottleneck is not a policer: beside kernel CUBIC in a quarter-BDP buffer,
/// the rounds after soku's startup lose a few percent at a flat delivery rate, and at
/// that rate lose under 5 %, as behind a policer; but their loss comes with a queue.
/// Before the policer detector asked for a queue-free path, every seed at 50 ms was
/// called policed at 80-85 Mbit/s 3 s after soku started (and on the emulator such
/// a copy left QUIC for TCP, whose four BBR connections then left CUBIC 4-8 % of the
/// link).
#[test]
fn beside_cubic_in_a_quarter_bdp_buffer_no_policer_is_found() {
    let mut found = Vec::new();
    for rtt in [50, 100] {
        for seed in 1u64..=8 {
            let (p, flows, _) = kernel_cubic_and_soku(First::Cubic, rtt, seed);
            let mut policed = None;
            let mut look = |t: Duration, flows: &[(&dyn Controller, u64)]| {
                let Ok(s) = flows[1].0.clone_box().into_any().downcast::<soku_cc::SokuCc>() else {
                    return;
                };
                if let (None, Some(bps)) = (policed, s.policed_bps()) {
                    policed = Some((t, bps));
                }
            };
            let step = Duration::from_millis(50);
            sim::run_traced(p, flows, secs(30), secs(2), seed, Some((step, &mut look)));
            if let Some((t, bps)) = policed {
                found.push(format!("{rtt} ms seed {seed}: {} Mbit/s at {t:?}", bps / 1_000_000));
            }
        }
    }
    assert!(found.is_empty(), "called policed: {found:?}");
}

/// A background flow beside Linux's CUBIC as the bench runs them on the emulator
/// (`soku-bench --sharing-cases cubic-background`): CUBIC without the `fq` qdisc (no
/// pacer, acked every second packet), soku's peer acking every tenth packet, a
/// quarter-BDP drop-tail buffer, the flow starting 2 s after CUBIC; CUBIC's share over
/// the bench's window (from 8 s plus 20 round trips, 30 s) and the flow's over the 3-8 s
/// after CUBIC left at 40 s, at 50 and 100 ms over seeds 1-8. The buffer drops CUBIC's
/// unpaced bursts, not the paced flow's packets, so the flow never cut for an overflow
/// and Nice's rule had no depth to measure by: CUBIC kept 69.7-81.6 % at 50 ms and
/// 85.5-85.6 % at 100 ms; now the top of the range seen lately gives the depth
/// (`soku_cc::nice`), and CUBIC keeps 92.2-94.2 %.
#[test]
fn background_beside_kernel_cubic_leaves_it_80_pct_and_comes_back() {
    let mut failed = Vec::new();
    for rtt in [50u64, 100] {
        let (mut kept, mut back) = (Vec::new(), Vec::new());
        for seed in 1u64..=8 {
            let mut p = Path::one_bdp(100 * MBIT, rtt, 0.0);
            p.queue_bytes /= 4;
            p.ack_every = 10;
            p.kernel_tcp = 1;
            let config = SokuCcConfig { seed, ack_every_packets: 10, ..SokuCcConfig::background() };
            let run = |until, from| {
                let flows = vec![
                    (cubic(&p), Duration::ZERO, Some(secs(40))),
                    (soku(config.clone(), &p), secs(2), None),
                ];
                sim::run_stopping(p, flows, secs(until), secs(from), seed, None)
            };
            let warm = 8 + rtt * 20 / 1000;
            kept.push(run(warm + 30, warm).flows[0].util);
            back.push(run(48, 43).flows[1].util);
        }
        let pct = |v: &[f64]| v.iter().map(|x| (x * 1000.0).round() / 10.0).collect::<Vec<_>>();
        println!(
            "kernel CUBIC (0-40 s) + background soku (ack 10), 100M {rtt}ms, 0.25 BDP buffer, \
             seeds 1-8: CUBIC {:?} % of the link; CUBIC gone, s 43-48: background {:?} %",
            pct(&kept),
            pct(&back)
        );
        if kept.iter().any(|&c| c < 0.80) || back.iter().any(|&b| b < 0.90) {
            failed.push(format!("{rtt} ms: CUBIC {:?}, back {:?}", pct(&kept), pct(&back)));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}
