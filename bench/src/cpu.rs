//! CPU efficiency on loopback: soku and scp with each cipher, and `-C` on random and
//! compressible data; qcp with its defaults and tuned, when selected. sshd listens on
//! 127.0.0.1; no emulator, no namespaces.
//!
//! Memory is warmed before every copy (unless `--cold-memory`): on this KVM guest the
//! first write to guest memory the host has taken back (the balloon's free-page
//! reporting) is slow: `dd` of 1 GiB into /dev/shm ran at 0.7 GB/s on cold memory and
//! 2.7-2.9 GB/s right after another 1 GiB was written and freed. The copy's target file
//! is such fresh memory, so without the warm-up each row's figure carries up to ~1.4 s
//! per GiB of a hypervisor effect that depends on what ran before it. Writing and
//! deleting a scratch file of twice the copy's size just before the copy gives each
//! tool the same recently-freed memory.
//!
//! Client CPU is the whole client process tree (scp + its ssh; soku + its ssh), server
//! CPU everything the sshd session ran (sshd session processes + sftp-server,
//! `soku serve` or `qcp --server`), both user + system, from `/proc` (see [`crate::proc`]).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::proc;
use crate::sshd;
use crate::tools::{self, Endpoint, Measured, SourceFile, Status, Tool};

/// One loopback run.
#[derive(Debug)]
pub struct CpuRow {
    /// Round (1-based) of `--repeat`.
    pub round: u32,
    /// Label: tool and options.
    pub label: String,
    /// Data: `random` or `text`, and its size.
    pub data: String,
    /// Result.
    pub m: Measured,
    /// Command line.
    pub command: String,
}

impl CpuRow {
    /// MB/s (10^6 bytes), wall time incl. login.
    pub fn mbs(&self) -> f64 {
        self.m.bytes as f64 / self.m.seconds / 1e6
    }

    /// CPU seconds per GB (10^9 bytes) moved: (client, server).
    pub fn cpu_per_gb(&self) -> (f64, f64) {
        let gb = self.m.bytes as f64 / 1e9;
        (self.m.client_cpu / gb, self.m.server_cpu / gb)
    }
}

/// How the loopback rows run.
pub struct CpuPlan<'a> {
    /// The soku binary.
    pub soku: &'a Path,
    /// Scratch directory (RAM-backed by default).
    pub work: &'a Path,
    /// Size of the random file; the `-C` rows use a quarter of it (scp -C runs at a
    /// tenth of the speed).
    pub size: u64,
    /// Rounds of the whole plan (its order alternates the tools).
    pub rounds: u32,
    /// Warm memory before each copy (see the module's documentation).
    pub warm: bool,
    /// Evict the source from the page cache before each copy ([`evict_from_cache`]).
    pub cold_cache: bool,
    /// With `Some`, two qcp rows on the random file: its defaults, and tuned for
    /// loopback ([`crate::qcp::tuning`] of no link); `Err` is why they are skipped.
    pub qcp: Option<&'a Result<crate::qcp::Qcp, String>>,
}

/// Writes and deletes `bytes` of zeros under `dir`, so that the next allocations of
/// that much memory get pages the guest has just freed (see the module's documentation).
fn warm_memory(dir: &Path, bytes: u64) -> std::io::Result<()> {
    use std::io::Write;
    let path = dir.join("cpu-warm-up");
    let zeros = vec![0u8; 1 << 20];
    let mut file = std::fs::File::create(&path)?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    drop(file);
    std::fs::remove_file(&path)
}

/// Drops `path`'s pages from the page cache, so the next read of it comes from the disk:
/// written back first (the kernel keeps dirty pages), then `POSIX_FADV_DONTNEED` on the
/// whole file. Only this file's pages go; nothing else on the machine is touched.
fn evict_from_cache(path: &Path) -> std::io::Result<()> {
    let file = std::fs::File::open(path)?;
    file.sync_all()?;
    rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)?;
    Ok(())
}

