//! CPU efficiency on loopback: soku and scp with each cipher, and `-C` on random and
//! compressible data. sshd listens on 127.0.0.1; no emulator, no namespaces.
//!
//! Client CPU is the whole client process tree (scp + its ssh; soku + its ssh), server
//! CPU everything the sshd session ran (sshd session processes + sftp-server or
//! `soku serve`), both user + system, from `/proc` (see [`crate::proc`]).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::proc;
use crate::sshd;
use crate::tools::{self, Endpoint, Measured, SourceFile, Tool};

/// One loopback run.
#[derive(Debug)]
pub struct CpuRow {
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

/// Runs the loopback rows with a random file of `size` bytes; the `-C` rows use
/// `size / 4` (scp -C runs at a tenth of the speed).
pub fn run(soku: &Path, work: &Path, size: u64, log: &dyn Fn(&str)) -> anyhow::Result<Vec<CpuRow>> {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let sshd = sshd::start(Command::new("/usr/sbin/sshd"), std::net::Ipv4Addr::LOCALHOST, port)?;
    let cc = proc::capture(Command::new("sysctl").args(["-n", "net.ipv4.tcp_congestion_control"]))
        .unwrap_or_default();
    let client = |p: &str| Command::new(p);
    let ep = Endpoint { client: &client, sshd: &sshd, soku, tcp_cc: &cc };
    let random = SourceFile::create(&work.join("cpu-random"), size, false)?;
    let small = size / 4;
    let random_c = SourceFile::create(&work.join("cpu-random-c"), small, false)?;
    let text_c = SourceFile::create(&work.join("cpu-text-c"), small, true)?;
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let plan: Vec<(Tool, Vec<String>, &SourceFile, &'static str)> = vec![
        (Tool::Scp, s(&["-c", "aes128-gcm@openssh.com"]), &random, "random"),
        (Tool::Scp, s(&["-c", "chacha20-poly1305@openssh.com"]), &random, "random"),
        (Tool::Scp, s(&["-c", "aes128-ctr"]), &random, "random"),
        (Tool::Soku, s(&["-c", "aes128-gcm"]), &random, "random"),
        (Tool::Soku, s(&["-c", "aes256-gcm"]), &random, "random"),
        (Tool::Soku, s(&["-c", "chacha20-poly1305"]), &random, "random"),
        (Tool::Soku, vec![], &random, "random"),
        (Tool::Scp, vec![], &random, "random"),
        (Tool::Scp, vec![], &random_c, "random"),
        (Tool::Scp, s(&["-C"]), &random_c, "random"),
        (Tool::Scp, s(&["-C"]), &text_c, "text"),
        (Tool::Scp, vec![], &text_c, "text"),
        (Tool::Soku, vec![], &random_c, "random"),
        (Tool::Soku, s(&["-C"]), &random_c, "random"),
        (Tool::Soku, s(&["-C"]), &text_c, "text"),
        (Tool::Soku, vec![], &text_c, "text"),
    ];
    let mut rows = Vec::new();
    for (tool, extra, src, data) in plan {
        // Generous: 10 MB/s plus login.
        let timeout = Duration::from_secs(src.size / 10_000_000 + 60);
        let (m, command) = tools::run_copy(tool, &ep, src, &work.join("dst"), &extra, timeout)?;
        let label = if extra.is_empty() {
            format!("{tool} (default)")
        } else {
            format!("{tool} {}", extra.join(" "))
        };
        let data = format!("{data} {} MiB", src.size >> 20);
        let row = CpuRow { label, data, m, command };
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
    for f in [&random, &random_c, &text_c] {
        let _ = std::fs::remove_file(&f.path);
    }
    Ok(rows)
}
