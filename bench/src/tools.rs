//! The tools under test and how one run of each is started, bounded and checked.
//!
//! Every copy is an upload from A (client) to B (sshd), so the data direction is A->B.
//! A copy tool's time is the wall time of the whole command, login included, and its
//! result counts only if the target file has the source's size and BLAKE3 hash.
//! iperf3 is the TCP ceiling: its time excludes connection setup (`-t` seconds of data).

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::proc::{self, Outcome};
use crate::sshd::{ServerCpu, Sshd};

/// One tool of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// The built `soku` binary, default settings, copying to this host for the first
    /// time (an empty path memory, `XDG_CACHE_HOME` of its own).
    Soku,
    /// The same copy again, starting from what the last `soku` run of the scenario
    /// learned about the path (careful resume, `crates/soku/src/client/path_memory.rs`): what a
    /// user's second and later copies to a host get.
    SokuAgain,
    /// A copy right after another to the host: the path memory of [`Tool::SokuAgain`],
    /// and the ssh login shared with a one-file copy made just before it, untimed
    /// (`crates/soku/src/client/launch/shared_login.rs`): what a script's next copy gets.
    SokuNext,
    /// The same with `--transport tcp`: its TLS-over-TCP transport, for networks that
    /// block UDP.
    SokuTcp,
    /// qcp, the QUIC Copier ([`crate::qcp`]), default settings.
    Qcp,
    /// qcp tuned to the path: `--rx`/`--tx` the link rate, `--rtt` the path's RTT,
    /// `--congestion bbr` ([`crate::qcp::tuning`]).
    QcpTuned,
    /// OpenSSH `scp` (SFTP protocol by default since 9.0).
    Scp,
    /// OpenSSH `sftp -b` with one `put`.
    Sftp,
    /// `rsync` over ssh, default options.
    Rsync,
    /// soku's QUIC transport alone, no ssh and no session (`soku-floor`,
    /// [`crate::floor_path`]): what soku's own layers cost beside it.
    QuinnFloor,
    /// `iperf3 -C cubic`: TCP ceiling with CUBIC.
    Iperf3Cubic,
    /// `iperf3 -C bbr`: TCP ceiling with BBR.
    Iperf3Bbr,
}

impl Tool {
    /// All tools, in table order.
    pub const ALL: [Tool; 12] = [
        Tool::Soku,
        Tool::SokuAgain,
        Tool::SokuNext,
        Tool::SokuTcp,
        Tool::Qcp,
        Tool::QcpTuned,
        Tool::Scp,
        Tool::Sftp,
        Tool::Rsync,
        Tool::QuinnFloor,
        Tool::Iperf3Cubic,
        Tool::Iperf3Bbr,
    ];

    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Soku => "soku",
            Tool::SokuAgain => "soku-again",
            Tool::SokuNext => "soku-next",
            Tool::SokuTcp => "soku-tcp",
            Tool::Qcp => "qcp",
            Tool::QcpTuned => "qcp-tuned",
            Tool::Scp => "scp",
            Tool::Sftp => "sftp",
            Tool::Rsync => "rsync",
            Tool::QuinnFloor => "quinn-floor",
            Tool::Iperf3Cubic => "iperf3-cubic",
            Tool::Iperf3Bbr => "iperf3-bbr",
        }
    }

    /// Parses a name from `--tools`.
    pub fn parse(s: &str) -> anyhow::Result<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == s).with_context(|| {
            let names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
            format!("unknown tool {s:?} (known: {})", names.join(", "))
        })
    }

    /// True for the tools that copy a file over ssh (and are verified).
    pub fn is_copy(self) -> bool {
        !matches!(self, Tool::QuinnFloor | Tool::Iperf3Cubic | Tool::Iperf3Bbr)
    }

    /// True for iperf3's rows (they need the iperf3 server).
    pub fn is_iperf3(self) -> bool {
        matches!(self, Tool::Iperf3Cubic | Tool::Iperf3Bbr)
    }

    /// True for soku's rows.
    pub fn is_soku(self) -> bool {
        matches!(self, Tool::Soku | Tool::SokuAgain | Tool::SokuNext | Tool::SokuTcp)
    }

    /// True for qcp's rows (they need [`crate::qcp::ensure`]).
    pub fn is_qcp(self) -> bool {
        matches!(self, Tool::Qcp | Tool::QcpTuned)
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Finished; for copies, size and hash verified.
    Ok,
    /// Killed after the timeout.
    Timeout,
    /// Exited non-zero, or the copy did not verify; the text says what happened.
    Failed(String),
    /// Not run: the tool is not available (e.g. qcp could not be installed); the text
    /// says why.
    Skipped(String),
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Ok => f.write_str("ok"),
            Status::Timeout => f.write_str("timeout"),
            Status::Failed(m) => write!(f, "failed: {m}"),
            Status::Skipped(m) => write!(f, "skipped: {m}"),
        }
    }
}

