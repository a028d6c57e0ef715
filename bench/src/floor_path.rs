//! The matrix's `quinn-floor` rows: soku's QUIC transport alone on the emulated path.
//!
//! `soku-floor` (`src/floor.rs`) runs one side in each namespace: the sender in A reads
//! and hashes the source's 1 MiB chunks as soku's sender does, the receiver in B checks
//! each against its hash and writes it into the target, directly where soku would. Both
//! run soku's own endpoints: its windows, cipher, ACK frequency, receive socket and
//! congestion controller. No ssh login, no session, no manifest: beside soku's row on
//! the same path, the difference is what soku's own layers cost, in time and CPU.
//!
//! The row's seconds are the sender's own, from its connection's start to the last
//! chunk acknowledged (no process start, no login); its CPU and peak memory are each
//! side's whole process's. It moves the source's whole MiBs (a tail under 1 MiB is left
//! out), and the bench checks what arrived against that much of the source.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::proc;
use crate::tools::{self, Measured, SourceFile, Status};

/// The port the receiver listens on in namespace B (sshd has 22, iperf3 5201).
const PORT: u16 = 9700;

/// How long the receiver may take to listen, and to end once the sender has ended.
const SIDE_WAIT: Duration = Duration::from_secs(15);

/// The `soku-floor` program built beside this one.
pub fn binary() -> anyhow::Result<PathBuf> {
    Ok(std::env::current_exe()?.with_file_name("soku-floor"))
}

/// One `quinn-floor` row on `path`: `src` from namespace A into `dst_dir` in B,
/// bounded by `timeout`. Returns the figures and the commands run.
pub fn run(
    path: &soku_netem::Path,
    src: &SourceFile,
    dst_dir: &Path,
    timeout: Duration,
) -> anyhow::Result<(Measured, String)> {
    let floor = binary()?;
    if !floor.exists() {
        return Ok((tools::skipped("soku-floor is not built beside soku-bench"), "-".into()));
    }
    let mib = src.size >> 20;
    if mib == 0 {
        return Ok((tools::skipped("the source is under 1 MiB"), "-".into()));
    }
    let keys = tempfile::Builder::new().prefix("soku-bench-floor-keys-").tempdir()?;
    let mut make_keys = Command::new(&floor);
    make_keys.arg("--make-keys").arg(keys.path());
    let made = proc::run(make_keys, SIDE_WAIT)?;
    anyhow::ensure!(made.ok(), "soku-floor --make-keys: {}", made.stderr_tail(3));
    let _ = std::fs::remove_dir_all(dst_dir);
    std::fs::create_dir_all(dst_dir)?;
    let dst = dst_dir.join("file");
    let addr = format!("{}:{PORT}", path.addr_b());
    let mib_arg = mib.to_string();

    let program = floor.to_str().context("soku-floor's path is not UTF-8")?;
    let mut rcv = path.command_b(program);
    rcv.arg("--keys").arg(keys.path()).args(["--receive", &addr, "--mib", &mib_arg]);
    rcv.args(["--work", "write", "--direct", "--csv", "--target"]).arg(&dst);
    let mut snd = path.command_a(program);
    snd.arg("--keys").arg(keys.path()).args(["--send", &addr, "--mib", &mib_arg, "--csv"]);
    snd.arg("--from").arg(&src.path);
    let shown = format!("{} & {}", proc::show(&rcv), proc::show(&snd));

    let receiver = Receiver::start(rcv)?;
    if receiver.line(SIDE_WAIT).as_deref() != Some("listening") {
        let m = failed(format!("the receiver did not listen: {}", receiver.end()));
        return Ok((m, shown));
    }
    let started = Instant::now();
    let out = proc::run(snd, timeout)?;
    let figures = receiver.line(SIDE_WAIT);
    let receiver_err = receiver.end();
    let m = match (side_figures(&out.stdout), figures.as_deref().and_then(side_figures)) {
        _ if out.timed_out() => Measured { status: Status::Timeout, ..tools::skipped("") },
        (Some(sender), Some(receiver)) if out.ok() => {
            let bytes = mib << 20;
            let status = match same_prefix(&src.path, &dst, bytes) {
                Ok(true) => Status::Ok,
                Ok(false) => Status::Failed("what arrived differs from the source".into()),
                Err(e) => Status::Failed(format!("checking what arrived: {e:#}")),
            };
            Measured {
                cc: "soku-cc".into(),
                bytes,
                seconds: sender.seconds,
                status,
                client_cpu: sender.cpu,
                server_cpu: receiver.cpu,
                peak_rss_mib: (sender.peak_rss_mib, receiver.peak_rss_mib),
                stderr: out.stderr,
                started: Some(started),
            }
        }
        _ => failed(format!("sender: {}; receiver: {receiver_err}", out.stderr_tail(3))),
    };
    let _ = std::fs::remove_dir_all(dst_dir);
    Ok((m, shown))
}

