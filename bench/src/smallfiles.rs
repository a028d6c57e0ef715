//! Many small files: a generated tree uploaded with `-r` (soku, `rsync -a`, `scp -r`,
//! `sftp put -r`) over one emulated path, wall clock including login, every file's
//! contents checked at the target.
//!
//! Two trees: `flat`, 2000 files of 8 KiB in 20 directories (issue 18's case), and
//! `source`, a source-tree-like tree (opt-in: N files, sizes log-normal around a
//! 4 KiB median, a few empty, nested directories). Contents come from a fixed-seed
//! generator, so every run and every tool moves the same bytes; they are random
//! (incompressible), and no tool here compresses by default.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context;

use crate::matrix::{self, LossDir, Scenario};
use crate::proc;
use crate::sshd::{self, ServerCpu};
use crate::tools::{bytes_under, Endpoint};
use soku_bench::proc::median;
use soku_bench::proc::show;

/// Which tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeKind {
    /// `files` files of `size` bytes in `dirs` directories.
    Flat {
        /// Files.
        files: usize,
        /// Bytes each.
        size: u64,
        /// Directories (under the top one).
        dirs: usize,
    },
    /// A source-tree-like tree of `files` files.
    Source {
        /// Files.
        files: usize,
    },
}

impl TreeKind {
    /// The label in tables and CSV.
    pub fn label(&self) -> String {
        match self {
            TreeKind::Flat { files, size, dirs } => {
                format!("{files} x {} KiB in {dirs} dirs", size >> 10)
            }
            TreeKind::Source { files } => format!("source-like, {files} files"),
        }
    }
}

/// Median file size of the source-like tree.
const SOURCE_MEDIAN: f64 = 4096.0;
/// Spread (sigma of the log) of its sizes: the middle half between ~1.8 and ~9.1 KiB,
/// 1 % above ~60 KiB.
const SOURCE_SIGMA: f64 = 1.2;
/// Largest file of the source-like tree.
const SOURCE_MAX: u64 = 1 << 20;
/// Files per directory of the source-like tree, on average.
const SOURCE_PER_DIR: usize = 16;

/// A small, fast generator (xorshift64*): the same tree every time.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in (0, 1).
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let x = self.next().to_le_bytes();
            chunk.copy_from_slice(&x[..chunk.len()]);
        }
    }
}

/// A generated tree: its top directory and every file's path (relative to the top's
/// parent), size and BLAKE3.
pub struct Tree {
    /// The tree's top directory (`.../tree`), the source of every copy.
    pub top: PathBuf,
    /// Files, relative to the top's parent (so `tree/...`).
    pub files: Vec<(PathBuf, u64, blake3::Hash)>,
    /// Directories, relative likewise.
    pub dirs: usize,
    /// Total bytes.
    pub bytes: u64,
}

