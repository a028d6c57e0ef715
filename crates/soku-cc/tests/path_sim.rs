//! The controller on simulated paths (see `sim/mod.rs`): utilisation under random
//! loss, queueing delay, the rate cap, fairness, heavy congestion, and quinn's CUBIC on
//! the same path for comparison, and probe-RTT on long paths. Run with `--nocapture` to
//! see the numbers.

mod sim;

use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn_proto::congestion::{Controller, ControllerFactory, CubicConfig};
use sim::{Path, Report};
use soku_cc::{
    BoardSlot, ConnectionHint, HintSlot, MemoryBoard, Mode, PathBoard, RememberedPath, SokuCc,
    SokuCcConfig,
};

const MBIT: u64 = 1_000_000;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn path(rate_bps: u64, rtt_ms: u64, loss: f64) -> Path {
    Path::one_bdp(rate_bps, rtt_ms, loss)
}

fn soku(config: SokuCcConfig, p: &Path) -> Box<dyn Controller> {
    Arc::new(config).build(Instant::now(), p.pkt as u16)
}

fn cubic(p: &Path) -> Box<dyn Controller> {
    Arc::new(CubicConfig::default()).build(Instant::now(), p.pkt as u16)
}

fn one(name: &str, p: Path, cc: Box<dyn Controller>, dur: u64, from: u64) -> Report {
    let r = sim::run(p, vec![(cc, Duration::ZERO)], secs(dur), secs(from), 7);
    let f = &r.flows[0];
    println!(
        "{name:<44} util {:5.1} %  queue delay {:6.1} ms  queue drops {:5.2} %  random drops {}",
        100.0 * f.util,
        r.mean_queue_delay.as_secs_f64() * 1e3,
        100.0 * r.queue_drop_fraction,
        f.dropped_random,
    );
    if let Ok(s) = r.controllers[0].clone_box().into_any().downcast::<SokuCc>() {
        println!(
            "  end state: bw {:?} min_rtt {:?} inflight_hi {:?} ack aggregation {} B",
            s.bandwidth_bps(),
            s.min_rtt(),
            s.inflight_bound(),
            s.ack_aggregation()
        );
    }
    r
}

#[test]
fn a_100m_100ms_no_loss() {
    let p = path(100 * MBIT, 100, 0.0);
    let r = one("soku 100M 100ms 0%", p, soku(SokuCcConfig::default(), &p), 20, 5);
    assert!(r.total_util() >= 0.90, "util {}", r.total_util());
}

#[test]
fn b_100m_100ms_1pct_loss() {
    let p = path(100 * MBIT, 100, 0.01);
    let r = one("soku 100M 100ms 1%", p, soku(SokuCcConfig::default(), &p), 20, 5);
    assert!(r.total_util() >= 0.80, "util {}", r.total_util());
}

#[test]
fn c_100m_100ms_3pct_loss() {
    let p = path(100 * MBIT, 100, 0.03);
    let r = one("soku 100M 100ms 3%", p, soku(SokuCcConfig::default(), &p), 20, 5);
    assert!(r.total_util() >= 0.70, "util {}", r.total_util());
}

#[test]
fn c2_100m_100ms_5pct_loss() {
    let p = path(100 * MBIT, 100, 0.05);
    let r = one("soku 100M 100ms 5%", p, soku(SokuCcConfig::default(), &p), 20, 5);
    // Goodput cannot exceed 95 % here; ask for most of it.
    assert!(r.total_util() >= 0.60, "util {}", r.total_util());
}

#[test]
fn c3_100m_300ms_1pct_loss() {
    let p = path(100 * MBIT, 300, 0.01);
    let r = one("soku 100M 300ms 1%", p, soku(SokuCcConfig::default(), &p), 30, 10);
    assert!(r.total_util() >= 0.80, "util {}", r.total_util());
}

#[test]
fn c4_100m_10ms_1pct_loss() {
    let p = path(100 * MBIT, 10, 0.01);
    let r = one("soku 100M 10ms 1%", p, soku(SokuCcConfig::default(), &p), 20, 5);
    assert!(r.total_util() >= 0.80, "util {}", r.total_util());
}

/// 1 Gbit/s x 300 ms with 12 000-byte simulated packets (8x fewer events than 1500).
#[test]
fn d_1g_300ms_no_loss() {
    let mut p = path(1_000 * MBIT, 300, 0.0);
    p.pkt = 12_000;
    let r = one("soku 1G 300ms 0% (12 kB packets)", p, soku(SokuCcConfig::default(), &p), 20, 8);
    assert!(r.total_util() >= 0.85, "util {}", r.total_util());
}

#[test]
fn e_standing_queue_bounded() {
    let mut p = path(100 * MBIT, 100, 0.0);
    p.queue_bytes *= 4; // a deep buffer that would let a loss-based sender fill it
    let r = one("soku 100M 100ms 0%, 4xBDP buffer", p, soku(SokuCcConfig::default(), &p), 30, 10);
    assert!(r.total_util() >= 0.90, "util {}", r.total_util());
    assert!(
        r.mean_queue_delay < Duration::from_millis(100),
        "mean queueing delay {:?}",
        r.mean_queue_delay
    );
}

#[test]
fn f_rate_cap_holds() {
    let p = path(100 * MBIT, 100, 0.0);
    let cfg = SokuCcConfig::with_rate_cap(40 * MBIT);
    let r = one("soku 100M 100ms 0%, cap 40M", p, soku(cfg, &p), 20, 5);
    let rate = r.flows[0].util * 100.0 * MBIT as f64;
    assert!(rate <= 42.0 * MBIT as f64, "rate {rate}");
    assert!(rate >= 34.0 * MBIT as f64, "rate {rate}");
}