/// Runs the loopback rows, `plan.rounds` times over.
pub fn run(plan: &CpuPlan<'_>, log: &dyn Fn(&str)) -> anyhow::Result<Vec<CpuRow>> {
    let (work, size) = (plan.work, plan.size);
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let sshd = sshd::start(Command::new("/usr/sbin/sshd"), std::net::Ipv4Addr::LOCALHOST, port)?;
    let cc = proc::capture(Command::new("sysctl").args(["-n", "net.ipv4.tcp_congestion_control"]))
        .unwrap_or_default();
    let client = |p: &str| Command::new(p);
    let no_qcp = Err("not selected".to_string());
    let qcp = plan.qcp.unwrap_or(&no_qcp);
    let memory = tempfile::Builder::new().prefix("soku-bench-memory-").tempdir()?;
    let ep = Endpoint {
        client: &client,
        sshd: &sshd,
        soku: plan.soku,
        tcp_cc: &cc,
        qcp,
        memory: memory.path(),
    };
    let random = SourceFile::create(&work.join("cpu-random"), size, false)?;
    let small = size / 4;
    let random_c = SourceFile::create(&work.join("cpu-random-c"), small, false)?;
    let text_c = SourceFile::create(&work.join("cpu-text-c"), small, true)?;
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let copy = |tool, extra: &[&str], src, data| Planned::Copy(tool, s(extra), src, data);
    let mut rows_to_run: Vec<Planned<'_>> = vec![
        copy(Tool::Scp, &["-c", "aes128-gcm@openssh.com"], &random, "random"),
        copy(Tool::Scp, &["-c", "chacha20-poly1305@openssh.com"], &random, "random"),
        copy(Tool::Scp, &["-c", "aes128-ctr"], &random, "random"),
        copy(Tool::Soku, &["-c", "aes128-gcm"], &random, "random"),
        copy(Tool::Soku, &["-c", "aes256-gcm"], &random, "random"),
        copy(Tool::Soku, &["-c", "chacha20-poly1305"], &random, "random"),
        copy(Tool::Soku, &[], &random, "random"),
        Planned::Floor(&random),
        copy(Tool::Scp, &[], &random, "random"),
        copy(Tool::Scp, &[], &random_c, "random"),
        copy(Tool::Scp, &["-C"], &random_c, "random"),
        copy(Tool::Scp, &["-C"], &text_c, "text"),
        copy(Tool::Scp, &[], &text_c, "text"),
        copy(Tool::Soku, &[], &random_c, "random"),
        copy(Tool::Soku, &["-C"], &random_c, "random"),
        copy(Tool::Soku, &["-C"], &text_c, "text"),
        copy(Tool::Soku, &[], &text_c, "text"),
    ];
    if plan.qcp.is_some() {
        // After soku's default row and its floor, before scp's: the plan alternates
        // the tools.
        let at = rows_to_run
            .iter()
            .position(|r| matches!(r, Planned::Floor(_)))
            .map_or(rows_to_run.len(), |i| i + 1);
        rows_to_run.insert(at, copy(Tool::Qcp, &[], &random, "random"));
        let tuned = Planned::Copy(Tool::QcpTuned, crate::qcp::tuning(None), &random, "random");
        rows_to_run.insert(at + 1, tuned);
    }
    let mut rows = Vec::new();
    for round in 1..=plan.rounds {
        for planned in &rows_to_run {
            let src = planned.source();
            if plan.warm {
                warm_memory(work, 2 * src.size)?;
            }
            if plan.cold_cache {
                evict_from_cache(&src.path)?;
            }
            let row = match planned {
                Planned::Copy(tool, extra, src, data) => {
                    run_row(&ep, *tool, extra, src, data, work, round)?
                }
                Planned::Floor(src) => floor_row(src, work, round)?,
            };
            if let Status::Skipped(why) = &row.m.status {
                log(&format!("  {:<40} {:<15} skipped: {why}", row.label, row.data));
                rows.push(row);
                continue;
            }
            let (c, sv) = row.cpu_per_gb();
            log(&format!(
                "  {:<40} {:<15} {:>7.1} MB/s  CPU s/GB client {:>5.2} server {:>5.2}  {}",
                row.label,
                row.data,
                row.mbs(),
                c,
                sv,
                row.m.status
            ));
            rows.push(row);
        }
    }
    for f in [&random, &random_c, &text_c] {
        let _ = std::fs::remove_file(&f.path);
    }
    Ok(rows)
}