/// The outcome of one run, before the scenario is attached.
#[derive(Debug)]
pub struct Measured {
    /// Congestion control the data sender ran with.
    pub cc: String,
    /// Bytes moved (file size, or bytes that arrived before a timeout).
    pub bytes: u64,
    /// Seconds (wall time incl. login for copies; iperf3's own interval).
    pub seconds: f64,
    /// How it ended.
    pub status: Status,
    /// CPU seconds of the client's process tree.
    pub client_cpu: f64,
    /// CPU seconds of the server side (sshd sessions and what they ran), NaN if unknown.
    pub server_cpu: f64,
    /// Peak resident memory in MiB of the largest client-side and server-side process
    /// (NaN if unknown).
    pub peak_rss_mib: (f64, f64),
    /// The process's stderr lines with arrival times (soku's JSON events).
    pub stderr: Vec<(Duration, String)>,
    /// When the timed command started; `None` when nothing ran. Untimed copies before
    /// it (`soku-next`'s shared login, a first copy for the path memory) come earlier.
    pub started: Option<Instant>,
}

/// soku's `--json` events among stderr lines (time read, event); other lines (ssh's,
/// a shell's) are passed over.
pub fn json_events(
    stderr: &[(Duration, String)],
) -> impl Iterator<Item = (Duration, serde_json::Value)> + '_ {
    stderr.iter().filter_map(|(t, line)| {
        let v: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
        v.get("event").is_some().then_some((*t, v))
    })
}

/// A source file and its fingerprint.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its size.
    pub size: u64,
    /// Its BLAKE3 hash.
    pub hash: blake3::Hash,
}

impl SourceFile {
    /// Writes `size` bytes: random, or (`compressible`) log-like text with a random
    /// 16-hex-digit field per 64-byte line (about 1/8 of the bytes carry entropy).
    pub fn create(path: &Path, size: u64, compressible: bool) -> anyhow::Result<SourceFile> {
        use std::io::{Read, Write};
        let mut urandom = std::fs::File::open("/dev/urandom")?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
        let mut hasher = blake3::Hasher::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut left = size;
        let mut line = 0u64;
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            urandom.read_exact(&mut buf[..n])?;
            if compressible {
                for chunk in buf[..n].chunks_mut(64) {
                    let text = format!(
                        "{line:010} INFO transfer chunk ok id={:016x} status=done         \n",
                        u64::from_le_bytes(
                            chunk.get(..8).and_then(|c| c.try_into().ok()).unwrap_or([0; 8])
                        )
                    );
                    let len = chunk.len();
                    chunk.copy_from_slice(&text.as_bytes()[..len]);
                    line += 1;
                }
            }
            out.write_all(&buf[..n])?;
            hasher.update(&buf[..n]);
            left -= n as u64;
        }
        out.flush()?;
        Ok(SourceFile { path: path.to_path_buf(), size, hash: hasher.finalize() })
    }
}

/// BLAKE3 of a file.
pub fn hash_file(path: &Path) -> anyhow::Result<blake3::Hash> {
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(std::fs::File::open(path)?)?;
    Ok(hasher.finalize())
}

/// Sum of the sizes of the regular files under `dir` (bytes that arrived so far,
/// including temp files of tools that write elsewhere first).
pub fn bytes_under(dir: &Path) -> u64 {
    let mut sum = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if let Ok(md) = e.metadata() {
                if md.is_file() {
                    sum += md.len();
                } else if md.is_dir() {
                    sum += bytes_under(&e.path());
                }
            }
        }
    }
    sum
}