#[test]
fn g_two_flows_converge_to_fair_share() {
    let p = path(100 * MBIT, 100, 0.0);
    let flows = vec![
        (soku(SokuCcConfig::default(), &p), Duration::ZERO),
        (soku(SokuCcConfig { seed: 2, ..SokuCcConfig::default() }, &p), secs(2)),
    ];
    let r = sim::run(p, flows, secs(40), secs(30), 11);
    let (a, b) = (r.flows[0].util, r.flows[1].util);
    println!(
        "{:<44} util {:5.1} % + {:5.1} %  queue delay {:6.1} ms  queue drops {:5.2} %",
        "soku x2 100M 100ms 0% (2nd starts at 2 s)",
        100.0 * a,
        100.0 * b,
        r.mean_queue_delay.as_secs_f64() * 1e3,
        100.0 * r.queue_drop_fraction
    );
    for cc in r.controllers {
        if let Ok(s) = cc.into_any().downcast::<SokuCc>() {
            println!(
                "  flow: bw {:?} min_rtt {:?} mode {:?} ack aggregation {} B",
                s.bandwidth_bps(),
                s.min_rtt(),
                s.mode(),
                s.ack_aggregation()
            );
        }
    }
    let total = a + b;
    assert!(total >= 0.85, "total {total}");
    for share in [a / total, b / total] {
        assert!((0.40..=0.60).contains(&share), "shares {a} {b}");
    }
    let j = jain(&[a, b]);
    assert!(j >= 0.95, "Jain's index {j}");
}

/// Jain's fairness index of `shares`: 1 when all are equal, 1/n when one has it all.
fn jain(shares: &[f64]) -> f64 {
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|x| x * x).sum();
    sum * sum / (shares.len() as f64 * squares)
}

/// `n` flows started a second apart on 100 Mbit/s x `rtt_ms` (one-BDP drop-tail buffer),
/// sharing their min RTT as soku's copies from one host do, measured over seconds 30-60;
/// prints and returns each flow's share of the link. `jittered`: each start up to 50 ms
/// off the second (by seed); with the starts on the second, several seed sets play out
/// alike.
fn staggered(n: u64, rtt_ms: u64, seed: u64, jittered: bool) -> Vec<f64> {
    started(n, rtt_ms, seed, Duration::from_secs(1), 30, 60, jittered)
}

/// `n` flows started `spacing` apart (plus up to 50 ms, by seed, if `jittered`) on
/// 100 Mbit/s x `rtt_ms` (one-BDP drop-tail buffer), sharing their min RTT on one board
/// (`soku_cc::shared`), measured from second `from` to `until`; prints and returns each
/// flow's share of the link.
fn started(
    n: u64,
    rtt_ms: u64,
    seed: u64,
    spacing: Duration,
    from: u64,
    until: u64,
    jittered: bool,
) -> Vec<f64> {
    let p = path(100 * MBIT, rtt_ms, 0.0);
    let board: Arc<dyn PathBoard> = Arc::new(MemoryBoard::new());
    let flows = (0..n)
        .map(|i| {
            let cfg = SokuCcConfig {
                seed: seed * 1000 + i * 7919 + 1,
                board: BoardSlot::with(board.clone()),
                ..SokuCcConfig::default()
            };
            let jitter = if jittered {
                Duration::from_micros((seed * 7919 + i * 104_729) % 50_000)
            } else {
                Duration::ZERO
            };
            (soku(cfg, &p), spacing * i as u32 + jitter)
        })
        .collect();
    let r = sim::run(p, flows, secs(until), secs(from), seed);
    let u: Vec<f64> = r.flows.iter().map(|f| f.util).collect();
    let total: f64 = u.iter().sum();
    println!(
        "soku x{n} 100M {rtt_ms}ms 0% ({spacing:?} apart, s {from}-{until}), seeds {seed:>2}: \
         total {:5.1} %  shares {:?}  largest deviation {:4.1} %  Jain {:.3}  queue drops {:4.2} %",
        100.0 * total,
        u.iter().map(|x| (1000.0 * x).round() / 10.0).collect::<Vec<_>>(),
        100.0 * largest_deviation(&u),
        jain(&u),
        100.0 * r.queue_drop_fraction
    );
    u
}

/// Runs `shares` for each seed set and asserts what every fairness test asserts: the
/// link at least 95 % used, no flow further than `each` from the mean share, and at most
/// `mean` on average over the seed sets.
fn assert_fair(seeds: &[u64], shares: impl Fn(u64) -> Vec<f64>, each: f64, mean: f64) {
    let mut devs = Vec::new();
    for &seed in seeds {
        let u = shares(seed);
        let total: f64 = u.iter().sum();
        let dev = largest_deviation(&u);
        assert!(total >= 0.95, "seeds {seed}: total {total}");
        assert!(dev <= each, "seeds {seed}: shares {u:?}");
        devs.push(dev);
    }
    let mean_dev = devs.iter().sum::<f64>() / devs.len() as f64;
    assert!(mean_dev <= mean, "mean largest deviation {mean_dev}");
}

/// Eight seed sets.
const EIGHT_SEEDS: [u64; 8] = [11, 22, 33, 44, 55, 66, 77, 88];

/// The largest distance of one share from the mean share, relative to the mean.
fn largest_deviation(shares: &[f64]) -> f64 {
    let mean = shares.iter().sum::<f64>() / shares.len() as f64;
    shares.iter().map(|x| (x - mean).abs() / mean).fold(0.0, f64::max)
}

