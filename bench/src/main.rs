//! soku-bench: the whole comparison in one command. soku (over QUIC and over TLS/TCP),
//! qcp (defaults and tuned), scp, sftp, rsync, iperf3 (CUBIC and BBR) and soku's
//! transport alone (the quinn floor) on the same emulated paths in the same run, CPU
//! efficiency on loopback, and the small-packet test;
//! CSV, markdown and SVG out.
//!
//! # Layout
//! - `main.rs`: the command line, the run plan, the setup notes, the sanity verdict.
//! - [`matrix`]: one emulated path per scenario, every tool on it.
//! - [`tools`]: how each tool is started, bounded by a timeout and verified.
//! - [`cpu`]: loopback rows (ciphers, `-C`), CPU seconds per GB on each side.
//! - [`floor_path`]: the matrix's `quinn-floor` rows, soku's transport alone
//!   (`soku-floor`, `src/floor.rs`, one side per namespace).
//! - [`smallpkt`]: request/response over TCP with three ways of framing.
//! - [`report`]: CSV, markdown tables, charts; [`svg`]: the chart writer.
//! - [`proc`]: running a process with a timeout, CPU from `/proc`; [`sshd`]: a real sshd (soku-testkit's) and its sessions' CPU.
//! - [`qcp`]: finding or installing the pinned qcp release.

mod cpu;
mod floor_path;
mod matrix;
mod out_dir;
mod qcp;
mod report;
mod sharing;
mod smallfiles;
mod smallpkt;
mod sshd;
mod svg;
mod tools;

use soku_bench::proc;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;

use matrix::{LossDir, MatrixOpts, Row, Samples, Scenario};
use out_dir::default_out;
use tools::{Status, Tool};