/// A failed row, saying why.
fn failed(why: String) -> Measured {
    Measured { status: Status::Failed(why), ..tools::skipped("") }
}

/// A side's `--csv` line: its seconds, its process's CPU seconds and its peak resident
/// memory in MiB.
fn side_figures(line: &str) -> Option<Figures> {
    let fields: Vec<f64> = line.trim().split(',').map(str::parse).collect::<Result<_, _>>().ok()?;
    match fields[..] {
        [seconds, cpu, peak_rss_mib] => Some(Figures { seconds, cpu, peak_rss_mib }),
        _ => None,
    }
}

/// What one side reports of itself.
#[derive(Debug, PartialEq)]
struct Figures {
    seconds: f64,
    cpu: f64,
    peak_rss_mib: f64,
}

/// Whether the first `len` bytes of `src` are all of `dst`.
fn same_prefix(src: &Path, dst: &Path, len: u64) -> anyhow::Result<bool> {
    let size = std::fs::metadata(dst).with_context(|| dst.display().to_string())?.len();
    if size != len {
        return Ok(false);
    }
    let file = std::fs::File::open(src).with_context(|| src.display().to_string())?;
    let mut prefix = blake3::Hasher::new();
    std::io::copy(&mut file.take(len), &mut prefix)?;
    Ok(prefix.finalize() == tools::hash_file(dst)?)
}

/// The receiving side, running: its stdout's lines as they come, its stderr kept.
struct Receiver {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

impl Receiver {
    fn start(mut cmd: Command) -> anyhow::Result<Receiver> {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().context("starting soku-floor's receiver")?;
        let (out, err) = (child.stdout.take(), child.stderr.take());
        let (line_tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            // Ends when the receiver closes its stdout (it ends or is killed).
            for line in
                out.into_iter().flat_map(|o| BufReader::new(o).lines().map_while(Result::ok))
            {
                if line_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (err_tx, stderr) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut err) = err {
                let _ = err.read_to_string(&mut text);
            }
            let _ = err_tx.send(text);
        });
        Ok(Receiver { child, lines, stderr })
    }

    /// Its next line of stdout, waiting at most `wait`.
    fn line(&self, wait: Duration) -> Option<String> {
        self.lines.recv_timeout(wait).ok()
    }

    /// Ends it (killed by PID if it has not ended within [`SIDE_WAIT`]) and returns the
    /// last line of its stderr.
    fn end(mut self) -> String {
        let deadline = Instant::now() + SIDE_WAIT;
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let text = self.stderr.recv_timeout(SIDE_WAIT).unwrap_or_default();
        text.lines().last().unwrap_or("no message").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_line_gives_seconds_cpu_and_memory() {
        let figures = Figures { seconds: 12.345, cpu: 0.87, peak_rss_mib: 41.5 };
        assert_eq!(side_figures("12.345,0.870,41.5\n"), Some(figures));
        assert_eq!(side_figures("listening"), None);
        assert_eq!(side_figures("1.0,0.5"), None);
        assert_eq!(side_figures("1.0,x,3"), None);
    }

    #[test]
    fn only_the_sources_first_bytes_are_compared() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
        std::fs::write(&src, b"abcdefgh").expect("src");
        std::fs::write(&dst, b"abcd").expect("dst");
        assert!(same_prefix(&src, &dst, 4).expect("compared"));
        assert!(!same_prefix(&src, &dst, 5).expect("compared"), "dst is shorter");
        std::fs::write(&dst, b"abce").expect("dst");
        assert!(!same_prefix(&src, &dst, 4).expect("compared"), "a byte differs");
    }
}