/// Where the client runs and where it connects.
pub struct Endpoint<'a> {
    /// Makes a `Command` for a program on the client side (in namespace A, or plain).
    pub client: &'a dyn Fn(&str) -> Command,
    /// The server.
    pub sshd: &'a Sshd,
    /// The soku binary (same path on both sides: one filesystem).
    pub soku: &'a Path,
    /// Congestion control of TCP senders on the client side (namespace default).
    pub tcp_cc: &'a str,
    /// The qcp binary (same path on both sides), or why there is none.
    pub qcp: &'a Result<crate::qcp::Qcp, String>,
    /// The scenario's soku path memories (see [`Tool::SokuAgain`]).
    pub memory: &'a Path,
}

/// Points soku's cache (its path memory), its config directory and its runtime
/// directory (the sockets of shared ssh logins, `crates/soku/src/client/launch/shared_login.rs`)
/// at `home`, a directory of the bench's own: no user's `~/.config/soku/config.toml`
/// changes a run (benchmarks run at soku's defaults), the path memory is what the row
/// wants, and a run shares a login only with the runs the bench means it to.
pub fn soku_homes(c: &mut Command, home: &Path) {
    c.env("XDG_CACHE_HOME", home).env("XDG_CONFIG_HOME", home).env("XDG_RUNTIME_DIR", home);
}

/// Ends the ssh masters that soku runs under `home` (see [`soku_homes`]) left behind
/// (`ssh -O exit`): soku's copies share one login for a minute after each other, and
/// unless a row asks for that, each run logs in afresh as the first copy to a host
/// does, and leaves no ssh session for the server's CPU count to wait on. The records
/// of the servers kept for the next copies go too (the servers themselves are ended
/// by [`proc::end_kept_servers`]): a copy that found one would wait for it first.
pub fn end_shared_logins(home: &Path) {
    let _ = std::fs::remove_dir_all(home.join("soku").join("kept"));
    let Ok(sockets) = std::fs::read_dir(home.join("soku").join("ssh")) else { return };
    for socket in sockets.flatten() {
        let mut c = Command::new("ssh");
        c.arg(format!("-oControlPath={}", socket.path().display()));
        c.args(["-O", "exit", "shared-login"]);
        let _ = proc::run(c, Duration::from_secs(10));
    }
}

/// `XDG_CACHE_HOME` of a first copy: emptied before each run.
fn cold_memory(ep: &Endpoint<'_>) -> PathBuf {
    ep.memory.join("cold")
}

/// `XDG_CACHE_HOME` of a copy again: what the last cold copy left.
fn again_memory(ep: &Endpoint<'_>) -> PathBuf {
    ep.memory.join("again")
}

/// The homes of a soku row (see [`soku_homes`]).
fn soku_home(tool: Tool, ep: &Endpoint<'_>) -> PathBuf {
    if matches!(tool, Tool::SokuAgain | Tool::SokuNext) {
        again_memory(ep)
    } else {
        cold_memory(ep)
    }
}

/// The memory file under an `XDG_CACHE_HOME`.
pub fn memory_file(home: &Path) -> PathBuf {
    home.join("soku").join("paths")
}

/// Before a soku run: a cold copy starts from nothing; a copy again from what the last
/// cold one learned, which it needs (false without).
fn prepare_memory(tool: Tool, ep: &Endpoint<'_>) -> anyhow::Result<bool> {
    match tool {
        Tool::Soku | Tool::SokuTcp => {
            let _ = std::fs::remove_dir_all(cold_memory(ep));
            Ok(true)
        }
        Tool::SokuAgain | Tool::SokuNext => {
            let learned = memory_file(&ep.memory.join("learned"));
            if !learned.exists() {
                return Ok(false);
            }
            let again = memory_file(&again_memory(ep));
            std::fs::create_dir_all(again.parent().unwrap_or(ep.memory))?;
            std::fs::copy(learned, again)?;
            Ok(true)
        }
        _ => Ok(true),
    }
}

/// After a cold soku copy: keep what it learned for the copies again.
fn keep_memory(tool: Tool, ep: &Endpoint<'_>) -> anyhow::Result<()> {
    let learned = memory_file(&cold_memory(ep));
    if tool == Tool::Soku && learned.exists() {
        let keep = memory_file(&ep.memory.join("learned"));
        std::fs::create_dir_all(keep.parent().unwrap_or(ep.memory))?;
        std::fs::copy(learned, keep)?;
    }
    Ok(())
}

