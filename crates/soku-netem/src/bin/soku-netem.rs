//! `soku-netem`: bring up an emulated path in the foreground, run commands in its
//! namespaces, clean up leftovers.
//!
//! Exit codes: 0 success, 1 runtime failure (namespace, device, command), 2 usage.

use std::os::unix::process::CommandExt;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use soku_netem::{
    parse_duration, parse_percent, parse_rate, parse_size, DirStats, Gilbert, LinkSpec, Path,
    PathSpec, PathStats,
};

#[derive(Parser, Debug)]
#[command(
    name = "soku-netem",
    version,
    about = "TUN-based WAN emulator between two network namespaces"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Create namespaces NAME-a and NAME-b joined by an emulated link; run until
    /// Ctrl-C or SIGTERM, printing statistics, then tear everything down.
    Up(UpArgs),
    /// Run a command inside one end of a path that is up.
    Exec {
        /// Path name given to `up --name`.
        name: String,
        /// Which end.
        side: Side,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Delete the namespaces of a path left behind (NAME-a, NAME-b).
    Down {
        /// Path name given to `up --name`.
        name: String,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Side {
    A,
    B,
}

#[derive(clap::Args, Debug)]
struct UpArgs {
    /// Path name; namespaces are NAME-a and NAME-b.
    #[arg(long, default_value = "soku")]
    name: String,
    /// Round-trip propagation delay, split evenly over both directions (e.g. 50ms).
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    rtt: Duration,
    /// Per-packet jitter (uniform +-), each direction; never reorders.
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    jitter: Duration,
    /// Random loss per direction (e.g. 1%).
    #[arg(long, default_value = "0%", value_parser = parse_percent)]
    loss: f64,
    /// Apply --loss and --gilbert only from A to B (the data direction of a push).
    #[arg(long)]
    loss_a_to_b_only: bool,
    /// Gilbert-Elliott bursty loss "P,R[,H]": P good->bad, R bad->good, H loss in
    /// the bad state (default 100%); each a percentage or fraction.
    #[arg(long, value_parser = parse_gilbert)]
    gilbert: Option<Gilbert>,
    /// Reordering probability per packet (e.g. 0.5%).
    #[arg(long, default_value = "0%", value_parser = parse_percent)]
    reorder: f64,
    /// Extra delay of a reordered packet.
    #[arg(long, default_value = "1ms", value_parser = parse_duration)]
    reorder_delay: Duration,
    /// Link rate per direction on IP bytes (e.g. 100mbit, 1gbit); none if omitted.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<u64>,
    /// Drop-tail queue per direction in bytes (e.g. 256k); default one BDP.
    #[arg(long, value_parser = parse_size)]
    queue: Option<usize>,
    /// MTU of both TUN devices.
    #[arg(long, default_value_t = 1500)]
    mtu: u16,
    /// Address of end A (B gets the next address); /24.
    #[arg(long, default_value = "10.77.0.1")]
    addr_a: std::net::Ipv4Addr,
    /// Do not run the forwarding threads under SCHED_FIFO.
    #[arg(long)]
    no_realtime: bool,
    /// PRNG seed (0: from the clock).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// An outage of the whole path: every packet dropped both ways from START for
    /// LENGTH after the path is up (e.g. 10s+60s); may be given several times.
    #[arg(long, value_name = "START+LENGTH", value_parser = parse_outage)]
    outage: Vec<(Duration, Duration)>,
    /// Drop every UDP packet both ways (a firewall that blocks UDP).
    #[arg(long)]
    drop_udp: bool,
    /// Police UDP alone to this rate per direction (e.g. 5mbit): UDP beyond it is
    /// dropped, TCP is untouched (a middlebox that rate-limits UDP).
    #[arg(long, value_parser = parse_rate)]
    udp_rate: Option<u64>,
    /// Shape UDP alone to this rate per direction (e.g. 5mbit): UDP beyond it waits in a
    /// queue of its own (up to 100 ms of the rate, then dropped), TCP is untouched (a
    /// middlebox that throttles UDP with a shaper).
    #[arg(long, value_parser = parse_rate)]
    udp_shape: Option<u64>,
    /// Statistics interval (0 to disable).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    stats_every: Duration,
}

fn parse_outage(s: &str) -> Result<(Duration, Duration), String> {
    let (start, length) = s.split_once('+').ok_or("expected START+LENGTH, e.g. 10s+60s")?;
    let d = |v: &str| parse_duration(v).map_err(|e| e.to_string());
    Ok((d(start)?, d(length)?))
}

/// Switches the outages on and off on their schedule, from a thread of its own.
fn schedule_outages(
    faults: std::sync::Arc<soku_netem::Faults>,
    outages: Vec<(Duration, Duration)>,
) {
    let mut edges: Vec<(Duration, bool)> =
        outages.iter().flat_map(|&(start, len)| [(start, true), (start + len, false)]).collect();
    edges.sort();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        for (at, on) in edges {
            std::thread::sleep(at.saturating_sub(t0.elapsed()));
            faults.set_blackout(on);
            println!("outage {} at {:.1} s", if on { "begins" } else { "ends" }, at.as_secs_f64());
        }
    });
}

