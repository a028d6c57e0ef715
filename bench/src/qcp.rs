//! qcp, the QUIC Copier (crates.io `qcp`, <https://github.com/crazyscot/qcp>): the
//! bench finds or installs it itself, pinned to one version.
//!
//! Order: `--qcp PATH` if given; else the binary a previous run installed under
//! [`default_root`] (next to the bench's own target directory), if `--version` says it
//! is [`VERSION`]; else `cargo install qcp --locked --version =VERSION --root ROOT`
//! (crates.io, qcp's own `Cargo.lock`), bounded by [`INSTALL_TIMEOUT`]. When none of
//! that works (no network, no cargo) the caller gets the reason, and the qcp rows are
//! reported as skipped with it; the rest of the bench runs as usual.
//!
//! qcp logs in with ssh and starts `qcp --server` on the remote side: the bench passes
//! the same binary as `--remote-qcp-binary` (qcp's option for a remote program that is
//! not on the login's `PATH`), as it passes `--remote-soku` to soku: both namespaces see
//! one filesystem.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::proc;

/// The qcp release the bench installs (the newest 0.9.x on crates.io when it was added).
pub const VERSION: &str = "0.9.1";

/// Upper bound of `cargo install`: it compiled qcp in about 2 minutes on the 2-core
/// machine of the `lab/` entries; ten times that covers a busy or slow machine.
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// How long `qcp --version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// A usable qcp.
#[derive(Debug, Clone)]
pub struct Qcp {
    /// The binary (absolute).
    pub bin: PathBuf,
    /// Its `--version` line.
    pub version: String,
    /// How it was found: `--qcp`, cached, or installed (and how long that took).
    pub origin: String,
}

/// Where the bench installs qcp: `bench-tools/qcp-VERSION` in the cargo target directory
/// the running `soku-bench` was built in (`target/release/soku-bench` ->
/// `target/bench-tools/qcp-VERSION`), so a fresh clone gets it on its first run and
/// `cargo clean` removes it.
pub fn default_root() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(crate::out_dir::target_dir(&exe).join("bench-tools").join(format!("qcp-{VERSION}")))
}

/// The `--version` line of `bin`, if it runs within [`VERSION_TIMEOUT`].
fn version_of(bin: &Path) -> Result<String, String> {
    let out = proc::run(
        {
            let mut c = Command::new(bin);
            c.arg("--version");
            c
        },
        VERSION_TIMEOUT,
    )
    .map_err(|e| format!("{}: {e:#}", bin.display()))?;
    if !out.ok() {
        return Err(format!("{} --version failed: {}", bin.display(), out.stderr_tail(2)));
    }
    Ok(out.stdout.lines().next().unwrap_or_default().trim().to_string())
}

/// True if a `--version` line names [`VERSION`] (`qcp 0.9.1+gunknown`, `qcp 0.9.1`).
fn is_pinned(version_line: &str) -> bool {
    version_line
        .strip_prefix("qcp ")
        .map(|v| v.split(['+', ' ']).next() == Some(VERSION))
        .unwrap_or(false)
}

/// The cargo to install with: `$CARGO` (set under `cargo run`), `cargo` on `PATH`, or
/// rustup's default location.
fn cargo() -> PathBuf {
    if let Some(c) = std::env::var_os("CARGO").filter(|c| !c.is_empty()) {
        return c.into();
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("cargo").is_file()))
        .unwrap_or(false);
    if !on_path {
        if let Some(home) = std::env::var_os("HOME") {
            let c = Path::new(&home).join(".cargo/bin/cargo");
            if c.is_file() {
                return c;
            }
        }
    }
    "cargo".into()
}