/// The command for one upload of `src` to `dst` with `extra` tool options.
pub fn copy_command(
    tool: Tool,
    ep: &Endpoint<'_>,
    src: &Path,
    dst: &Path,
    extra: &[String],
) -> anyhow::Result<Command> {
    let port = ep.sshd.port().to_string();
    let remote = format!("{}:{}", ep.sshd.destination(), dst.display());
    let cmd = match tool {
        Tool::Soku | Tool::SokuAgain | Tool::SokuNext | Tool::SokuTcp => {
            let mut c = (ep.client)(&ep.soku.display().to_string());
            soku_homes(&mut c, &soku_home(tool, ep));
            c.args(["--json", "-P", &port]).args(ep.sshd.ssh_args());
            if tool == Tool::SokuTcp {
                c.args(["--transport", "tcp"]);
            }
            c.arg("--remote-soku").arg(ep.soku).args(extra).arg(src).arg(&remote);
            c
        }
        Tool::Qcp | Tool::QcpTuned => {
            let qcp = match ep.qcp {
                Ok(q) => &q.bin,
                Err(e) => bail!("qcp is not available: {e}"),
            };
            let mut c = (ep.client)(&qcp.display().to_string());
            // `-s`: qcp's statistics at the end (congestion events, losses, flow-control
            // blocking) on stderr; it changes nothing on the wire. ssh's options go
            // through `-S`, one argument each; qcp's own `-P` is its remote UDP port.
            c.arg("-s").args(crate::qcp::ssh_passthrough(&port, &ep.sshd.ssh_args()));
            c.arg("--remote-qcp-binary").arg(qcp).args(extra).arg(src).arg(&remote);
            c
        }
        Tool::Scp => {
            let mut c = (ep.client)("scp");
            c.args(["-q", "-P", &port]).args(ep.sshd.ssh_args()).args(extra);
            c.arg(src).arg(&remote);
            c
        }
        Tool::Sftp => {
            let batch = dst.with_extension("sftp-batch");
            let batch = std::env::temp_dir().join(batch.file_name().context("dst has a name")?);
            std::fs::write(&batch, format!("put {} {}\n", src.display(), dst.display()))?;
            let mut c = (ep.client)("sftp");
            c.args(["-q", "-P", &port]).args(ep.sshd.ssh_args()).args(extra);
            c.arg("-b").arg(&batch).arg(ep.sshd.destination());
            c
        }
        Tool::Rsync => {
            let mut rsh = format!("ssh -p {port}");
            for o in ep.sshd.ssh_options() {
                rsh.push_str(" -o ");
                rsh.push_str(&o);
            }
            let mut c = (ep.client)("rsync");
            c.arg("-e").arg(rsh).args(extra).arg(src).arg(&remote);
            c
        }
        Tool::QuinnFloor | Tool::Iperf3Cubic | Tool::Iperf3Bbr => {
            bail!("{tool} is not a copy tool")
        }
    };
    Ok(cmd)
}