/// Four flows started a second apart share 100 Mbit/s x 20 ms (one-BDP drop-tail
/// buffer), seconds 30-60, three sets of seeds. With the 10 % loss threshold alone the
/// full queue's 2-4 % loss cut the flows only through sampling noise, small flows most
/// often: the largest deviation from the mean share was 24.8 % on average over these
/// seeds. Loss with a standing queue in a cruising round became congestion at 2 %
/// (`model.rs`, `round_congested`): 16.2 % on average, 33.7 % at worst. Cruising on
/// the recent rounds' delivery rate with a fixed queue share per flow (`cruise_bw`,
/// `queue_share`): 7.2 % on average, 9.0 % at worst. Each flow's window held within 5 %
/// of the others' mean share while a queue stands (`soku_cc::ensemble`): 1.3 % and 2.1 %.
#[test]
fn t_four_staggered_flows_share_a_20ms_path() {
    assert_fair(&[11, 22, 33], |seed| staggered(4, 20, seed, false), 0.06, 0.04);
}

/// The long path: 200 ms, where a one-BDP buffer rarely overflows and loss cannot
/// even out the shares. Four flows, eight seed sets with jittered starts: the largest
/// deviation from the mean share was 25.6 % on average and 37.0 % at worst with
/// `cruise_bw` and `queue_share` alone; sharing the min RTT (`soku_cc::shared`, which
/// lines the flows' probe-RTTs up) and no loss response to rounds sent in probe-RTT:
/// 21.0 % and 38.2 %; with the ack-aggregation allowance capped at an eighth of the BDP
/// while others share the path: 14.0 % and 19.5 %; each flow's window held within 5 %
/// of the others' mean share while a queue stands (`soku_cc::ensemble`): 3.7 % and
/// 6.3 %. (Three seed sets without jitter, the earlier form of this test, gave 16.0 %
/// and 18.9 % before any of it: too few to tell.) Two flows: Jain's index at least 0.99.
#[test]
fn v_staggered_flows_share_a_200ms_path() {
    assert_fair(&EIGHT_SEEDS, |seed| staggered(4, 200, seed, true), 0.12, 0.08);
    for seed in [11u64, 22, 33] {
        let two = staggered(2, 200, seed, false);
        assert!(two.iter().sum::<f64>() >= 0.95, "seeds {seed}: two flows {two:?}");
        assert!(jain(&two) >= 0.99, "seeds {seed}: two flows {two:?}");
    }
}

/// Copies started together, as parallel ssh logins start them (150 ms apart plus up
/// to 50 ms), on 100 Mbit/s x 20 ms, measured early (seconds 3-20), eight seed sets.
/// Each flow after the first took its min RTT with the others' queue standing (22-31 ms
/// on this path), and so a larger window and share, until a probe-RTT 10 s later: the
/// largest deviation from the mean share was 49.5 % on average and 60.5 % at worst.
/// Sharing the min RTT (`soku_cc::shared`): 4.8 % and 10.7 %; with the rest of the
/// sharing (`model.rs`): 3.8 % and 8.8 %; with each flow's window held within 5 % of the
/// others' mean share while a queue stands (`soku_cc::ensemble`): 1.2 % and 2.2 %.
#[test]
fn w_copies_started_together_share_a_20ms_path() {
    let together = |seed| started(4, 20, seed, Duration::from_millis(150), 3, 20, true);
    assert_fair(&EIGHT_SEEDS, together, 0.08, 0.05);
}

/// Eight copies started together on 100 Mbit/s x 20 ms: a flow's share is some 20
/// packets here, and the queue drops 2 % of them. The largest deviation from the mean
/// share was 31.2 % on average and 48.4 % at worst over eight seed sets with the min
/// RTT shared; with the windows held near the others' mean (`soku_cc::ensemble`),
/// 10.7 % and 15.7 %.
#[test]
fn x_eight_copies_started_together_share_a_20ms_path() {
    let together = |seed| started(8, 20, seed, Duration::from_millis(150), 3, 20, true);
    assert_fair(&EIGHT_SEEDS, together, 0.25, 0.15);
}

#[test]
fn h_heavy_congestion_backs_off() {
    let mut p = path(100 * MBIT, 100, 0.0);
    p.queue_bytes = 20 * 1500; // 2.4 ms of buffer on a 100 ms path
    let cfg = Arc::new(SokuCcConfig::default());
    let flows = (0..4).map(|i| (cfg.clone().build(Instant::now(), 1500), secs(i))).collect();
    let r = sim::run(p, flows, secs(30), secs(10), 13);
    println!(
        "{:<44} util {:5.1} %  queue delay {:6.1} ms  queue drops {:5.2} %",
        "soku x4 100M 100ms, 20-packet buffer",
        100.0 * r.total_util(),
        r.mean_queue_delay.as_secs_f64() * 1e3,
        100.0 * r.queue_drop_fraction
    );
    assert!(r.queue_drop_fraction < 0.10, "drops {}", r.queue_drop_fraction);
    assert!(r.total_util() >= 0.6, "util {}", r.total_util());
}

#[test]
fn i_soku_vs_quinn_cubic_at_1pct_loss() {
    let p = path(100 * MBIT, 100, 0.01);
    let s = one("soku  100M 100ms 1%", p, soku(SokuCcConfig::default(), &p), 20, 5);
    let c = one("cubic 100M 100ms 1% (quinn CubicConfig)", p, cubic(&p), 20, 5);
    assert!(
        s.total_util() >= 4.0 * c.total_util(),
        "soku {} cubic {}",
        s.total_util(),
        c.total_util()
    );
}

#[test]
fn j_cubic_baseline_no_loss() {
    // The simulator is fair to CUBIC: without random loss it fills the link.
    let p = path(100 * MBIT, 100, 0.0);
    let c = one("cubic 100M 100ms 0% (quinn CubicConfig)", p, cubic(&p), 20, 5);
    assert!(c.total_util() >= 0.80, "cubic {}", c.total_util());
}