/// soku vs qcp/scp/sftp/rsync/iperf3 on emulated paths, CPU on loopback, small packets.
///
/// Needs root (namespaces), /usr/sbin/sshd, scp, sftp, rsync, iperf3, and a built soku
/// (`cargo build --release -p soku`; by default the `soku` next to this binary). qcp is
/// installed by the bench itself when its rows are selected (`cargo install qcp`, pinned).
#[derive(Debug, Parser)]
#[command(name = "soku-bench", version)]
struct Args {
    /// Link rates, comma-separated [default: 100mbit,1gbit; quick: 100mbit].
    #[arg(long, value_delimiter = ',')]
    rates: Option<Vec<String>>,
    /// Round-trip times; bare numbers are ms [default: 0,10,50,100,200,300; quick: 10,50].
    #[arg(long, value_delimiter = ',')]
    rtts: Option<Vec<String>>,
    /// Random loss in percent [default: 0,0.01,0.1,1,3,5; quick: 0,1].
    #[arg(long, value_delimiter = ',')]
    losses: Option<Vec<String>>,
    /// Tools: soku, soku-tcp, qcp, qcp-tuned, scp, sftp, rsync, iperf3-cubic, iperf3-bbr
    /// [default: all; quick: soku,soku-tcp,scp,iperf3-bbr]. Naming qcp or qcp-tuned also
    /// adds qcp's rows to the loopback table.
    #[arg(long, value_delimiter = ',')]
    tools: Option<Vec<String>>,
    /// Target run length: copies move rate x duration bytes (at most 2 GiB); iperf3
    /// runs this long. Bare numbers are seconds [default: 20s; quick: 6s].
    #[arg(long)]
    duration: Option<String>,
    /// Fixed file size for the copies instead of rate x duration (e.g. 256mib).
    #[arg(long)]
    size: Option<String>,
    /// Runs of every tool per scenario, alternating tool by tool round after round;
    /// the tables show the median and the range.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    repeat: u32,
    /// Where the loss applies: `data` (A->B only, the upload direction) or `both`.
    #[arg(long, default_value = "data")]
    loss_dir: String,
    /// Police UDP alone to this rate per direction on every matrix path (e.g. 50mbit):
    /// the emulator's token bucket, 20 ms deep, drops the excess; TCP is untouched.
    #[arg(long)]
    udp_rate: Option<String>,
    /// The CI subset: 100 Mbit/s, RTT 10/50 ms, loss 0/1 %, soku, soku-tcp, scp and
    /// iperf3-bbr, 6 s runs, 256 MiB loopback CPU rows, small packets; fails unless every
    /// copy verified and the emulator came up and down cleanly. Asserts no speed ratio.
    #[arg(long)]
    quick: bool,
    /// Throughput against random loss, the seeds' Table 6 (MISSION.md) at three RTTs:
    /// 100 Mbit/s, RTT 30/100/300 ms, loss 0/0.1/1/3/5/7/10/15/20 %, soku, soku-tcp,
    /// qcp-tuned, scp and iperf3-bbr; the matrix alone, and one chart with a panel per
    /// RTT (`vs-loss-100mbit.svg`). Flags given as well take their place.
    #[arg(long, conflicts_with = "quick")]
    loss_sweep: bool,
    /// Output directory [default: bench/DATE in the cargo target directory this binary
    /// was built in, outside the source tree; quick: $TMPDIR/soku-bench-quick]. What is
    /// worth keeping goes to `lab/` by hand (see `lab/INDEX.md`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The soku binary [default: `soku` next to this executable].
    #[arg(long)]
    soku: Option<PathBuf>,
    /// A qcp binary to use instead of the pinned release the bench installs (under
    /// `bench-tools/` in this executable's target directory) when qcp rows are selected.
    #[arg(long)]
    qcp: Option<PathBuf>,
    /// Scratch dir for the files moved (RAM-backed by default).
    #[arg(long, default_value = "/dev/shm")]
    work: PathBuf,
    /// Size of the loopback CPU file [default: 1gib; quick: 256mib].
    #[arg(long)]
    cpu_size: Option<String>,
    /// Skip the emulated-path matrix.
    #[arg(long)]
    no_matrix: bool,
    /// Skip the loopback CPU rows.
    #[arg(long)]
    no_cpu: bool,
    /// Run the loopback CPU rows without warming memory first (see `cpu.rs`: on a
    /// virtual machine the first write to memory the host took back is slow).
    #[arg(long)]
    cold_memory: bool,
    /// Evict each loopback row's source file from the page cache before its copy, so the
    /// copy reads it from the disk (`posix_fadvise(DONTNEED)` on that file alone; pair it
    /// with `--work` on a real disk, the default work dir may be RAM).
    #[arg(long)]
    cold_cache: bool,
    /// Skip the small-packet test.
    #[arg(long)]
    no_smallpkt: bool,
    /// Skip the small-files section (a tree uploaded with -r by soku, rsync, scp, sftp).
    #[arg(long)]
    no_small_files: bool,
    /// Skip the sharing section (soku beside CUBIC and beside soku, `--background`;
    /// never in --quick).
    #[arg(long)]
    no_sharing: bool,
    /// Link rate of the sharing path.
    #[arg(long, default_value = "100mbit")]
    sharing_rate: String,
    /// RTT of the sharing path.
    #[arg(long, default_value = "50ms")]
    sharing_rtt: String,
    /// Random loss on the sharing path's data direction (`10%`, or a fraction).
    #[arg(long, default_value = "0")]
    sharing_loss: String,
    /// The sharing path's drop-tail queue on the data direction, in bandwidth-delay
    /// products (`0.25` for a shallow buffer).
    #[arg(long, default_value_t = 1.0)]
    sharing_queue_bdp: f64,
    /// How long the sharing runs measure, once every flow is past its start.
    #[arg(long, default_value = "30s")]
    sharing_window: String,
    /// Only these sharing cases, comma-separated (alone, background, cubic, soku-cubic,
    /// cubic-background, cubic-background-again, soku-soku, cubic-leaves-background,
    /// background-lower-min-rtt); all by default.
    #[arg(long, value_delimiter = ',',
          value_parser = clap::builder::PossibleValuesParser::new(sharing::CASES.map(|case| case.key)))]
    sharing_cases: Vec<String>,
    /// Also run the source-tree-like tree of the small-files section, with this many
    /// files (sizes log-normal around a 4 KiB median; e.g. 100000).
    #[arg(long)]
    source_tree: Option<usize>,
    /// Skip the 2000 x 8 KiB tree of the small-files section (e.g. to run only
    /// --source-tree).
    #[arg(long)]
    no_flat_tree: bool,
    /// Tools of the small-files section [default: soku,soku-next,rsync,scp,sftp,qcp,qcp-tuned;
    /// quick: soku,soku-next,rsync]; `soku-next` is a copy that shares the ssh login of one
    /// just before it; `qcp-tuned` is qcp with `--rx`/`--tx`/`--rtt` set to the small-files
    /// path and `--congestion bbr`.
    #[arg(long, value_delimiter = ',')]
    small_tools: Option<Vec<String>>,
    /// Another soku build in the small-files section, as `LABEL=PATH` (a `soku@LABEL`
    /// row, run in turn with the others each round: A/B runs of two builds). Repeatable.
    #[arg(long)]
    small_soku: Vec<String>,
    /// Link rate of the small-files path [default: 100mbit].
    #[arg(long, default_value = "100mbit")]
    small_rate: String,
    /// RTT of the small-files path [default: 100ms; quick: 50ms].
    #[arg(long)]
    small_rtt: Option<String>,
    /// A small-files run is killed after this long (and reported as a timeout).
    #[arg(long, default_value = "90s")]
    small_timeout: String,
    /// Free text for the setup notes (e.g. which commit the soku binary was built from).
    #[arg(long)]
    note: Option<String>,
    /// Prefix of the namespaces (`NAME-a`, `NAME-b`).
    #[arg(long, default_value = "skbench")]
    name: String,
}

/// The run plan after validation.
struct Plan {
    rates: Vec<u64>,
    rtts: Vec<Duration>,
    losses: Vec<f64>,
    tools: Vec<Tool>,
    duration: Duration,
    size: Option<u64>,
    loss_dir: LossDir,
    udp_rate: Option<u64>,
    out: PathBuf,
    soku: PathBuf,
    cpu_size: u64,
    exchanges: usize,
}

fn or<'a>(
    v: &'a Option<Vec<String>>,
    quick: bool,
    q: &'a [&'a str],
    full: &'a [&'a str],
) -> Vec<String> {
    match v {
        Some(v) => v.clone(),
        None => (if quick { q } else { full }).iter().map(|s| s.to_string()).collect(),
    }
}