/// The congestion controller named in soku's `connected` event over TLS/TCP
/// ("... (4 data connections; bbr, buffers ...)").
fn tcp_congestion(stderr: &[(Duration, String)]) -> Option<String> {
    let (_, line) = stderr.iter().find(|(_, l)| l.contains(r#""event":"connected""#))?;
    let after = line.split("; ").nth(1)?;
    Some(after.split(',').next()?.trim().to_string())
}

/// Before a [`Tool::SokuNext`] run: a copy of 1 KiB, untimed, whose ssh stays as the
/// master of the login the timed copy shares (the path memory is restored after it).
fn share_a_login(
    ep: &Endpoint<'_>,
    dst_dir: &Path,
    extra: &[String],
    timeout: Duration,
) -> anyhow::Result<()> {
    let src = dst_dir.join("one-kib");
    std::fs::write(&src, [7u8; 1024])?;
    let cmd = copy_command(Tool::SokuNext, ep, &src, &dst_dir.join("one-kib-copy"), extra)?;
    let out = proc::run(cmd, timeout)?;
    anyhow::ensure!(out.ok(), "the copy before soku-next failed: {}", out.stderr_tail(3));
    for name in ["one-kib", "one-kib-copy"] {
        let _ = std::fs::remove_file(dst_dir.join(name));
    }
    Ok(())
}

/// Runs one verified upload; the target is `dst_dir/file`, emptied first.
pub fn run_copy(
    tool: Tool,
    ep: &Endpoint<'_>,
    src: &SourceFile,
    dst_dir: &Path,
    extra: &[String],
    timeout: Duration,
) -> anyhow::Result<(Measured, String)> {
    if let (true, Err(why)) = (tool.is_qcp(), ep.qcp) {
        return Ok((skipped(why), format!("{tool}: not run")));
    }
    if !prepare_memory(tool, ep)? {
        // No cold copy ran in this scenario yet: one, untimed, to learn from.
        run_copy(Tool::Soku, ep, src, dst_dir, extra, timeout)?;
        prepare_memory(tool, ep)?;
    }
    let _ = std::fs::remove_dir_all(dst_dir);
    std::fs::create_dir_all(dst_dir)?;
    if tool == Tool::SokuNext {
        share_a_login(ep, dst_dir, extra, timeout)?;
        prepare_memory(tool, ep)?;
    }
    let dst = dst_dir.join("file");
    let cmd = copy_command(tool, ep, &src.path, &dst, extra)?;
    let shown = proc::show(&cmd);
    let cpu0 = ep.sshd.reaped_cpu();
    let started = proc::ticks_since_boot();
    let timed_from = Instant::now();
    let out = proc::run_watched(cmd, timeout, Some(ep.sshd.pid()))?;
    keep_memory(tool, ep)?;
    if tool.is_soku() {
        proc::end_kept_servers(ep.sshd.pid());
        end_shared_logins(&soku_home(tool, ep));
    }
    let (idle, outlived) =
        proc::settle_server(ep.sshd.pid(), &out.server_seen, Duration::from_secs(10));
    let mut left_behind = None;
    let mut server_cpu = if idle { ep.sshd.reaped_cpu() - cpu0 + outlived } else { f64::NAN };
    if outlived > 0.0 {
        eprintln!("  (a server process outlived its ssh session: its {outlived:.2} CPU-s counted)");
    }
    if let (true, Ok(q)) = (tool.is_qcp(), ep.qcp) {
        // `qcp --server` outlives its ssh session when its client is killed (seen after
        // timeouts: left to init, it ran on for about 35 s). Its CPU never reaches
        // sshd's counters, and it must not run into the next measurement: kill what
        // this run started of it, by PID.
        let left = proc::started_since(&q.bin, started);
        if !left.is_empty() {
            for pid in &left {
                proc::kill_pid(*pid);
            }
            server_cpu = f64::NAN;
            left_behind = Some(format!(
                "soku-bench: killed {} qcp process(es) left behind: {left:?}",
                left.len()
            ));
        }
    }
    let (status, bytes) = judge(&out, src, &dst, dst_dir);
    let cc = match tool {
        Tool::Soku | Tool::SokuAgain | Tool::SokuNext => "soku-cc".to_string(),
        // What soku's TCP sockets run, as its `connected` event says.
        Tool::SokuTcp => tcp_congestion(&out.stderr).unwrap_or_else(|| "?".into()),
        Tool::Qcp | Tool::QcpTuned => crate::qcp::congestion(extra),
        _ => ep.tcp_cc.to_string(),
    };
    let mut stderr = out.stderr;
    if let Some(note) = left_behind {
        stderr.push((out.wall, note));
    }
    let m = Measured {
        cc,
        bytes,
        seconds: out.wall.as_secs_f64(),
        status,
        client_cpu: out.cpu,
        server_cpu,
        peak_rss_mib: out.peak_rss_mib,
        stderr,
        started: Some(timed_from),
    };
    let _ = std::fs::remove_dir_all(dst_dir);
    Ok((m, shown))
}

/// The row of a run that could not start, with the reason.
pub fn skipped(why: &str) -> Measured {
    Measured {
        cc: "-".into(),
        bytes: 0,
        seconds: 0.0,
        status: Status::Skipped(why.to_string()),
        client_cpu: f64::NAN,
        server_cpu: f64::NAN,
        peak_rss_mib: (f64::NAN, f64::NAN),
        stderr: Vec::new(),
        started: None,
    }
}

fn judge(out: &Outcome, src: &SourceFile, dst: &Path, dst_dir: &Path) -> (Status, u64) {
    if out.timed_out() {
        return (Status::Timeout, bytes_under(dst_dir));
    }
    if !out.ok() {
        let code = out.status.map(|s| s.to_string()).unwrap_or_default();
        return (Status::Failed(format!("{code}: {}", out.stderr_tail(3))), bytes_under(dst_dir));
    }
    let size = std::fs::metadata(dst).map(|m| m.len()).unwrap_or(0);
    if size != src.size {
        return (Status::Failed(format!("size {size} != {}", src.size)), size);
    }
    match hash_file(dst) {
        Ok(h) if h == src.hash => (Status::Ok, size),
        Ok(_) => (Status::Failed("hash mismatch".into()), size),
        Err(e) => (Status::Failed(format!("cannot hash target: {e}")), size),
    }
}

/// Runs `iperf3 -c` for `duration` with congestion control `cc` against a server
/// already listening on `addr:5201`.
pub fn run_iperf3(
    client: &dyn Fn(&str) -> Command,
    addr: &str,
    cc: &str,
    duration: Duration,
) -> anyhow::Result<(Measured, String)> {
    let mut cmd = client("iperf3");
    let secs = duration.as_secs().max(1).to_string();
    cmd.args(["-c", addr, "-t", &secs, "-C", cc, "-J"]);
    let shown = proc::show(&cmd);
    let timed_from = Instant::now();
    let out = proc::run(cmd, duration + Duration::from_secs(30))?;
    let mut m = Measured {
        cc: cc.to_string(),
        bytes: 0,
        seconds: out.wall.as_secs_f64(),
        status: Status::Ok,
        client_cpu: out.cpu,
        server_cpu: f64::NAN,
        peak_rss_mib: (out.peak_rss_mib.0, f64::NAN),
        stderr: out.stderr.clone(),
        started: Some(timed_from),
    };
    if out.timed_out() {
        m.status = Status::Timeout;
        return Ok((m, shown));
    }
    let j = &out.stdout;
    let recv = j.find("\"sum_received\"").map(|i| &j[i..]);
    match (recv.and_then(|r| json_num(r, "bytes")), recv.and_then(|r| json_num(r, "seconds"))) {
        (Some(b), Some(s)) if out.ok() => {
            m.bytes = b as u64;
            m.seconds = s;
            if let Some(actual) = json_str(j, "sender_tcp_congestion") {
                m.cc = actual;
            }
        }
        _ => {
            let err = json_str(j, "error").unwrap_or_else(|| out.stderr_tail(3));
            m.status = Status::Failed(format!("iperf3: {err}"));
        }
    }
    Ok((m, shown))
}

/// The first number after `"key":` in `s` (enough for iperf3's flat JSON objects).
fn json_num(s: &str, key: &str) -> Option<f64> {
    let pat = format!("\"{key}\":");
    let rest = s[s.find(&pat)? + pat.len()..].trim_start();
    let end = rest.find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))?;
    rest[..end].parse().ok()
}