#[test]
fn k_background_yields_to_a_normal_flow() {
    let p = path(100 * MBIT, 100, 0.0);
    let flows = vec![
        (soku(SokuCcConfig::background(), &p), Duration::ZERO),
        (soku(SokuCcConfig { seed: 3, ..SokuCcConfig::default() }, &p), secs(2)),
    ];
    let r = sim::run(p, flows, secs(30), secs(15), 17);
    let (bg, fg) = (r.flows[0].util, r.flows[1].util);
    println!(
        "{:<44} util {:5.1} % (bg) + {:5.1} % (fg)  queue delay {:6.1} ms",
        "soku background + soku, 100M 100ms 0%",
        100.0 * bg,
        100.0 * fg,
        r.mean_queue_delay.as_secs_f64() * 1e3
    );
    assert!(bg + fg >= 0.85, "total {}", bg + fg);
    assert!(bg < 0.5 * fg, "background {bg} normal {fg}");
    // Alone, a background flow still fills the link, random loss or not.
    let p = path(100 * MBIT, 100, 0.01);
    let r =
        one("soku background alone 100M 100ms 1%", p, soku(SokuCcConfig::background(), &p), 20, 5);
    assert!(r.total_util() >= 0.85, "util {}", r.total_util());
}

#[test]
fn l_loss_table_soku_vs_cubic() {
    println!("loss     soku %   cubic %   (100 Mbit/s, 100 ms, 1xBDP buffer, s 5-20)");
    for loss in [0.0, 0.0001, 0.001, 0.01, 0.03, 0.05] {
        let p = path(100 * MBIT, 100, loss);
        let run = |cc| sim::run(p, vec![(cc, Duration::ZERO)], secs(20), secs(5), 5);
        let s = run(soku(SokuCcConfig::default(), &p)).total_util();
        let c = run(cubic(&p)).total_util();
        println!("{:5.2} %  {:6.1}   {:6.1}", 100.0 * loss, 100.0 * s, 100.0 * c);
        assert!(s >= 0.9 * (1.0 - loss), "soku {s} at loss {loss}");
        if loss >= 0.001 {
            assert!(s > 2.0 * c, "soku {s} cubic {c} at loss {loss}");
        }
    }
}