impl Tree {
    /// Writes the tree under `work/NAME/tree`.
    pub fn create(work: &Path, name: &str, kind: TreeKind) -> anyhow::Result<Tree> {
        let base = work.join(name);
        let _ = std::fs::remove_dir_all(&base);
        let top = base.join("tree");
        std::fs::create_dir_all(&top)?;
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        // Directories, relative to the top.
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut sizes: Vec<u64> = Vec::new();
        match kind {
            TreeKind::Flat { files, size, dirs: n } => {
                dirs.extend((0..n.max(1)).map(|d| PathBuf::from(format!("d{d:03}"))));
                sizes.extend(std::iter::repeat_n(size, files));
            }
            TreeKind::Source { files } => {
                let n = files.div_ceil(SOURCE_PER_DIR).max(1);
                dirs.push(PathBuf::from("src"));
                while dirs.len() < n {
                    // A new directory below a random earlier one, at most 8 levels deep.
                    let parent = dirs[(rng.next() % dirs.len() as u64) as usize].clone();
                    let parent = if parent.components().count() >= 8 {
                        PathBuf::from("src")
                    } else {
                        parent
                    };
                    dirs.push(parent.join(format!("m{:05}", dirs.len())));
                }
                for _ in 0..files {
                    let size = if rng.next().is_multiple_of(100) {
                        0
                    } else {
                        let s = (SOURCE_MEDIAN.ln() + SOURCE_SIGMA * rng.normal()).exp();
                        (s as u64).clamp(1, SOURCE_MAX)
                    };
                    sizes.push(size);
                }
            }
        }
        for d in &dirs {
            std::fs::create_dir_all(top.join(d))?;
        }
        let mut files = Vec::with_capacity(sizes.len());
        let mut buf = Vec::new();
        let mut bytes = 0;
        for (i, size) in sizes.into_iter().enumerate() {
            let dir = match kind {
                TreeKind::Flat { .. } => &dirs[i % dirs.len()],
                TreeKind::Source { .. } => &dirs[(rng.next() % dirs.len() as u64) as usize],
            };
            let ext = ["c", "h", "rs", "md", "py", "txt"][i % 6];
            let rel = dir.join(format!("f{i:06}.{ext}"));
            buf.resize(size as usize, 0);
            rng.fill(&mut buf);
            std::fs::write(top.join(&rel), &buf)?;
            files.push((Path::new("tree").join(rel), size, blake3::hash(&buf)));
            bytes += size;
        }
        Ok(Tree { top, files, dirs: dirs.len(), bytes })
    }

    /// Checks that `dst` holds exactly the tree (`dst/tree/...`): every file with its
    /// size and BLAKE3, and no other file. `Err` says what is wrong.
    pub fn verify(&self, dst: &Path) -> Result<(), String> {
        let mut found = 0usize;
        count_files(&dst.join("tree"), &mut found);
        for (rel, size, hash) in &self.files {
            let path = dst.join(rel);
            let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", rel.display()))?;
            if data.len() as u64 != *size {
                return Err(format!("{}: size {} != {size}", rel.display(), data.len()));
            }
            if blake3::hash(&data) != *hash {
                return Err(format!("{}: hash mismatch", rel.display()));
            }
        }
        if found != self.files.len() {
            return Err(format!("{found} files at the target, {} expected", self.files.len()));
        }
        Ok(())
    }
}

fn count_files(dir: &Path, n: &mut usize) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => count_files(&e.path(), n),
                Ok(_) => *n += 1,
                Err(_) => {}
            }
        }
    }
}

fn files_under(dir: &Path) -> usize {
    let mut n = 0;
    count_files(dir, &mut n);
    n
}

/// A tool of this section: one of the copy tools, or a soku binary under a label
/// (`soku@LABEL`, for A/B runs of two builds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmallTool {
    /// soku `-r` with the given binary; label as shown.
    Soku {
        /// `soku`, `soku-next` or `soku@LABEL`.
        label: String,
        /// The binary (used on both sides).
        binary: PathBuf,
        /// The next copy within a minute of another (`soku-next`): a one-file copy
        /// just before, untimed, leaves the ssh login for this one to share
        /// (`crates/soku/src/client/launch/shared_login.rs`); its path memory is removed, so
        /// only the login differs from a first copy.
        shared_login: bool,
    },
    /// `rsync -a`.
    Rsync,
    /// `scp -r`.
    Scp,
    /// `sftp` with `put -r`.
    Sftp,
    /// `qcp -r` (the binary on both sides, see `qcp.rs`): with its defaults (`qcp`), or
    /// hand-tuned to the path (`qcp-tuned`: [`crate::qcp::tuning`] of its rate and RTT).
    Qcp {
        /// The binary.
        bin: PathBuf,
        /// `--rx`/`--tx`/`--rtt` set to the path and `--congestion bbr`.
        tuned: bool,
    },
}

/// The tools `--small-tools` names (besides `--small-soku`'s `soku@LABEL`).
pub const NAMES: &[&str] = &["soku", "soku-next", "rsync", "scp", "sftp", "qcp", "qcp-tuned"];