/// What `--loss-sweep` runs where its flags are not given.
mod sweep {
    pub const RTTS: [&str; 3] = ["30", "100", "300"];
    pub const LOSSES: [&str; 9] = ["0", "0.1", "1", "3", "5", "7", "10", "15", "20"];
    pub const TOOLS: [&str; 5] = ["soku", "soku-tcp", "qcp-tuned", "scp", "iperf3-bbr"];
}

fn plan(a: &Args) -> anyhow::Result<Plan> {
    let q = a.quick;
    // The sweep's lists stand in for the full defaults.
    let all: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
    let (full_rates, full_rtts, full_losses, full_tools): (&[&str], &[&str], &[&str], &[&str]) =
        if a.loss_sweep {
            (&["100mbit"], &sweep::RTTS, &sweep::LOSSES, &sweep::TOOLS)
        } else {
            (
                &["100mbit", "1gbit"],
                &["0", "10", "50", "100", "200", "300"],
                &["0", "0.01", "0.1", "1", "3", "5"],
                &all,
            )
        };
    let rates = or(&a.rates, q, &["100mbit"], full_rates)
        .iter()
        .map(|s| soku_netem::parse_rate(s).map_err(anyhow::Error::from))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let rtts = or(&a.rtts, q, &["10", "50"], full_rtts)
        .iter()
        .map(|s| soku_netem::parse_duration(s).map_err(anyhow::Error::from))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let losses = or(&a.losses, q, &["0", "1"], full_losses)
        .iter()
        .map(|s| {
            let s = if s.ends_with('%') { s.clone() } else { format!("{s}%") };
            soku_netem::parse_percent(&s).map_err(anyhow::Error::from)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let tools =
        or(&a.tools, q, &["soku", "soku-tcp", "scp", "quinn-floor", "iperf3-bbr"], full_tools)
            .iter()
            .map(|s| Tool::parse(s))
            .collect::<anyhow::Result<Vec<_>>>()?;
    let dur = a.duration.clone().unwrap_or_else(|| if q { "6s" } else { "20s" }.into());
    let dur =
        if dur.chars().all(|c| c.is_ascii_digit() || c == '.') { format!("{dur}s") } else { dur };
    let duration = soku_netem::parse_duration(&dur)?;
    anyhow::ensure!(duration >= Duration::from_secs(1), "--duration below 1 s");
    let size = a.size.as_deref().map(soku_netem::parse_size).transpose()?.map(|s| s as u64);
    let loss_dir = match a.loss_dir.as_str() {
        "data" => LossDir::Data,
        "both" => LossDir::Both,
        o => anyhow::bail!("--loss-dir {o:?}: use data or both"),
    };
    let udp_rate = a.udp_rate.as_deref().map(soku_netem::parse_rate).transpose()?;
    let today = proc::capture(Command::new("date").arg("+%F")).unwrap_or_else(|_| "undated".into());
    let out = match &a.out {
        Some(o) => o.clone(),
        None if q => std::env::temp_dir().join("soku-bench-quick"),
        None => default_out(&std::env::current_exe()?, &today),
    };
    let soku = match &a.soku {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("soku"),
    };
    anyhow::ensure!(
        soku.is_file(),
        "{} not found: build it (CARGO_TARGET_DIR=/work/target-bench cargo build --release -p soku) or pass --soku",
        soku.display()
    );
    let soku = soku.canonicalize()?;
    let cpu_size = a.cpu_size.clone().unwrap_or_else(|| if q { "256mib" } else { "1gib" }.into());
    let cpu_size = soku_netem::parse_size(&cpu_size)? as u64;
    Ok(Plan {
        rates,
        rtts,
        losses,
        tools,
        duration,
        size,
        loss_dir,
        udp_rate,
        out,
        soku,
        cpu_size,
        exchanges: if q { 10 } else { 30 },
    })
}

fn log(s: &str) {
    eprintln!("{s}");
}

fn first_line(cmd: &mut Command) -> String {
    let out = cmd.output().map(|o| {
        let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
        s.push_str(&String::from_utf8_lossy(&o.stderr));
        s
    });
    out.ok().and_then(|s| s.lines().next().map(str::to_string)).unwrap_or_else(|| "?".into())
}

/// The setup notes: machine, kernel, versions, sysctls.
fn setup_notes(p: &Plan) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("?")
        .trim()
        .to_string();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem = meminfo.lines().next().unwrap_or("?").to_string();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let git = |args: &[&str]| {
        first_line(Command::new("git").arg("-C").arg(env!("CARGO_MANIFEST_DIR")).args(args))
    };
    let sysctl = |k: &str| first_line(Command::new("sysctl").args(["-n", k]));
    let mut s = String::new();
    let _ = writeln!(s, "- machine: {model}, {cores} cores, {mem}");
    let _ = writeln!(s, "- kernel: {}", first_line(Command::new("uname").args(["-srm"])));
    let _ = writeln!(s, "- OpenSSH: {}", first_line(Command::new("ssh").arg("-V")));
    let _ = writeln!(s, "- rsync: {}", first_line(Command::new("rsync").arg("--version")));
    let _ = writeln!(s, "- iperf3: {}", first_line(Command::new("iperf3").arg("--version")));
    let _ = writeln!(
        s,
        "- soku: {} ({})",
        first_line(Command::new(&p.soku).arg("--version")),
        p.soku.display()
    );
    let soku_mtime = first_line(Command::new("date").arg("-u").arg("-r").arg(&p.soku));
    let _ = writeln!(s, "- soku binary built: {soku_mtime}");
    let _ = writeln!(
        s,
        "- bench checkout: git {} ({} tracked files modified; the soku binary may come from elsewhere, see --note)",
        git(&["rev-parse", "--short", "HEAD"]),
        first_line(Command::new("sh").arg("-c").arg(format!(
            "git -C {} status --porcelain --untracked-files=no | wc -l",
            env!("CARGO_MANIFEST_DIR")
        )))
    );
    let _ = writeln!(
        s,
        "- host sysctls: tcp_congestion_control={}, rmem_max={}, wmem_max={}, tcp_wmem={}, tcp_rmem={}",
        sysctl("net.ipv4.tcp_congestion_control"),
        sysctl("net.core.rmem_max"),
        sysctl("net.core.wmem_max"),
        sysctl("net.ipv4.tcp_wmem"),
        sysctl("net.ipv4.tcp_rmem")
    );
    // Every soku row runs with a config directory of its own (tools::soku_homes), so only
    // a system-wide file could change soku's defaults.
    let system_config = std::path::Path::new("/etc/soku/config.toml");
    let _ = writeln!(
        s,
        "- soku config files: none of the user's (each run has its own XDG_CONFIG_HOME); {} {}",
        system_config.display(),
        if system_config.exists() {
            "EXISTS and applies: runs are not at default settings"
        } else {
            "absent"
        }
    );
    let _ = writeln!(
        s,
        "- in the emulated paths' namespaces: tcp_rmem and tcp_wmem maximum raised to {} (bench/src/matrix.rs: the TCP ceiling needs room for 1 Gbit/s x 300 ms); everything else as in a fresh namespace",
        matrix::TCP_BUFFER_MAX
    );
    s
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.loss_sweep {
        args.no_cpu = true;
        args.no_smallpkt = true;
        args.no_small_files = true;
        args.no_sharing = true;
    }
    match run(&args) {
        Ok(problems) if problems.is_empty() => ExitCode::SUCCESS,
        Ok(problems) => {
            log("\nFAILED sanity checks:");
            for p in problems {
                log(&format!("  - {p}"));
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            log(&format!("soku-bench: error: {e:#}"));
            ExitCode::from(2)
        }
    }
}

/// Runs the plan; returns the sanity problems found (empty = pass).
fn run(args: &Args) -> anyhow::Result<Vec<String>> {
    let p = plan(args)?;
    std::fs::create_dir_all(&p.out).with_context(|| format!("creating {}", p.out.display()))?;
    let work = tempfile::Builder::new().prefix("soku-bench-").tempdir_in(&args.work)?;
    let started = Instant::now();
    let cmdline = std::env::args().collect::<Vec<_>>().join(" ");
    let load_start = proc::loadavg();
    let date_start = matrix::now_utc();
    let mut problems = Vec::new();
    let mut md = String::new();
    let _ = writeln!(md, "# soku-bench results, {date_start}\n");
    let _ = writeln!(md, "Command: `{cmdline}`\n");
    md.push_str(&setup_notes(&p));
    // qcp's rows need its binary: found or installed once, here; without it they are
    // reported as skipped and the rest runs.
    let not_selected: Result<qcp::Qcp, String> = Err("not selected".into());
    // Only the matrix and the loopback rows run qcp.
    let runs_qcp = !(args.no_matrix && args.no_cpu) && p.tools.iter().any(|t| t.is_qcp());
    let qcp = runs_qcp.then(|| qcp::ensure(args.qcp.as_deref(), &log));
    match &qcp {
        Some(Ok(q)) => {
            let conf = qcp::config_files_present(q);
            let _ = writeln!(
                md,
                "- qcp: {} ({}, {}); its config files present: {}",
                q.version,
                q.bin.display(),
                q.origin,
                if conf.is_empty() {
                    "none (built-in defaults)".to_string()
                } else {
                    conf.join(", ")
                }
            );
        }
        Some(Err(why)) => {
            log(&format!("qcp rows will be skipped: {why}"));
            let _ = writeln!(md, "- qcp: not available, its rows are skipped: {why}");
        }
        None => {}
    }
    if let Some(note) = &args.note {
        let _ = writeln!(md, "- note: {note}");
    }

    let mut rows: Vec<Row> = Vec::new();
    let mut series: Vec<(usize, Samples)> = Vec::new();
    if !args.no_matrix {
        let mopts = MatrixOpts {
            soku: &p.soku,
            tools: &p.tools,
            duration: p.duration,
            name: &args.name,
            work: work.path(),
            repeat: args.repeat,
            qcp: qcp.as_ref().unwrap_or(&not_selected),
            udp_rate_bps: p.udp_rate,
        };
        for &rate in &p.rates {
            let size = matrix::file_size(rate, p.duration, p.size);
            let src = matrix::source_for(work.path(), size)?;
            for &rtt in &p.rtts {
                for &loss in &p.losses {
                    let sc = Scenario { rate_bps: rate, rtt, loss, loss_dir: p.loss_dir };
                    log(&format!(
                        "{} Mbit/s, RTT {} ms, loss {} % ({}){}, {} MB file, load {:.2}",
                        rate / 1_000_000,
                        rtt.as_millis(),
                        matrix::percent(loss),
                        p.loss_dir.name(),
                        p.udp_rate.map_or(String::new(), |r| format!(
                            ", UDP policed to {} Mbit/s",
                            r as f64 / 1e6
                        )),
                        size / 1_000_000,
                        proc::loadavg()
                    ));
                    match matrix::run_scenario(&sc, &mopts, &src, &log) {
                        Ok(r) => {
                            problems.extend(r.problems);
                            let first = rows.len();
                            series.extend(r.series.into_iter().map(|(i, s)| (first + i, s)));
                            rows.extend(r.rows);
                        }
                        Err(e) => problems.push(format!("{sc:?}: {e:#}")),
                    }
                    // Partial results survive an interrupted matrix.
                    report::write(&p.out, "results.csv", &report::matrix_csv(&rows))?;
                }
            }
            let _ = std::fs::remove_file(&src.path);
        }
        for r in &rows {
            let bad = match &r.m.status {
                Status::Ok => None,
                Status::Failed(m) if m.contains("hash") || m.contains("size") => {
                    Some(format!("DATA: {m}"))
                }
                // Said in the tables and the run notes; not a failure of the bench.
                Status::Skipped(_) => None,
                s if args.quick => Some(s.to_string()),
                _ => None,
            };
            if let Some(b) = bad {
                let sc = r.scenario;
                problems.push(format!(
                    "{} at {} Mbit/s RTT {} ms loss {} %: {b}; command: {}",
                    r.tool,
                    sc.rate_bps / 1_000_000,
                    sc.rtt.as_millis(),
                    sc.loss_pct(),
                    r.command
                ));
            }
        }
        write_matrix_outputs(&p, &rows, &series, &mut md)?;
    }

    if !args.no_cpu {
        log(&format!("loopback CPU rows, {} MiB", p.cpu_size >> 20));
        let load0 = proc::loadavg();
        let plan = cpu::CpuPlan {
            soku: &p.soku,
            work: work.path(),
            size: p.cpu_size,
            rounds: args.repeat,
            warm: !args.cold_memory,
            cold_cache: args.cold_cache,
            qcp: qcp.as_ref(),
        };
        let rows = cpu::run(&plan, &log)?;
        for r in &rows {
            if r.m.status != Status::Ok && !matches!(r.m.status, Status::Skipped(_)) {
                problems.push(format!(
                    "loopback {} ({}): {}; command: {}",
                    r.label, r.data, r.m.status, r.command
                ));
            }
        }
        let (csv, table) = report::cpu_outputs(&rows);
        report::write(&p.out, "cpu.csv", &csv)?;
        let _ = writeln!(
            md,
            "\n## Loopback CPU efficiency ({} MiB random file, `-C` rows {} MiB; load {load0:.2} -> {:.2})\n\n\
             Wall time includes login. CPU = user + system of each side's process tree \
             (client: the tool and its ssh; server: sshd session + sftp-server, soku serve or qcp --server). \
             `{}`: the least soku's rows could cost here: the same file through soku's own QUIC endpoints, \
             read and hashed as soku's sender does, hashed, checked and written as soku's receiver does; \
             no ssh, no manifest (client and server columns: its sending and receiving sides; `src/floor.rs`).\n\n{table}",
            p.cpu_size >> 20,
            p.cpu_size >> 22,
            proc::loadavg(),
            cpu::FLOOR_LABEL
        );
    }

    if !args.no_smallpkt {
        log("small-packet test, RTT 10 ms");
        let name = format!("{}sp", args.name);
        match smallpkt::run(&name, Duration::from_millis(10), p.exchanges) {
            Ok(rows) => {
                let (csv, table) = report::small_outputs(&rows);
                report::write(&p.out, "smallpkt.csv", &csv)?;
                log(&table);
                let _ = writeln!(
                    md,
                    "\n## Small packets: request/response over TCP, emulated 10 ms RTT, 100 Mbit/s\n\n\
                     Client in namespace A writes a 4-byte length and the payload, server in B \
                     reads it whole and replies with one write of the same size; time per exchange \
                     from the first write to the last reply byte, {} exchanges per size after 2 \
                     warm-ups. `one-write` is soku's framing discipline (length and payload in one \
                     buffer, Nagle left on); soku's own control channel is not timed here.\n\n{table}",
                    p.exchanges
                );
            }
            Err(e) => problems.push(format!("small-packet test: {e:#}")),
        }
    }

    if !args.no_small_files {
        match small_files(args, &p, work.path(), &mut md) {
            Ok(found) => problems.extend(found),
            Err(e) => problems.push(format!("small files: {e:#}")),
        }
    }

    if !args.no_sharing && !args.quick {
        match sharing(args, &p, work.path(), &mut md) {
            Ok(found) => problems.extend(found),
            Err(e) => problems.push(format!("sharing: {e:#}")),
        }
    }

    let skipped = match &qcp {
        Some(Err(why)) => format!("- skipped: the qcp rows ({why})\n"),
        _ => String::new(),
    };
    let _ = writeln!(
        md,
        "\n## Run\n\n- started {date_start}, took {:.0} s; load average (1 min) {load_start:.2} at start, {:.2} at end (per-run values in results.csv)\n- sanity: {}",
        started.elapsed().as_secs_f64(),
        proc::loadavg(),
        if problems.is_empty() { "all copies verified, emulator up/down clean".to_string() } else { problems.join("; ") }
    );
    md.push_str(&skipped);
    if !skipped.is_empty() {
        log(skipped.trim_end());
    }
    report::write(&p.out, "README.md", &md)?;
    log(&format!("\nwrote {} (took {:.0} s)", p.out.display(), started.elapsed().as_secs_f64()));
    Ok(problems)
}

fn write_matrix_outputs(
    p: &Plan,
    rows: &[Row],
    series: &[(usize, Samples)],
    md: &mut String,
) -> anyhow::Result<()> {
    report::write(&p.out, "results.csv", &report::matrix_csv(rows))?;
    let sizes: Vec<String> = p
        .rates
        .iter()
        .map(|&r| {
            format!(
                "{} MB at {} Mbit/s",
                matrix::file_size(r, p.duration, p.size) / 1_000_000,
                r / 1_000_000
            )
        })
        .collect();
    let _ = writeln!(
        md,
        "\n## Emulated paths\n\nEvery copy is an upload A -> B of one random file ({}), timed as the \
         wall time of the whole command, login included, and counted only if the target's size and \
         BLAKE3 hash match. iperf3 runs {} s of data (connection setup excluded): the TCP ceiling.{} \
         Loss applies to {}. Queue: drop-tail, 1 BDP. `ip tcp_metrics flush all` in both namespaces \
         before every run. Default settings for every tool; no per-scenario flags{}. A run is killed \
         after 3x its expected time + 30 s (\"timeout\", with the % that arrived by then).\n",
        sizes.join(", "),
        p.duration.as_secs(),
        if p.tools.contains(&Tool::QuinnFloor) {
            " quinn-floor is soku's transport alone (`soku-floor`, one side per namespace: \
             soku's endpoints and congestion controller, no ssh, no session), timed from its \
             connection's start to the last chunk acknowledged; it moves the file's whole MiBs, \
             checked against the source."
        } else {
            ""
        },
        if p.loss_dir == LossDir::Data { "the data direction A->B only (ACKs are not lost)" } else { "both directions" },
        if p.tools.contains(&Tool::QcpTuned) {
            " except in `qcp-tuned` (`--rx`/`--tx` the link rate, `--rtt` the path RTT, `--congestion bbr`)"
        } else {
            ""
        }
    );
    if let Some(rate) = p.udp_rate {
        let _ = writeln!(
            md,
            "\nUDP is policed to {} Mbit/s per direction on every path (a token bucket 20 ms \
             deep, the excess dropped; TCP untouched).",
            rate as f64 / 1e6
        );
    }
    if p.rates.contains(&1_000_000_000) {
        md.push_str(
            "\n1 Gbit/s rows are CPU-bound lower bounds for every tool: the emulator alone costs \
             about 0.9 of a core at 1 Gbit/s on this 2-core machine.\n",
        );
    }
    md.push_str(&report::matrix_tables(rows, report::Basis::Whole));
    if rows.iter().any(|r| r.login.is_some()) {
        md.push_str(
            "\nThe same runs with each path's ssh login taken out of the copies' time (the \
             median of three `ssh HOST true` before the runs, `login_s` in `results.csv`): \
             what each tool does once logged in, beside iperf3, whose figure leaves out its \
             set-up. soku's own set-up (its server, hellos, QUIC or TLS handshakes) stays in; \
             soku-next, which opens a session on the login of the copy before it, keeps \
             its whole time.\n",
        );
        md.push_str(&report::matrix_tables(rows, report::Basis::AfterLogin));
    }
    if rows.iter().any(|r| r.copy_seconds().is_some()) {
        md.push_str(
            "\nThe copy alone, for the tools that tell it (soku's `--json` events, from its \
             first data connection to the verified last byte: no login, no set-up; a move \
             to another transport stays in), beside the ceiling: soku-netem spends link \
             time on the packets it loses, so at loss p at most (1 - p) of the link's rate \
             arrives, and headers come off that too (a 1500-byte packet carries 1440 bytes \
             of a file over QUIC, 1448 over TCP). `copy_s` and `pct_of_link_copy` in \
             `results.csv`.\n",
        );
        md.push_str(&report::matrix_tables(rows, report::Basis::Copy));
    }
    let charts = report::matrix_charts(rows);
    if !charts.is_empty() {
        md.push_str("\n### Charts\n\n");
    }
    for (name, svg) in &charts {
        report::write(&p.out, name, svg)?;
        let _ = writeln!(md, "- [{name}]({name})");
    }
    // Table 3: the path with the most tools, prefer 50 ms and 1 %.
    let pick = rows
        .iter()
        .max_by_key(|r| {
            let ms = r.scenario.rtt.as_millis() as i64;
            (
                rows.iter().filter(|x| same_path(x, r)).count(),
                -(ms - 50).abs(),
                (r.scenario.loss * 1e6) as i64 == 10_000,
            )
        })
        .map(|r| r.scenario);
    if let Some(sc) = pick {
        let sel: Vec<&Row> = rows
            .iter()
            .filter(|x| {
                x.scenario.rate_bps == sc.rate_bps
                    && x.scenario.rtt == sc.rtt
                    && x.scenario.loss == sc.loss
            })
            .collect();
        md.push_str(&report::one_path_table(&sel));
    }
    let ts_dir = p.out.join("timeseries");
    std::fs::create_dir_all(&ts_dir)?;
    // The README shows one series: the first at 50 ms with 1 % loss, else the first.
    let mut chosen: Option<(String, bool)> = None;
    for (i, samples) in series {
        let r = &rows[*i];
        let sc = r.scenario;
        let stem = format!(
            "{}-{}mbit-rtt{}ms-loss{}",
            r.tool,
            sc.rate_bps / 1_000_000,
            sc.rtt.as_millis(),
            sc.loss_pct()
        );
        let (csv, svg) = report::timeseries(r, samples);
        report::write(&ts_dir, &format!("{stem}.csv"), &csv)?;
        report::write(&ts_dir, &format!("{stem}.svg"), &svg)?;
        let events: String =
            r.m.stderr.iter().map(|(t, l)| format!("{:.3} {l}\n", t.as_secs_f64())).collect();
        report::write(&ts_dir, &format!("{stem}.stderr"), &events)?;
        let preferred = sc.rtt == Duration::from_millis(50) && (sc.loss_pct() - 1.0).abs() < 1e-9;
        if chosen.as_ref().is_none_or(|(_, was)| preferred && !was) {
            chosen = Some((stem, preferred));
        }
    }
    if let Some((stem, _)) = chosen {
        let _ = writeln!(
            md,
            "\n### soku over time (Table 7)\n\n![](timeseries/{stem}.svg)\n\nGoodput from soku's \
             `--json` `verified` events (receiver-verified bytes, stamped as the client read them), \
             and the emulator's delivered IP bytes and loss drops A->B, in 500 ms bins: \
             [timeseries/{stem}.csv](timeseries/{stem}.csv). Every soku run has its series in `timeseries/`."
        );
    }
    Ok(())
}

fn same_path(a: &Row, b: &Row) -> bool {
    a.scenario.rate_bps == b.scenario.rate_bps
        && a.scenario.rtt == b.scenario.rtt
        && a.scenario.loss == b.scenario.loss
}

/// The sharing section: flows side by side on one emulated bottleneck.
fn sharing(args: &Args, p: &Plan, work: &Path, md: &mut String) -> anyhow::Result<Vec<String>> {
    let rate_bps = soku_netem::parse_rate(&args.sharing_rate)?;
    let rtt = soku_netem::parse_duration(&args.sharing_rtt)?;
    let window = soku_netem::parse_duration(&args.sharing_window)?;
    let opts = sharing::SharingOpts {
        name: &format!("{}sh", args.name),
        soku: &p.soku,
        work,
        out: &p.out,
        rate_bps,
        rtt,
        loss: soku_netem::parse_percent(&args.sharing_loss)?,
        queue_bdp: args.sharing_queue_bdp,
        // Login and startup behind every flow: the last starts 2 s after the first
        // began to move data (after soku's login, 1.5-1.7 s at 100 ms).
        warm: Duration::from_secs(8) + rtt * 20,
        window,
        only: &args.sharing_cases,
    };
    let (rows, problems) = sharing::run(&opts, &log)?;
    let _ = writeln!(
        md,
        "\n## Sharing a bottleneck: {} Mbit/s x {} ms, a drop-tail queue of {} BDP, {}\n\n\
         Each case starts a flow 2 s after the one before began to move data (soku's \
         `connected` event; soku uploads of a file too large to finish, \
         iperf3 -C cubic) and measures every flow's goodput over the same {} s once all are \
         past their start ({} s after the first began): soku's from its `verified` events, \
         iperf3's from its per-second intervals. Every soku copy starts from an empty path \
         memory, but in the remembered cases. `sharing/` keeps each flow's own report.\n\n{}",
        rate_bps / 1_000_000,
        rtt.as_millis(),
        opts.queue_bdp,
        if opts.loss > 0.0 {
            format!("{} % random loss on the data direction", matrix::percent(opts.loss))
        } else {
            "no loss".to_string()
        },
        window.as_secs(),
        opts.warm.as_secs(),
        sharing::table(&rows)
    );
    report::write(&p.out, "sharing.csv", &sharing_csv(&rows))?;
    Ok(problems)
}

fn sharing_csv(rows: &[sharing::SharingRow]) -> String {
    let mut s = String::from("case,flow,index,goodput_mbit_s,note\n");
    for r in rows {
        for (i, (label, rate)) in r.flows.iter().enumerate() {
            let (m, note) = match rate {
                Ok(m) => (format!("{m:.2}"), String::new()),
                Err(e) => (String::new(), e.replace(',', ";")),
            };
            let _ = writeln!(s, "{},{label},{i},{m},{note}", r.case.replace(',', ";"));
        }
    }
    s
}

fn small_files(args: &Args, p: &Plan, work: &Path, md: &mut String) -> anyhow::Result<Vec<String>> {
    use smallfiles::{SmallTool, TreeKind};
    let q = args.quick;
    let mut trees = Vec::new();
    if !args.no_flat_tree {
        trees.push(if q {
            TreeKind::Flat { files: 200, size: 8192, dirs: 4 }
        } else {
            TreeKind::Flat { files: 2000, size: 8192, dirs: 20 }
        });
    }
    if let Some(files) = args.source_tree {
        trees.push(TreeKind::Source { files });
    }
    let names = or(
        &args.small_tools,
        q,
        &["soku", "soku-next", "rsync"],
        &["soku", "soku-next", "rsync", "scp", "sftp", "qcp", "qcp-tuned"],
    );
    let mut tools = Vec::new();
    // qcp's binary, found or installed once for both of its rows.
    let mut found_qcp: Option<Result<qcp::Qcp, String>> = None;
    for name in names {
        let qcp = if SmallTool::is_qcp_name(&name) {
            match found_qcp.get_or_insert_with(|| qcp::ensure(args.qcp.as_deref(), &log)) {
                Ok(q) => q.bin.clone(),
                Err(why) => {
                    log(&format!("small files: no {name} row ({why})"));
                    continue;
                }
            }
        } else {
            PathBuf::new()
        };
        let tool = SmallTool::from_name(&name, &p.soku, &qcp).with_context(|| {
            format!("--small-tools: unknown tool {name:?} ({})", smallfiles::NAMES.join(", "))
        })?;
        tools.push(tool);
    }
    for extra in &args.small_soku {
        let (label, path) = extra
            .split_once('=')
            .with_context(|| format!("--small-soku {extra:?}: use LABEL=PATH"))?;
        let binary = Path::new(path).canonicalize().with_context(|| path.to_string())?;
        // After the first soku, so each round alternates the builds.
        let at =
            tools.iter().position(|t| matches!(t, SmallTool::Soku { .. })).map_or(0, |i| i + 1);
        let label = format!("soku@{label}");
        tools.insert(at, SmallTool::Soku { label, binary, shared_login: false });
    }
    let rtt = args.small_rtt.clone().unwrap_or_else(|| if q { "50" } else { "100" }.into());
    let rtt = if rtt.chars().all(|c| c.is_ascii_digit()) { format!("{rtt}ms") } else { rtt };
    let timeout = args.small_timeout.clone();
    let timeout =
        if timeout.chars().all(|c| c.is_ascii_digit()) { format!("{timeout}s") } else { timeout };
    let (rate_bps, rtt) =
        (soku_netem::parse_rate(&args.small_rate)?, soku_netem::parse_duration(&rtt)?);
    // What the qcp rows ran: its version, and qcp-tuned's options.
    let mut qcp_note = String::new();
    if let Some(Ok(q)) = &found_qcp {
        let _ = write!(qcp_note, " The qcp rows ran {} ({})", q.version, q.origin);
        match tools.iter().find(|t| t.label() == "qcp-tuned") {
            Some(t) => {
                let _ = write!(
                    qcp_note,
                    "; `qcp-tuned` is `qcp -r` hand-tuned to this path: `{}`.",
                    t.tuning(rate_bps, rtt).join(" ")
                );
            }
            None => qcp_note.push('.'),
        }
    }
    let o = smallfiles::SmallOpts {
        trees: &trees,
        tools: &tools,
        rate_bps,
        rtt,
        repeat: args.repeat,
        timeout: soku_netem::parse_duration(&timeout)?,
        name: &format!("{}sf", args.name),
        work,
        out: &p.out,
    };
    let load0 = proc::loadavg();
    let (rows, problems) = smallfiles::run(&o, &log)?;
    let (csv, table) = smallfiles::outputs(&rows);
    report::write(&p.out, "small-files.csv", &csv)?;
    log(&table);
    let _ = writeln!(
        md,
        "\n## Many small files (load {load0:.2} -> {:.2})\n\n\
         Upload A -> B of a generated tree into an existing directory, over one emulated \
         path per tree: `soku -r`, `rsync -a`, `scp -r`, `sftp` with `put -r`, `qcp -r`, \
         default settings otherwise.{qcp_note} Wall time of the whole command, login \
         included; a run counts only if every file at the target has the source's size and \
         BLAKE3 and there is no other file. Runs are killed after {} s (`timeout`, with the \
         files that had arrived). soku's event stream of its first run per tree is in \
         `small-files/`.\n{table}",
        proc::loadavg(),
        o.timeout.as_secs()
    );
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(args: &[&str]) -> Plan {
        let argv = ["soku-bench", "--soku", "/bin/sh"].iter().chain(args);
        plan(&Args::try_parse_from(argv).expect("arguments")).expect("plan")
    }

    #[test]
    fn the_loss_sweep_runs_the_seeds_table_6_at_three_rtts() {
        let p = plan_of(&["--loss-sweep"]);
        assert_eq!(p.rates, [100_000_000]);
        assert_eq!(p.rtts.iter().map(|d| d.as_millis()).collect::<Vec<_>>(), [30, 100, 300]);
        let losses: Vec<f64> = p.losses.iter().map(|l| (l * 1000.0).round() / 10.0).collect();
        assert_eq!(losses, [0.0, 0.1, 1.0, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0]);
        let tools: Vec<&str> = p.tools.iter().map(|t| t.name()).collect();
        assert_eq!(tools, ["soku", "soku-tcp", "qcp-tuned", "scp", "iperf3-bbr"]);
        // A flag given keeps its place.
        let p = plan_of(&["--loss-sweep", "--rtts", "50", "--tools", "soku"]);
        assert_eq!(p.rtts.iter().map(|d| d.as_millis()).collect::<Vec<_>>(), [50]);
        assert_eq!(p.tools.len(), 1);
        assert_eq!(p.losses.len(), 9);
    }
}