/// The first string after `"key":` in `s`.
fn json_str(s: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\":");
    let rest = s[s.find(&pat)? + pat.len()..].trim_start().strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_json_fields() {
        let j = r#"{"end":{"sum_sent":{"bytes": 5},"sum_received":{"start":0,"end":10.0,
            "seconds":10.000123,"bytes":123456789,"bits_per_second":9.8e7},
            "sender_tcp_congestion":"cubic"}}"#;
        let r = &j[j.find("\"sum_received\"").expect("present")..];
        assert_eq!(json_num(r, "bytes"), Some(123456789.0));
        assert_eq!(json_num(r, "seconds"), Some(10.000123));
        assert_eq!(json_str(j, "sender_tcp_congestion").as_deref(), Some("cubic"));
    }

    #[test]
    fn soku_tcp_controller_from_its_connected_event() {
        let line = r#"{"event":"connected","transport":"TLS/TCP to 10.77.0.2:4 (4 data connections; bbr, buffers up to 64 MiB (set))"}"#;
        let stderr = vec![(Duration::ZERO, "{}".to_string()), (Duration::ZERO, line.to_string())];
        assert_eq!(tcp_congestion(&stderr).as_deref(), Some("bbr"));
        assert_eq!(tcp_congestion(&stderr[..1]), None);
    }

    #[test]
    fn tool_names_round_trip() {
        for t in Tool::ALL {
            assert_eq!(Tool::parse(t.name()).expect("known"), t);
        }
        assert!(Tool::parse("ftp").is_err());
    }
}