impl SmallTool {
    /// As shown in tables.
    pub fn label(&self) -> &str {
        match self {
            SmallTool::Soku { label, .. } => label,
            SmallTool::Rsync => "rsync",
            SmallTool::Scp => "scp",
            SmallTool::Sftp => "sftp",
            SmallTool::Qcp { tuned: false, .. } => "qcp",
            SmallTool::Qcp { tuned: true, .. } => "qcp-tuned",
        }
    }

    /// The tool `--small-tools` calls `name` (one of [`NAMES`]), with `soku` the soku
    /// binary and `qcp` qcp's (either unused by the other tools); `None` if unknown.
    pub fn from_name(name: &str, soku: &Path, qcp: &Path) -> Option<SmallTool> {
        Some(match name {
            "soku" | "soku-next" => SmallTool::Soku {
                label: name.to_string(),
                binary: soku.to_path_buf(),
                shared_login: name == "soku-next",
            },
            "rsync" => SmallTool::Rsync,
            "scp" => SmallTool::Scp,
            "sftp" => SmallTool::Sftp,
            "qcp" | "qcp-tuned" => {
                SmallTool::Qcp { bin: qcp.to_path_buf(), tuned: name == "qcp-tuned" }
            }
            _ => return None,
        })
    }

    /// True for the names whose tool is qcp (they need its binary).
    pub fn is_qcp_name(name: &str) -> bool {
        matches!(name, "qcp" | "qcp-tuned")
    }

    /// The options this tool adds for a path of `rate_bps` and `rtt`: qcp's tuning in
    /// `qcp-tuned`, none otherwise.
    pub fn tuning(&self, rate_bps: u64, rtt: Duration) -> Vec<String> {
        match self {
            SmallTool::Qcp { tuned: true, .. } => crate::qcp::tuning(Some((rate_bps, rtt))),
            _ => Vec::new(),
        }
    }
}

/// One measured run.
#[derive(Debug)]
pub struct SmallRow {
    /// UTC date and time.
    pub date: String,
    /// Rate and RTT.
    pub scenario: Scenario,
    /// Tree label.
    pub tree: String,
    /// Files and bytes of the tree.
    pub files: usize,
    /// Bytes of the tree.
    pub bytes: u64,
    /// Tool label.
    pub tool: String,
    /// Round (1-based).
    pub run: u32,
    /// Wall seconds including login (or until the kill).
    pub seconds: f64,
    /// `ok`, `timeout` or `failed: ...`.
    pub status: String,
    /// Files at the target when it ended (all of them when ok).
    pub files_arrived: usize,
    /// Bytes under the target when it ended.
    pub bytes_arrived: u64,
    /// CPU of the client's process tree and of the server side.
    pub cpu: (f64, f64),
    /// Load average before and after.
    pub load: (f64, f64),
    /// The exact command.
    pub command: String,
}

/// Settings of the small-files section.
pub struct SmallOpts<'a> {
    /// Trees to run.
    pub trees: &'a [TreeKind],
    /// Tools, in round order.
    pub tools: &'a [SmallTool],
    /// Rate, bit/s.
    pub rate_bps: u64,
    /// RTT.
    pub rtt: Duration,
    /// Rounds.
    pub repeat: u32,
    /// Longest a run may take before it is killed.
    pub timeout: Duration,
    /// Namespace prefix.
    pub name: &'a str,
    /// Scratch dir.
    pub work: &'a Path,
    /// Where soku's event streams of the first soku run per tree go.
    pub out: &'a Path,
}