/// A row of the plan.
enum Planned<'s> {
    /// A copy of a source by a tool, with these options, of this kind of data.
    Copy(Tool, Vec<String>, &'s SourceFile, &'static str),
    /// The floor row, sending this source ([`floor_row`]).
    Floor(&'s SourceFile),
}

impl<'s> Planned<'s> {
    /// The file the row sends.
    fn source(&self) -> &'s SourceFile {
        match self {
            Planned::Copy(_, _, src, _) | Planned::Floor(src) => src,
        }
    }
}

/// The label of the floor row.
pub const FLOOR_LABEL: &str = "quinn floor (soku-floor)";

/// The floor row: `soku-floor` (`src/floor.rs`, built beside this binary) sends `src`
/// over loopback through soku's own QUIC endpoints, reading and hashing each chunk as
/// soku's sender does; its receiver takes BLAKE3, checks it and writes the chunk into
/// `work` as soku would (`--direct`). No ssh, no manifest, no session: what quinn and
/// the work every byte needs cost, the least soku's rows beside it could cost. Its
/// client and server columns are its sending and receiving runtimes' CPU.
fn floor_row(src: &SourceFile, work: &Path, round: u32) -> anyhow::Result<CpuRow> {
    let size = src.size;
    let data = format!("random {} MiB", size >> 20);
    let floor = crate::floor_path::binary()?;
    let target = work.join("cpu-floor");
    let mib = (size >> 20).max(1).to_string();
    let mut cmd = Command::new(&floor);
    cmd.args(["--csv", "--direct", "--work", "write", "--mib", &mib, "--from"]).arg(&src.path);
    cmd.arg("--target").arg(&target);
    let command = format!("{cmd:?}");
    let m = if !floor.exists() {
        tools::skipped("soku-floor is not built beside soku-bench")
    } else {
        // As generous as a copy's row: 10 MB/s plus a minute.
        let out = proc::run(cmd, Duration::from_secs(size / 10_000_000 + 60));
        let _ = std::fs::remove_file(&target);
        let out = out?;
        let fields: Vec<f64> =
            out.stdout.trim().split(',').filter_map(|f| f.parse().ok()).collect();
        let ok = out.status.is_some_and(|s| s.success());
        match fields[..] {
            _ if out.timed_out() => {
                tools::Measured { status: Status::Timeout, ..tools::skipped("") }
            }
            [seconds, sender, receiver] if ok => tools::Measured {
                cc: "soku-cc".into(),
                bytes: (size >> 20).max(1) << 20,
                seconds,
                status: Status::Ok,
                client_cpu: sender,
                server_cpu: receiver,
                ..tools::skipped("")
            },
            _ => {
                let why = format!("soku-floor: {}", out.stderr_tail(3));
                tools::Measured { status: Status::Failed(why), ..tools::skipped("") }
            }
        }
    };
    Ok(CpuRow { round, label: FLOOR_LABEL.into(), data, m, command })
}

/// One copy of `src`, logged as it ends.
fn run_row(
    ep: &Endpoint<'_>,
    tool: Tool,
    extra: &[String],
    src: &SourceFile,
    data: &str,
    work: &Path,
    round: u32,
) -> anyhow::Result<CpuRow> {
    // Generous: 10 MB/s plus login.
    let timeout = Duration::from_secs(src.size / 10_000_000 + 60);
    let (m, command) = tools::run_copy(tool, ep, src, &work.join("dst"), extra, timeout)?;
    let label = if extra.is_empty() {
        format!("{tool} (default)")
    } else {
        format!("{tool} {}", extra.join(" "))
    };
    let data = format!("{data} {} MiB", src.size >> 20);
    let row = CpuRow { round, label, data, m, command };
    Ok(row)
}