/// Regression: a round of >10 % loss early in startup (a few packets per round) set a
/// tiny in-flight bound that then grew 3 % per round; at 5 % random loss three seeds
/// in eight stayed at 80-84 % for the whole run. The bound now grows up to 12.5 % per
/// round, and every seed reaches the same level.
#[test]
fn regression_early_inflight_bound_recovers_at_5pct_loss() {
    let p = path(100 * MBIT, 100, 0.05);
    for seed in 1..=8 {
        let cc = soku(SokuCcConfig::default(), &p);
        let r = sim::run(p, vec![(cc, Duration::ZERO)], secs(20), secs(5), seed);
        assert!(r.total_util() >= 0.88, "seed {seed}: util {}", r.total_util());
    }
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Run soku and quinn's CUBIC on the same path; returns (soku, cubic) utilisation.
fn both(name: &str, p: Path, dur: u64, from: u64) -> (f64, f64) {
    let run = |cc| sim::run(p, vec![(cc, Duration::ZERO)], secs(dur), secs(from), 5);
    let s = run(soku(SokuCcConfig::default(), &p));
    let c = run(cubic(&p));
    let agg = s.controllers[0].clone_box().into_any().downcast::<SokuCc>().ok();
    println!(
        "{name:<44} soku {:5.1} %  cubic {:5.1} %  soku queue delay {:5.1} ms  aggregation {} kB",
        100.0 * s.total_util(),
        100.0 * c.total_util(),
        s.mean_queue_delay.as_secs_f64() * 1e3,
        agg.map_or(0, |a| a.ack_aggregation() / 1000),
    );
    (s.total_util(), c.total_util())
}

/// Acks released in bursts (Wi-Fi block acks, GRO, a receiver reading in batches): the
/// window must carry the data acknowledged late, or the sender idles between bursts.
#[test]
fn m_ack_aggregation_keeps_the_link_busy() {
    let mut failed = Vec::new();
    for (rtt, burst, loss) in [(20, 5, 0.0), (20, 10, 0.0), (20, 20, 0.0), (10, 10, 0.01)] {
        let mut p = path(100 * MBIT, rtt, loss);
        p.ack_burst = ms(burst);
        let name = format!("100M {rtt}ms {}%, acks every {burst} ms", 100.0 * loss);
        let (s, c) = both(&name, p, 20, 5);
        if s < 0.9 * (1.0 - loss) {
            failed.push(format!("{name}: soku {s}"));
        }
        // CUBIC, blind to the aggregation, fills a 1xBDP buffer anyway when nothing
        // is lost at random.
        if loss == 0.0 && s < c - 0.05 {
            failed.push(format!("{name}: soku {s} cubic {c}"));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// Acks delayed by a random 0..J (order kept): the RTT swings, the min RTT does not.
/// Nine seeds each, judged by the median: one seed decides little here (0-40 ms of
/// jitter on 20 ms: 68-96 % of the link from seed to seed, depending on whether a
/// probe-RTT happens to see the true min RTT, after which the ack-aggregation allowance
/// is short of what the jitter holds back; see
/// `lab/2026-11-24-many-at-once`). Medians over these seeds: 99.1, 86.6
/// and 95.9 % (the single seed this test ran before: 99.2, 95.8, 95.3 %).
///
/// The last three cases, random loss under jittered acks, guard the loss rules: acks
/// that come late put some rounds at the top of the RTTs a flow sees while random loss
/// strikes, and a rule that takes such a round for a full queue cuts a lone flow
/// (rules tried in `lab/2026-11-27-rtt-peak`: one left under half of the link
/// at 100 ms, 1 %, 50 ms of jitter). Medians: 93.5, 95.2 and 95.9 %.
#[test]
fn n_rtt_jitter_keeps_the_link_busy() {
    let mut failed = Vec::new();
    for (rtt, jitter, loss, wanted) in [
        (20, 10, 0.0, 0.9),
        (20, 40, 0.0, 0.85),
        (100, 50, 0.01, 0.9),
        (100, 50, 0.03, 0.9),
        (50, 20, 0.03, 0.9),
        (200, 50, 0.01, 0.9),
    ] {
        let mut p = path(100 * MBIT, rtt, loss);
        p.ack_jitter = ms(jitter);
        let mut utils: Vec<f64> = (0..9u64)
            .map(|seed| {
                let cfg = SokuCcConfig { seed: seed * 7919 + 1, ..SokuCcConfig::default() };
                let flows = vec![(soku(cfg, &p), Duration::ZERO)];
                sim::run(p, flows, secs(20), secs(5), 5 + seed).total_util()
            })
            .collect();
        utils.sort_by(f64::total_cmp);
        let median = utils[utils.len() / 2];
        println!(
            "100M {rtt}ms {}%, ack jitter 0-{jitter} ms: soku median {:5.1} %, range {:5.1}-{:5.1} %",
            100.0 * loss,
            100.0 * median,
            100.0 * utils[0],
            100.0 * utils[utils.len() - 1]
        );
        if median < wanted * (1.0 - loss) {
            failed.push(format!("{rtt} ms, jitter {jitter} ms: median {median}"));
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
}

/// Loopback on a loaded host: 50 us of RTT, but the sender runs only every 0.1-2 ms,
/// so acks arrive in clumps and the typical RTT is tens of times the minimum. A
/// window of `gain x bw x min_rtt` alone starves the sender; soku must do at least as
/// well as CUBIC (which grows until loss and so fills the socket buffer).
#[test]
fn o_loopback_like_scheduling_jitter() {
    let mut p = path(1_000 * MBIT, 1, 0.0);
    p.rtt = us(50);
    p.queue_bytes = 2 << 20; // a socket buffer
    p.sched = Some((us(100), ms(2)));
    let (s, c) = both("1G 50us 0%, sender wakes every 0.1-2 ms", p, 4, 1);
    assert!(s >= c, "soku {s} cubic {c}");
    assert!(s >= 0.8, "soku {s}");
}

/// Startup against a buffer of one bandwidth-delay product, the emulator's default:
/// BBR's three-round plateau rule alone let the doubling window overflow it (4.7 % of
/// packets dropped over 10 s at 200 ms, 7.6 % at 300 ms, mean over six start phases);
/// the RTT-rise exit ends startup before that.
#[test]
fn p_startup_leaves_a_one_bdp_buffer_unflooded() {
    for rtt in [200, 300] {
        let p = path(100 * MBIT, rtt, 0.0);
        let (mut util, mut drops) = (0.0, 0.0);
        for seed in 1..=6u64 {
            let cfg = SokuCcConfig { seed: seed * 77, ..SokuCcConfig::default() };
            let start = Duration::from_micros(seed * 3_700);
            let r = sim::run(p, vec![(soku(cfg, &p), start)], secs(10), secs(0), seed);
            util += r.flows[0].util / 6.0;
            drops += r.queue_drop_fraction / 6.0;
        }
        println!(
            "soku 100M {rtt}ms 0%, first 10 s: util {:5.1} %  queue drops {:5.2} %",
            100.0 * util,
            100.0 * drops
        );
        assert!(drops < 0.02, "{rtt} ms: {:.2} % of packets dropped at the queue", 100.0 * drops);
        assert!(util > 0.70, "{rtt} ms: util {util}");
    }
}

/// Startup's ack-aggregation estimate does not outlive startup: with a deep buffer
/// (4 BDP) it used to stand as ~1 MB of extra window for ten rounds (mean queueing
/// delay 243 ms at 300 ms RTT over the first 10 s; 110 ms now).
#[test]
fn q_no_standing_queue_after_startup_in_a_deep_buffer() {
    let mut p = path(100 * MBIT, 300, 0.0);
    p.queue_bytes *= 4;
    let r = one(
        "soku 100M 300ms 0%, 4xBDP buffer, first 10 s",
        p,
        soku(SokuCcConfig::default(), &p),
        10,
        0,
    );
    assert!(
        r.mean_queue_delay < Duration::from_millis(150),
        "mean queueing delay {:?}",
        r.mean_queue_delay
    );
    assert!(r.total_util() > 0.65, "util {}", r.total_util());
}

/// Startup reaches the link rate quickly without flooding a one-BDP buffer (acks every
/// ten packets, as soku asks of its peer). While the bandwidth estimate was taken only
/// at round ends it trailed the window by a round: the flow carried 21 % of 1 Gbit/s
/// x 300 ms over the first 5 s here (28 % now), and at 1 Gbit/s x 100 ms its 2.9 BDP
/// cap dropped 17 % of the first 2 s's packets at the queue (under 1 % now).
#[test]
fn r_startup_reaches_the_link_rate_without_flooding_the_queue() {
    for (rtt, secs_measured, min_util) in [(300, 5, 0.26), (100, 2, 0.45)] {
        let mut p = path(1_000 * MBIT, rtt, 0.0);
        p.ack_every = 10;
        let r = one(
            &format!("soku 1G {rtt}ms 0%, first {secs_measured} s"),
            p,
            soku(SokuCcConfig::default(), &p),
            secs_measured,
            0,
        );
        assert!(r.total_util() >= min_util, "{rtt} ms: util {}", r.total_util());
        assert!(
            r.queue_drop_fraction < 0.02,
            "{rtt} ms: {:.2} % dropped at the queue",
            100.0 * r.queue_drop_fraction
        );
    }
}

/// A LAN: 0.2 ms of RTT and a switch-sized drop-tail buffer of 32 packets (the
/// emulator's floor, where a 100 Mbit/s x 0 ms emulated copy lost ~10 % of its
/// packets). The loss bound came back every round, i.e. every few milliseconds here,
/// and overflowed the buffer each time: 7.2 % of the packets dropped (CUBIC 0.01 %).
#[test]
fn s_lan_with_a_shallow_buffer_is_not_flooded() {
    let mut p = path(100 * MBIT, 1, 0.0);
    p.rtt = us(200);
    p.queue_bytes = 32 * p.pkt;
    let r = one("soku 100M 0.2ms 0%, 32-packet buffer", p, soku(SokuCcConfig::default(), &p), 6, 2);
    assert!(r.total_util() >= 0.95, "util {}", r.total_util());
    assert!(r.queue_drop_fraction < 0.03, "queue drops {}", r.queue_drop_fraction);
}

/// The multi-flow fairness table: `n` flows started a second apart on 100 Mbit/s x
/// `rtt` (one-BDP drop-tail buffer), seconds 30-60, three sets of seeds; per run the
/// total, the shares, the largest deviation from the mean share and Jain's index.
/// Runs only with `SOKU_SWEEP` set, e.g. `SOKU_SWEEP=4x200,8x200` (`all`: the nine
/// cases 2/4/8 flows x 20/100/200 ms). `SOKU_TRACE=1` adds each flow's state every
/// `SOKU_TRACE_EVERY` seconds (default 5) of the first seed set.
#[test]
fn u_fairness_sweep() {
    let Ok(spec) = std::env::var("SOKU_SWEEP") else {
        return;
    };
    let cases: Vec<(u64, u64)> = if spec == "all" {
        [2, 4, 8].iter().flat_map(|&n| [20, 100, 200].map(move |r| (n, r))).collect()
    } else {
        spec.split(',')
            .map(|c| {
                let (n, r) = c.split_once('x').expect("NxRTT");
                (n.parse().expect("n"), r.parse().expect("rtt"))
            })
            .collect()
    };
    let trace = std::env::var("SOKU_TRACE").is_ok();
    let trace_seed: u64 =
        std::env::var("SOKU_TRACE").ok().and_then(|s| s.parse().ok()).unwrap_or(11);
    let every: u64 =
        std::env::var("SOKU_TRACE_EVERY").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let mut summary = Vec::new();
    if std::env::var("SOKU_SINGLE").is_ok() {
        for (rate, rtt, loss) in [
            (100, 100, 0.0),
            (100, 100, 0.01),
            (100, 100, 0.03),
            (100, 100, 0.05),
            (100, 300, 0.01),
            (100, 10, 0.01),
            (100, 20, 0.0),
            (10, 100, 0.0),
            (10, 100, 0.01),
            (10, 100, 0.03),
            (5, 200, 0.02),
        ] {
            let p = path(rate * MBIT, rtt, loss);
            let r =
                sim::run(p, vec![(soku(sweep_config(), &p), Duration::ZERO)], secs(20), secs(5), 7);
            summary.push(format!(
                "single {rate}M {rtt}ms {:.0}%: util {:5.1} %  qdelay {:5.1} ms",
                100.0 * loss,
                100.0 * r.total_util(),
                r.mean_queue_delay.as_secs_f64() * 1e3
            ));
        }
    }
    for (n, rtt) in cases {
        let mut p = path(100 * MBIT, rtt, 0.0);
        let (mut devs, mut worst, mut jains, mut totals) = (0.0, 0.0f64, 0.0, 0.0);
        let nseeds: u64 =
            std::env::var("SOKU_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
        let k = nseeds as f64;
        let jittered = std::env::var("SOKU_JITTER").is_ok();
        // SOKU_SPACING_MS, SOKU_FROM, SOKU_DUR: start flows closer together and measure
        // an earlier, shorter window (copies that start within a second and last 20 s).
        let env_u64 =
            |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
        let spacing = Duration::from_millis(env_u64("SOKU_SPACING_MS", 1000));
        let (from, dur) = (env_u64("SOKU_FROM", 30), env_u64("SOKU_DUR", 60));
        p.ack_jitter = ms(env_u64("SOKU_ACK_JITTER_MS", 0));
        for seed in (1..=nseeds).map(|s| 11 * s) {
            // SOKU_SHARE: the flows share their min RTT on one board (`soku_cc::shared`).
            let board: Arc<dyn PathBoard> = Arc::new(MemoryBoard::new());
            let shared = std::env::var("SOKU_SHARE").is_ok();
            let flows = (0..n)
                .map(|i| {
                    let mut cfg =
                        SokuCcConfig { seed: seed * 1000 + i * 7919 + 1, ..sweep_config() };
                    if shared {
                        cfg.board = BoardSlot::with(board.clone());
                    }
                    // SOKU_JITTER: starts also up to 50 ms off the second (the flows
                    // interleave differently; without it the runs depend on the seeds
                    // only through the probe phases, and several seed sets coincide).
                    let jitter = if jittered { (seed * 7919 + i * 104_729) % 50_000 } else { 0 };
                    (soku(cfg, &p), spacing * i as u32 + Duration::from_micros(jitter))
                })
                .collect();
            let mut last = vec![0u64; n as usize];
            let mut tracer = |t: Duration, view: &[(&dyn Controller, u64)]| {
                let line: Vec<String> = view
                    .iter()
                    .zip(last.iter_mut())
                    .map(|((cc, acked), l)| {
                        let rate = (acked - *l) as f64 * 8.0 / every as f64 / 1e6;
                        *l = *acked;
                        match cc.clone_box().into_any().downcast::<SokuCc>() {
                            Ok(s) => format!(
                                "{:5.1}M {} w{} bw{:.0} rtt{:.0} hi{}",
                                rate,
                                &s.mode().name()[..3],
                                s.window() / 1000,
                                s.bandwidth_bps().unwrap_or(0) as f64 / 1e6,
                                s.min_rtt().map_or(0.0, |d| d.as_secs_f64() * 1e3),
                                s.inflight_bound().map_or("-".into(), |h| (h / 1000).to_string()),
                            ),
                            Err(_) => String::new(),
                        }
                    })
                    .collect();
                println!("  t {:3.0} | {}", t.as_secs_f64(), line.join(" | "));
            };
            let tr: Option<(Duration, sim::Tracer<'_>)> =
                if trace && seed == trace_seed { Some((secs(every), &mut tracer)) } else { None };
            let r = sim::run_traced(p, flows, secs(dur), secs(from), seed, tr);
            let u: Vec<f64> = r.flows.iter().map(|f| f.util).collect();
            let total: f64 = u.iter().sum();
            let mean = total / u.len() as f64;
            let dev = u.iter().map(|x| (x - mean).abs() / mean).fold(0.0, f64::max);
            println!(
                "{n}x{rtt}ms seeds {seed}: total {:5.1} %  dev {:5.1} %  Jain {:.3}  drops {:4.2} %  \
                 qdelay {:5.1} ms  shares {:?}",
                100.0 * total,
                100.0 * dev,
                jain(&u),
                100.0 * r.queue_drop_fraction,
                r.mean_queue_delay.as_secs_f64() * 1e3,
                u.iter().map(|x| (1000.0 * x).round() / 10.0).collect::<Vec<_>>(),
            );
            devs += dev / k;
            worst = worst.max(dev);
            jains += jain(&u) / k;
            totals += total / k;
        }
        summary.push(format!(
            "{n}x{rtt:<3}  mean dev {:5.1} %  worst {:5.1} %  Jain {:.3}  total {:5.1} %",
            100.0 * devs,
            100.0 * worst,
            jains,
            100.0 * totals
        ));
    }
    println!("--- summary ---\n{}", summary.join("\n"));
}

/// The default configuration with the sweep's overrides from the environment.
fn sweep_config() -> SokuCcConfig {
    let get = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<f64>().ok());
    let mut c = SokuCcConfig::default();
    if let Some(v) = get("SOKU_CWND_GAIN") {
        c.cwnd_gain = v;
    }
    if let Some(v) = get("SOKU_PROBE_GAIN") {
        c.probe_gain = v;
    }
    if let Some(v) = get("SOKU_BW_ROUNDS") {
        c.bw_window_rounds = v as u64;
    }
    if let Some(v) = get("SOKU_BETA") {
        c.loss_beta = v;
    }
    if let Some(v) = get("SOKU_QSHARE") {
        c.queue_share_bps = v as u64;
    }
    if let Some(v) = get("SOKU_FIRST_MINRTT") {
        c.first_min_rtt_window = Duration::from_secs_f64(v);
    }
    if let Some(v) = get("SOKU_RAISE_PROBES") {
        c.min_rtt_raise_probes = v as u32;
    }
    if let Some(v) = get("SOKU_MINRTT_WIN") {
        c.min_rtt_window = Duration::from_secs_f64(v);
    }
    c
}

/// CUBIC alone on 100 Mbit/s x `rtt_ms` (one-BDP drop-tail buffer), then a background
/// soku from second 2, with the path remembered from an earlier copy (its min RTT) or
/// not; the two flows' utilisation from second `from` to `until`.
fn cubic_then_background(rtt_ms: u64, remembered: bool, from: u64, until: u64) -> (f64, f64) {
    let p = path(100 * MBIT, rtt_ms, 0.0);
    let mut config = SokuCcConfig { seed: 5, ..SokuCcConfig::background() };
    if remembered {
        let path = RememberedPath { bandwidth_bps: 100 * MBIT, min_rtt: ms(rtt_ms) };
        config.hint = HintSlot::with(ConnectionHint { remembered: Some(path), background: true });
    }
    let flows = vec![(cubic(&p), Duration::ZERO), (soku(config, &p), secs(2))];
    let r = sim::run(p, flows, secs(until), secs(from), 29);
    let (c, bg) = (r.flows[0].util, r.flows[1].util);
    println!(
        "CUBIC, then background soku{}, 100M {rtt_ms}ms 0%, s {from}-{until}: \
         CUBIC {:5.1} %  background {:5.1} %",
        if remembered { " (path remembered)" } else { "" },
        100.0 * c,
        100.0 * bg
    );
    (c, bg)
}

/// A background flow that starts inside CUBIC's standing queue takes that queue for the
/// path until its first probe-RTT drains its own share (`BACKGROUND_FIRST_PROBE` in
/// `config.rs`, right after startup) or CUBIC drains the rest. With the min RTT an
/// earlier copy remembered as its baseline (`soku_cc::base_delay`) it sees the queue
/// from its first round. Seconds 4-20, CUBIC kept: first copy 89.1 % (20 ms), 95.6 %
/// (50 ms), 91.5 % (100 ms); with the memory 98.4, 98.5 and 94.3 % (at 100 ms the
/// background flow's first rounds, before its first RTT sample, are most of its 5.7 %).
/// With the first probe at ten seconds, the default's, a first copy left CUBIC 74.3,
/// 83.3 and 75.2 %.
#[test]
fn k2_a_background_flow_yields_to_cubics_queue_from_its_start() {
    for rtt in [20, 50, 100] {
        let (c, _) = cubic_then_background(rtt, false, 4, 20);
        assert!(c >= 0.85, "{rtt} ms, first copy: CUBIC kept {c}");
        let (c, bg) = cubic_then_background(rtt, true, 4, 20);
        assert!(c >= 0.935, "{rtt} ms, path remembered: CUBIC kept {c}");
        assert!(bg <= 0.065, "{rtt} ms, path remembered: background took {bg}");
    }
}

/// A first-copy background flow, blind to CUBIC's queue at its start, has yielded by
/// second 30 and stays yielded through the probe-RTTs of the next 30 s. (That the
/// probe-RTTs raise only the model's min RTT, not the flow's baseline, is
/// `background_keeps_yielding_after_probe_rtts_raise_its_min_rtt` in `tests/model.rs`;
/// here the flow took 1.3-2.6 % without the baseline, 0.6-1.7 % with it, and
/// 0.3-1.8 % with it and the first probe-RTT right after startup.)
#[test]
fn k3_a_blind_background_flow_yields_and_stays_yielded() {
    for rtt in [20, 50, 100] {
        let (c, bg) = cubic_then_background(rtt, false, 30, 60);
        assert!(bg <= 0.03, "{rtt} ms: background took {bg}");
        assert!(c >= 0.95, "{rtt} ms: CUBIC kept {c}");
    }
}

// Probe-RTT on long paths: how much of the time it takes at 1 s RTT, and that it
// never cuts a startup that is still growing.

/// What a run's trace shows of one flow's modes, sampled every `STEP`.
#[derive(Debug, Default)]
struct Modes {
    /// Samples taken, and of them in probe-RTT.
    samples: u64,
    probe_rtt: u64,
    /// Probe-RTT phases begun.
    probes: u32,
    /// When the flow first left startup, if it did.
    startup_end: Option<Duration>,
    /// Samples in probe-RTT before the flow first left startup.
    probe_rtt_in_startup: u64,
    last: Option<Mode>,
}

const STEP: Duration = Duration::from_millis(10);

fn traced(p: Path, config: SokuCcConfig, dur: u64, seed: u64) -> (Modes, f64) {
    let cc = Arc::new(config).build(Instant::now(), p.pkt as u16);
    let mut m = Modes::default();
    let mut tracer = |t: Duration, flows: &[(&dyn Controller, u64)]| {
        let Ok(s) = flows[0].0.clone_box().into_any().downcast::<SokuCc>() else {
            return;
        };
        let mode = s.mode();
        m.samples += 1;
        if mode == Mode::ProbeRtt {
            m.probe_rtt += 1;
            if m.last != Some(Mode::ProbeRtt) {
                m.probes += 1;
            }
            if m.startup_end.is_none() {
                m.probe_rtt_in_startup += 1;
            }
        }
        if m.startup_end.is_none() && matches!(mode, Mode::Drain | Mode::ProbeBw) {
            m.startup_end = Some(t);
        }
        m.last = Some(mode);
    };
    let r = sim::run_traced(
        p,
        vec![(cc, Duration::ZERO)],
        Duration::from_secs(dur),
        Duration::ZERO,
        seed,
        Some((STEP, &mut tracer)),
    );
    let util = r.flows[0].util;
    (m, util)
}

/// 100 Mbit/s x 1 s with 5 % random loss and acks up to 20 ms late, for 120 s (a 1 GiB
/// copy's length on the emulator). With the min-RTT window at ten seconds the flow
/// probed 9 times (seed 3: 12.5 % of the time in probe-RTT, one probe 244 samples into
/// a startup that then ended at 22.4 s instead of about 16 s, 78.3 % of the link), as on
/// the emulator (`lab/2026-11-30-one-second-ahead`). With the window at forty round
/// trips it probes at most three times (startup's min RTT expires 40 s on, then every
/// 40 s and a probe), spends at most 5 % of the time in probe-RTT, never probes before
/// startup has ended, and keeps at least 82 % of the link.
#[test]
fn at_1s_with_5pct_loss_probe_rtt_takes_a_bounded_share_of_the_time() {
    let mut p = Path::one_bdp(100 * MBIT, 1000, 0.05);
    // Without jitter the flow sees its min RTT again whenever its queue empties and
    // never probes; the emulator's path, like any real one, has some.
    p.ack_jitter = Duration::from_millis(20);
    for seed in [3u64, 7] {
        let config = SokuCcConfig { seed: seed * 7919 + 1, ..SokuCcConfig::default() };
        let (m, util) = traced(p, config, 120, seed);
        let share = m.probe_rtt as f64 / m.samples as f64;
        println!(
            "100M 1s 5% seed {seed}: {:5.1} % of the link over 120 s, {} probe-RTTs, {:4.1} % of \
             the time in probe-RTT, startup ended at {:?}",
            100.0 * util,
            m.probes,
            100.0 * share,
            m.startup_end,
        );
        assert!(m.startup_end.is_some(), "startup never ended");
        assert_eq!(m.probe_rtt_in_startup, 0, "probe-RTT before startup ended: {m:?}");
        assert!(m.probes <= 3, "{} probe-RTTs in 120 s", m.probes);
        assert!(share <= 0.05, "{:.1} % of the time in probe-RTT", 100.0 * share);
        assert!(util >= 0.82, "{:.1} % of the link", 100.0 * util);
    }
}

/// 100 Mbit/s x 100 ms with 1 % loss and acks up to 20 ms late, for 60 s: the flow's
/// RTT samples come within an eighth of its min RTT whenever its drain round empties the
/// queue, which shows the min RTT still holds, so it never probes for it (BBR's rule, a
/// sample at or below the minimum, probed five times here). A path whose RTT grew is
/// still found by the ten-second window (`tests/model.rs`,
/// `on_a_100ms_path_a_longer_rtt_is_taken_within_ten_seconds`).
#[test]
fn a_lone_flow_near_its_min_rtt_does_not_probe() {
    let mut p = Path::one_bdp(100 * MBIT, 100, 0.01);
    p.ack_jitter = Duration::from_millis(20);
    let (m, util) = traced(p, SokuCcConfig::default(), 60, 7);
    println!(
        "100M 100ms 1%, ack jitter 0-20 ms: {:5.1} % of the link over 60 s, {} probe-RTTs, \
         {:4.1} % of the time in probe-RTT",
        100.0 * util,
        m.probes,
        100.0 * m.probe_rtt as f64 / m.samples as f64
    );
    assert_eq!(m.probes, 0, "{m:?}");
}