/// The command for one upload of `src` (a directory) into the existing directory
/// `dst_dir` on the server, over a path of `sc`'s rate and RTT.
fn command(
    tool: &SmallTool,
    ep: &Endpoint<'_>,
    sc: &Scenario,
    src: &Path,
    dst_dir: &Path,
) -> Command {
    let port = ep.sshd.port().to_string();
    let remote = format!("{}:{}", ep.sshd.destination(), dst_dir.display());
    match tool {
        SmallTool::Soku { binary, .. } => {
            let mut c = (ep.client)(&binary.display().to_string());
            crate::tools::soku_homes(&mut c, &ep.memory.join("first-copy"));
            c.args(["--json", "-r", "-P", &port]).args(ep.sshd.ssh_args());
            c.arg("--remote-soku").arg(binary).arg(src).arg(&remote);
            c
        }
        SmallTool::Rsync => {
            let mut rsh = format!("ssh -p {port}");
            for o in ep.sshd.ssh_options() {
                rsh.push_str(" -o ");
                rsh.push_str(&o);
            }
            let mut c = (ep.client)("rsync");
            c.arg("-a").arg("-e").arg(rsh).arg(src).arg(format!("{remote}/"));
            c
        }
        SmallTool::Scp => {
            let mut c = (ep.client)("scp");
            c.args(["-r", "-q", "-P", &port]).args(ep.sshd.ssh_args());
            c.arg(src).arg(&remote);
            c
        }
        SmallTool::Sftp => {
            let batch = std::env::temp_dir().join(format!(
                "soku-bench-small-{}.sftp-batch",
                dst_dir.file_name().and_then(|n| n.to_str()).unwrap_or("dst")
            ));
            let name = src.file_name().map(PathBuf::from).unwrap_or_default();
            let line = format!("put -r {} {}\n", src.display(), dst_dir.join(name).display());
            let _ = std::fs::write(&batch, line);
            let mut c = (ep.client)("sftp");
            c.args(["-q", "-P", &port]).args(ep.sshd.ssh_args());
            c.arg("-b").arg(&batch).arg(ep.sshd.destination());
            c
        }
        SmallTool::Qcp { bin, .. } => {
            let mut c = (ep.client)(&bin.display().to_string());
            c.arg("-r").args(crate::qcp::ssh_passthrough(&port, &ep.sshd.ssh_args()));
            c.args(tool.tuning(sc.rate_bps, sc.rtt));
            // qcp -r copies a directory's contents into an existing target directory
            // (`cp -r src/. dst`): name the tree's own directory, as the others get.
            let name = src.file_name().map(PathBuf::from).unwrap_or_default();
            let into = format!("{}:{}", ep.sshd.destination(), dst_dir.join(name).display());
            c.arg("--remote-qcp-binary").arg(bin).arg(src).arg(into);
            c
        }
    }
}

/// Before a `soku-next` run: a copy of one small file, untimed, whose ssh stays as the
/// master of a login the timed copy shares; what it taught the path memory is removed.
fn share_a_login(
    tool: &SmallTool,
    ep: &Endpoint<'_>,
    sc: &Scenario,
    work: &Path,
    tree: usize,
    timeout: Duration,
) -> anyhow::Result<()> {
    let src = work.join(format!("small-{tree}-warm")).join("warm");
    std::fs::create_dir_all(&src)?;
    std::fs::write(src.join("one"), [7u8; 1024])?;
    let dst = work.join(format!("small-{tree}-warm-dst"));
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(&dst)?;
    let out = proc::run(command(tool, ep, sc, &src, &dst), timeout)?;
    if !out.ok() {
        anyhow::bail!("the copy before soku-next failed: {}", out.stderr_tail(3));
    }
    let _ = std::fs::remove_file(ep.memory.join("first-copy").join("soku").join("paths"));
    Ok(())
}