/// Finds or installs qcp (see the module's documentation). `Err` is the reason the qcp
/// rows will be skipped.
pub fn ensure(explicit: Option<&Path>, log: &dyn Fn(&str)) -> Result<Qcp, String> {
    if let Some(bin) = explicit {
        let bin = bin.canonicalize().map_err(|e| format!("--qcp {}: {e}", bin.display()))?;
        let version = version_of(&bin)?;
        return Ok(Qcp { bin, version, origin: "given with --qcp".into() });
    }
    let root = default_root().map_err(|e| format!("cannot place qcp's install dir: {e:#}"))?;
    let bin = root.join("bin").join("qcp");
    if bin.is_file() {
        match version_of(&bin) {
            Ok(v) if is_pinned(&v) => {
                return Ok(Qcp {
                    bin,
                    version: v,
                    origin: format!("installed earlier in {}", root.display()),
                });
            }
            Ok(v) => log(&format!("{} is {v:?}, not {VERSION}: reinstalling", bin.display())),
            Err(e) => log(&format!("{e}: reinstalling")),
        }
    }
    let cargo = cargo();
    let mut cmd = Command::new(&cargo);
    cmd.args(["install", "qcp", "--locked", "--force", "--version"])
        .arg(format!("={VERSION}"))
        .arg("--root")
        .arg(&root)
        // Build in cargo's own temporary dir, not in the target dir this bench was
        // built in (CARGO_TARGET_DIR would make cargo install build there).
        .env_remove("CARGO_TARGET_DIR");
    log(&format!(
        "qcp {VERSION} not found: {} (at most {} min)",
        soku_bench::proc::show(&cmd),
        INSTALL_TIMEOUT.as_secs() / 60
    ));
    let t0 = Instant::now();
    let out = proc::run(cmd, INSTALL_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e:#}", cargo.display()))?;
    if out.timed_out() {
        return Err(format!(
            "cargo install qcp {VERSION} did not finish in {} s",
            INSTALL_TIMEOUT.as_secs()
        ));
    }
    if !out.ok() {
        return Err(format!("cargo install qcp {VERSION} failed: {}", why_failed(&out.stderr)));
    }
    let version = version_of(&bin)?;
    if !is_pinned(&version) {
        return Err(format!("cargo installed {version:?}, not qcp {VERSION}"));
    }
    let secs = t0.elapsed().as_secs_f64();
    log(&format!("installed {version} in {secs:.0} s: {}", bin.display()));
    Ok(Qcp {
        bin,
        version,
        origin: format!("installed by this run in {secs:.0} s into {}", root.display()),
    })
}

/// The gist of cargo's stderr: its first `error` line and its last line.
fn why_failed(stderr: &[(Duration, String)]) -> String {
    let lines: Vec<&str> = stderr.iter().map(|(_, l)| l.trim()).filter(|l| !l.is_empty()).collect();
    let mut picked: Vec<&str> = Vec::new();
    if let Some(e) = lines.iter().find(|l| l.starts_with("error")) {
        picked.push(e);
    }
    if let Some(last) = lines.last().filter(|l| !picked.contains(l)) {
        picked.push(last);
    }
    if picked.is_empty() {
        "no message".into()
    } else {
        picked.join("; ")
    }
}

/// The configuration files qcp reads (its `--config-files`) that exist on this machine:
/// they would change its "defaults" on both sides (client and `qcp --server` run here).
pub fn config_files_present(q: &Qcp) -> Vec<String> {
    let mut cmd = Command::new(&q.bin);
    cmd.arg("--config-files");
    let Ok(out) = proc::run(cmd, VERSION_TIMEOUT) else { return vec!["?".into()] };
    // `["/etc/qcp.conf", "/root/.config/qcp/qcp.conf", "/root/.qcp.conf"]`
    out.stdout
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|p| Path::new(p).exists())
        .map(str::to_string)
        .collect()
}

/// ssh's port and options for qcp: `-S` before each argument (qcp's own `-P` is its
/// remote UDP port).
pub fn ssh_passthrough(port: &str, ssh_args: &[String]) -> Vec<String> {
    ["-p".to_string(), port.to_string()]
        .iter()
        .chain(ssh_args)
        .flat_map(|a| ["-S".to_string(), a.clone()])
        .collect()
}

/// qcp's hand-tuned options: the link's rate as `--rx`/`--tx` (bytes per second, as qcp
/// wants them), its RTT as `--rtt` (whole ms, at least 1: qcp rejects 0), and BBR.
/// qcp sizes its QUIC windows from these: receive window = rate x RTT, send window
/// 8x that (qcp's `src/config/structure.rs`), and starts with an RTT estimate of 2x
/// `--rtt`. On loopback (`None`) there is no link: 1250M (10 Gbit/s, more than this
/// machine moves) and 10 ms, a 12.5 MB window, above what qcp's defaults (12.5 MB/s x
/// 300 ms = 3.75 MB) give.
pub fn tuning(link: Option<(u64, Duration)>) -> Vec<String> {
    let (rate, rtt) = match link {
        Some((bps, rtt)) => ((bps / 8).to_string(), (rtt.as_millis().clamp(1, 65_535)).to_string()),
        None => ("1250M".to_string(), "10".to_string()),
    };
    ["--rx", &rate, "--tx", &rate, "--rtt", &rtt, "--congestion", "bbr"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The congestion controller a qcp command line asks for (`--congestion X`; qcp's
/// default is CUBIC), as quinn's: qcp runs quinn's controllers.
pub fn congestion(args: &[String]) -> String {
    let cc = args
        .iter()
        .position(|a| a == "--congestion")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
        .unwrap_or("cubic");
    format!("quinn-{cc}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_version_lines() {
        assert!(is_pinned("qcp 0.9.1+gunknown"));
        assert!(is_pinned("qcp 0.9.1"));
        assert!(!is_pinned("qcp 0.9.10"));
        assert!(!is_pinned("qcp 0.8.1"));
        assert!(!is_pinned("scp 0.9.1"));
        assert!(!is_pinned(""));
    }

    #[test]
    fn tuning_follows_the_link() {
        let t = tuning(Some((100_000_000, Duration::from_millis(50))));
        assert_eq!(t.join(" "), "--rx 12500000 --tx 12500000 --rtt 50 --congestion bbr");
        let t = tuning(Some((1_000_000_000, Duration::ZERO)));
        assert_eq!(t.join(" "), "--rx 125000000 --tx 125000000 --rtt 1 --congestion bbr");
        assert_eq!(congestion(&t), "quinn-bbr");
        assert_eq!(congestion(&[]), "quinn-cubic");
        assert!(tuning(None).join(" ").starts_with("--rx 1250M"));
    }
}