fn parse_gilbert(s: &str) -> Result<Gilbert, String> {
    let parts: Vec<&str> = s.split(',').collect();
    if !(2..=3).contains(&parts.len()) {
        return Err("expected P,R or P,R,H".into());
    }
    let p = |i: usize| parse_percent(parts[i]).map_err(|e| e.to_string());
    Ok(Gilbert { p: p(0)?, r: p(1)?, bad_loss: if parts.len() == 3 { p(2)? } else { 1.0 } })
}

impl UpArgs {
    fn spec(&self) -> PathSpec {
        let link = LinkSpec {
            delay: self.rtt / 2,
            jitter: self.jitter,
            loss: self.loss,
            gilbert: self.gilbert,
            reorder: self.reorder,
            reorder_delay: self.reorder_delay,
            rate_bps: self.rate,
            queue_bytes: self.queue,
            mtu: self.mtu,
            seed: self.seed,
        };
        let mut back = link.clone();
        if self.loss_a_to_b_only {
            back.loss = 0.0;
            back.gilbert = None;
        }
        if back.seed != 0 {
            back.seed = back.seed.wrapping_add(1);
        }
        let b = u32::from(self.addr_a).wrapping_add(1).into();
        PathSpec {
            a_to_b: link,
            b_to_a: back,
            addr_a: self.addr_a,
            addr_b: b,
            prefix_len: 24,
            realtime: !self.no_realtime,
        }
    }
}

fn blocked_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it fully.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        set
    }
}

/// Waits up to `timeout` for SIGINT/SIGTERM/SIGHUP (blocked beforehand); true if one came.
fn wait_signal(set: &libc::sigset_t, timeout: Duration) -> bool {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: set and ts are live; a null siginfo pointer is allowed.
    let r = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    r > 0
}

fn line(dir: &str, now: &DirStats, before: &DirStats, secs: f64) -> String {
    let mbit = (now.bytes - before.bytes) as f64 * 8.0 / secs / 1e6;
    let cpu = (now.cpu_ns - before.cpu_ns) as f64 / 1e9 / secs * 100.0;
    let user = (now.user_ns - before.user_ns) as f64 / 1e9 / secs * 100.0;
    format!(
        "{dir} {mbit:8.1} Mbit/s  pkts {:>10}  loss-drops {:>8}  queue-drops {:>8}  \
         fault-drops {:>8}  overflow {:>5}  maxq {:>9} B  late {:>6} us  \
         cpu {cpu:5.1} % (user {user:4.1} %)",
        now.packets,
        now.dropped_loss,
        now.dropped_queue,
        now.dropped_fault,
        now.dropped_overflow + now.write_errors,
        now.max_queue_bytes,
        now.mean_late().as_micros(),
    )
}

fn up(args: UpArgs) -> anyhow_free::Result {
    let set = blocked_signals();
    // SAFETY: set is initialised; blocking these signals in the main thread before any
    // thread is spawned makes every thread inherit the mask, so only sigtimedwait below
    // receives them.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    let spec = args.spec();
    let path = Path::up(&args.name, spec.clone()).map_err(|e| e.to_string())?;
    println!(
        "path {} up: {} {} <-> {} {} (rtt {:?}, loss {}%, rate {}); Ctrl-C to stop",
        args.name,
        path.ns_a(),
        path.addr_a(),
        path.ns_b(),
        path.addr_b(),
        spec.rtt(),
        args.loss * 100.0,
        args.rate.map_or("unlimited".into(), |r| format!("{} bit/s", r)),
    );
    println!("  soku-netem exec {0} a -- CMD   |   ip netns exec {1} CMD", args.name, path.ns_a());
    path.faults().set_drop_udp(args.drop_udp);
    path.faults().set_udp_rate(args.udp_rate);
    path.faults().set_udp_shape(args.udp_shape);
    if !args.outage.is_empty() {
        schedule_outages(path.faults(), args.outage.clone());
    }
    let every =
        if args.stats_every.is_zero() { Duration::from_secs(3600) } else { args.stats_every };
    let mut before = PathStats::default();
    let mut t0 = Instant::now();
    loop {
        if wait_signal(&set, every) {
            break;
        }
        if !path.is_running() {
            eprintln!("forwarding stopped unexpectedly");
            break;
        }
        if !args.stats_every.is_zero() {
            let now = path.stats();
            let secs = t0.elapsed().as_secs_f64();
            println!("{}", line("a>b", &now.a_to_b, &before.a_to_b, secs));
            println!("{}", line("b>a", &now.b_to_a, &before.b_to_a, secs));
            before = now;
            t0 = Instant::now();
        }
    }
    let fin = path.stats();
    path.down().map_err(|e| e.to_string())?;
    println!("down. a>b delivered {} pkts, b>a {} pkts", fin.a_to_b.packets, fin.b_to_a.packets);
    Ok(())
}

/// Errors of the binary are just messages.
mod anyhow_free {
    pub type Result = std::result::Result<(), String>;
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Up(args) => up(args),
        Cmd::Exec { name, side, cmd } => {
            let ns = match side {
                Side::A => format!("{name}-a"),
                Side::B => format!("{name}-b"),
            };
            let mut c = soku_netem::command_in(&ns, &cmd[0]);
            c.args(&cmd[1..]);
            Err(format!("cannot run ip netns exec: {}", c.exec()))
        }
        Cmd::Down { name } => Path::cleanup(&name).map_err(|e| e.to_string()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soku-netem: {e}");
            ExitCode::FAILURE
        }
    }
}