/// Runs every tree with every tool, `repeat` rounds, on one emulated path per tree.
/// Returns the rows and the sanity problems (a copy that finished but did not verify,
/// a tool that failed, the harness).
pub fn run(o: &SmallOpts<'_>, log: &dyn Fn(&str)) -> anyhow::Result<(Vec<SmallRow>, Vec<String>)> {
    let sc = Scenario { rate_bps: o.rate_bps, rtt: o.rtt, loss: 0.0, loss_dir: LossDir::Data };
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for (t, &kind) in o.trees.iter().enumerate() {
        log(&format!("small files: generating {}", kind.label()));
        let tree = Tree::create(o.work, &format!("small-{t}"), kind)?;
        log(&format!(
            "small files: {} ({} files, {} dirs, {:.1} MB), {} Mbit/s, RTT {} ms",
            kind.label(),
            tree.files.len(),
            tree.dirs,
            tree.bytes as f64 / 1e6,
            o.rate_bps / 1_000_000,
            o.rtt.as_millis()
        ));
        let _ = soku_netem::Path::cleanup(o.name);
        let path = soku_netem::Path::up(o.name, sc.spec()).context("bringing the path up")?;
        let sshd = sshd::start(path.command_b("/usr/sbin/sshd"), path.addr_b(), 22)?;
        let client = |p: &str| path.command_a(p);
        let dummy = PathBuf::new();
        let memory = tempfile::Builder::new().prefix("soku-bench-memory-").tempdir()?;
        let no_qcp = Err("not in the small-files test".to_string());
        let ep = Endpoint {
            client: &client,
            sshd: &sshd,
            soku: &dummy,
            tcp_cc: "",
            qcp: &no_qcp,
            memory: memory.path(),
        };
        let dst = o.work.join(format!("small-{t}-dst"));
        let mut saved_events = false;
        for run in 1..=o.repeat.max(1) {
            for tool in o.tools {
                let _ = std::fs::remove_dir_all(&dst);
                std::fs::create_dir_all(&dst)?;
                path.flush_tcp_metrics().context("flushing tcp metrics")?;
                // Every soku copy is a first copy to the host (empty path memory).
                let _ = std::fs::remove_dir_all(memory.path().join("first-copy"));
                if let SmallTool::Soku { shared_login: true, .. } = tool {
                    share_a_login(tool, &ep, &sc, o.work, t, o.timeout)?;
                }
                let cmd = command(tool, &ep, &sc, &tree.top, &dst);
                let shown = show(&cmd);
                let (load0, date) = (proc::loadavg(), matrix::now_utc());
                let cpu0 = sshd.reaped_cpu();
                let started = proc::ticks_since_boot();
                let out = proc::run_watched(cmd, o.timeout, Some(sshd.pid()))?;
                if let SmallTool::Soku { .. } = tool {
                    proc::end_kept_servers(sshd.pid());
                    crate::tools::end_shared_logins(&memory.path().join("first-copy"));
                }
                let (idle, outlived) =
                    proc::settle_server(sshd.pid(), &out.server_seen, Duration::from_secs(10));
                let mut server_cpu =
                    if idle { sshd.reaped_cpu() - cpu0 + outlived } else { f64::NAN };
                if let SmallTool::Qcp { bin, .. } = tool {
                    // `qcp --server` outlives a killed client (see `tools::run_copy`).
                    let left = proc::started_since(bin, started);
                    for pid in &left {
                        proc::kill_pid(*pid);
                    }
                    if !left.is_empty() {
                        server_cpu = f64::NAN;
                    }
                }
                let status = if out.timed_out() {
                    "timeout".to_string()
                } else if !out.ok() {
                    let code = out.status.map(|s| s.to_string()).unwrap_or_default();
                    format!("failed: {code}: {}", out.stderr_tail(3))
                } else {
                    match tree.verify(&dst) {
                        Ok(()) => "ok".to_string(),
                        Err(e) => format!("failed: DATA: {e}"),
                    }
                };
                if status != "ok" && status != "timeout" {
                    problems.push(format!(
                        "small files {} {}: {status}; command: {shown}",
                        kind.label(),
                        tool.label()
                    ));
                }
                if matches!(tool, SmallTool::Soku { .. }) && !saved_events {
                    saved_events = true;
                    let events = out.timed_stderr();
                    let dir = o.out.join("small-files");
                    std::fs::create_dir_all(&dir)?;
                    let stem = format!("{}-tree{t}.stderr", tool.label().replace('@', "-"));
                    std::fs::write(dir.join(stem), events)?;
                }
                let row = SmallRow {
                    date,
                    scenario: sc,
                    tree: kind.label(),
                    files: tree.files.len(),
                    bytes: tree.bytes,
                    tool: tool.label().to_string(),
                    run,
                    seconds: out.wall.as_secs_f64(),
                    files_arrived: files_under(&dst),
                    bytes_arrived: bytes_under(&dst),
                    status,
                    cpu: (out.cpu, server_cpu),
                    load: (load0, proc::loadavg()),
                    command: shown,
                };
                log(&format!(
                    "  {:<16} {:>7.2} s  {:>6} files  {}",
                    row.tool, row.seconds, row.files_arrived, row.status
                ));
                rows.push(row);
            }
        }
        let _ = std::fs::remove_dir_all(&dst);
        drop(sshd);
        if let Err(e) = path.down() {
            problems.push(format!("small files: path teardown: {e}"));
        }
        let _ = std::fs::remove_dir_all(tree.top.parent().unwrap_or(&tree.top));
    }
    Ok((rows, problems))
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `small-files.csv` and the markdown table (per tree: every tool's median wall time,
/// range, runs, and how it compares with rsync's median).
pub fn outputs(rows: &[SmallRow]) -> (String, String) {
    let mut csv = String::from(
        "date,rate_mbit,rtt_ms,tree,files,bytes,tool,run,seconds,status,files_arrived,\
         bytes_arrived,client_cpu_s,server_cpu_s,load_start,load_end,command\n",
    );
    for r in rows {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{:.3},{},{},{},{:.2},{:.2},{:.2},{:.2},{}",
            r.date,
            r.scenario.rate_bps / 1_000_000,
            r.scenario.rtt.as_millis(),
            csv_field(&r.tree),
            r.files,
            r.bytes,
            r.tool,
            r.run,
            r.seconds,
            csv_field(&r.status),
            r.files_arrived,
            r.bytes_arrived,
            r.cpu.0,
            r.cpu.1,
            r.load.0,
            r.load.1,
            csv_field(&r.command)
        );
    }
    let mut md = String::new();
    let mut trees: Vec<&str> = Vec::new();
    for r in rows {
        if !trees.contains(&r.tree.as_str()) {
            trees.push(&r.tree);
        }
    }
    for tree in trees {
        let tr: Vec<&SmallRow> = rows.iter().filter(|r| r.tree == tree).collect();
        let Some(first) = tr.first() else { continue };
        let _ = writeln!(
            md,
            "\n### {tree} ({} files, {:.1} MB), {} Mbit/s, RTT {} ms\n",
            first.files,
            first.bytes as f64 / 1e6,
            first.scenario.rate_bps / 1_000_000,
            first.scenario.rtt.as_millis()
        );
        md.push_str(
            "| tool | median s | range s | runs ok | speed vs rsync (medians) | client CPU s | server CPU s | not ok |\n",
        );
        md.push_str("|---|---|---|---|---|---|---|---|\n");
        let mut tools: Vec<&str> = Vec::new();
        for r in &tr {
            if !tools.contains(&r.tool.as_str()) {
                tools.push(&r.tool);
            }
        }
        let med = |tool: &str| {
            let ok: Vec<f64> = tr
                .iter()
                .filter(|r| r.tool == tool && r.status == "ok")
                .map(|r| r.seconds)
                .collect();
            median(&ok)
        };
        let rsync = med("rsync");
        for tool in tools {
            let runs: Vec<&&SmallRow> = tr.iter().filter(|r| r.tool == tool).collect();
            let ok: Vec<f64> =
                runs.iter().filter(|r| r.status == "ok").map(|r| r.seconds).collect();
            let m = median(&ok);
            let (lo, hi) = ok.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            let cpu = |f: fn(&SmallRow) -> f64| {
                median(&runs.iter().map(|r| f(r)).filter(|x| !x.is_nan()).collect::<Vec<_>>())
            };
            let bad: Vec<String> = runs
                .iter()
                .filter(|r| r.status != "ok")
                .map(|r| match r.status.as_str() {
                    "timeout" => format!(
                        "run {}: timeout (>{:.0} s, {} of {} files)",
                        r.run, r.seconds, r.files_arrived, r.files
                    ),
                    s => format!("run {}: {s}", r.run),
                })
                .collect();
            let fmt = |x: f64| if x.is_nan() { "-".to_string() } else { format!("{x:.2}") };
            let vs = if m.is_nan() || rsync.is_nan() {
                "-".to_string()
            } else {
                format!("{:.2}x", rsync / m)
            };
            let range = if ok.is_empty() { "-".into() } else { format!("{lo:.2}-{hi:.2}") };
            let _ = writeln!(
                md,
                "| {tool} | {} | {range} | {}/{} | {vs} | {} | {} | {} |",
                fmt(m),
                ok.len(),
                runs.len(),
                fmt(cpu(|r| r.cpu.0)),
                fmt(cpu(|r| r.cpu.1)),
                bad.join("; ")
            );
        }
    }
    (csv, md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_are_what_they_say_and_verify() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let kind = TreeKind::Flat { files: 40, size: 8192, dirs: 4 };
        let tree = Tree::create(tmp.path(), "t", kind).expect("tree");
        assert_eq!(tree.files.len(), 40);
        assert_eq!(tree.bytes, 40 * 8192);
        // The tree verifies against itself, and a changed byte is found.
        tree.verify(tmp.path().join("t").as_path()).expect("verifies");
        let (rel, ..) = &tree.files[7];
        let victim = tmp.path().join("t").join(rel);
        let mut data = std::fs::read(&victim).expect("read");
        data[100] ^= 1;
        std::fs::write(&victim, data).expect("write");
        assert!(tree.verify(tmp.path().join("t").as_path()).is_err());

        let src = Tree::create(tmp.path(), "s", TreeKind::Source { files: 2000 }).expect("tree");
        let mut sizes: Vec<u64> = src.files.iter().map(|f| f.1).collect();
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2];
        assert!((2500..6500).contains(&median), "median {median}");
        assert!(sizes.contains(&0), "some empty files");
        assert!(src.dirs > 100);
        src.verify(tmp.path().join("s").as_path()).expect("verifies");
    }

    #[test]
    fn tool_names_parse_to_their_labels() {
        let (soku, qcp) = (Path::new("/x/soku"), Path::new("/x/qcp"));
        for name in NAMES {
            let tool = SmallTool::from_name(name, soku, qcp).expect(name);
            assert_eq!(tool.label(), *name);
            assert_eq!(SmallTool::is_qcp_name(name), matches!(tool, SmallTool::Qcp { .. }));
        }
        assert_eq!(SmallTool::from_name("qcp-fast", soku, qcp), None);
        assert_eq!(SmallTool::from_name("soku@x", soku, qcp), None);
        let tuned = SmallTool::from_name("qcp-tuned", soku, qcp).expect("qcp-tuned");
        assert_eq!(tuned, SmallTool::Qcp { bin: qcp.into(), tuned: true });
        // The small-files path's defaults: 100 Mbit/s, 100 ms.
        let rtt = Duration::from_millis(100);
        assert_eq!(
            tuned.tuning(100_000_000, rtt).join(" "),
            "--rx 12500000 --tx 12500000 --rtt 100 --congestion bbr"
        );
        let plain = SmallTool::from_name("qcp", soku, qcp).expect("qcp");
        assert!(plain.tuning(100_000_000, rtt).is_empty());
        assert!(SmallTool::Rsync.tuning(100_000_000, rtt).is_empty());
    }
}
