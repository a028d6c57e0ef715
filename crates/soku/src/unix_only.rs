//! The commands that run on Unix systems only, and what Windows says instead.
//!
//! - `soku serve`, the remote end, resolves paths through descriptors of directories
//!   (`openat`, `O_PATH`) and fences users by their ids: a Windows machine is a client.
//! - `soku proxy` and `soku relay` hand a socket to ssh and splice between sockets
//!   (`soku_relay`); Windows' `ssh.exe` dials on its own.
//! - `soku sftp` takes the terminal raw and SIGINT through Unix's calls.
//!
//! Everything else (copies both ways, `soku sync`, `-R`/`-3`, `soku diagnose`) runs on
//! Windows too. The README's platforms table says the same.

use crate::cli::args::{ProxyArgs, RelayArgs, ServeArgs, SftpArgs};

/// `soku serve`.
#[cfg(unix)]
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    crate::server::serve::run_on_stdio(args).await
}

/// `soku sftp`.
#[cfg(unix)]
pub fn sftp(args: SftpArgs) -> anyhow::Result<()> {
    crate::client::sftp::run(args)
}

/// `soku proxy`, or with `--pass-fd`, connect as ssh would and hand the socket to ssh.
#[cfg(unix)]
pub fn proxy(args: &ProxyArgs) -> anyhow::Result<()> {
    use soku_relay::dial::{DialOptions, Family};
    let buffers = soku_relay::BufferOptions { sndbuf: args.sndbuf, rcvbuf: args.rcvbuf };
    if !args.pass_fd {
        return soku_relay::proxy::run(&args.host, args.port, buffers).map_err(Into::into);
    }
    let family = match args.family.as_str() {
        "any" => Family::Any,
        "inet" => Family::Inet,
        "inet6" => Family::Inet6,
        other => anyhow::bail!("--family {other}: expected any, inet or inet6"),
    };
    let timeout = args.connect_timeout.filter(|&s| s > 0).map(std::time::Duration::from_secs);
    let dialed =
        soku_relay::dial::dial_and_pass(&args.host, args.port, DialOptions { family, timeout });
    if let (Err(e), Some(path)) = (&dialed, &args.error_file) {
        // Best effort: the copy's own verdict follows either way.
        let _ = std::fs::write(path, format!("{e}\n"));
    }
    dialed.map_err(anyhow::Error::from)
}

/// `soku relay`.
#[cfg(unix)]
pub fn relay(args: &RelayArgs) -> anyhow::Result<()> {
    let buffers = soku_relay::BufferOptions { sndbuf: args.sndbuf, rcvbuf: args.rcvbuf };
    soku_relay::relay::run(&args.listen, &args.to, buffers).map_err(Into::into)
}

#[cfg(windows)]
pub async fn serve(_args: ServeArgs) -> anyhow::Result<()> {
    Err(absent("soku serve", "run it on the Linux or macOS end of a copy"))
}

#[cfg(windows)]
pub fn sftp(_args: SftpArgs) -> anyhow::Result<()> {
    Err(absent("soku sftp", "copy with soku HOST:PATH DIR, or use Windows' sftp.exe"))
}

#[cfg(windows)]
pub fn proxy(_args: &ProxyArgs) -> anyhow::Result<()> {
    Err(absent("soku proxy", "ssh.exe dials the host itself"))
}

#[cfg(windows)]
pub fn relay(_args: &RelayArgs) -> anyhow::Result<()> {
    Err(absent("soku relay", "run it on a Linux or macOS host on the path"))
}

/// The usage error of a Unix-only command on Windows.
#[cfg(windows)]
fn absent(command: &str, instead: &str) -> anyhow::Error {
    crate::exit::Exit::usage(format!(
        "{command} runs on Linux and macOS only (this is Windows): {instead}"
    ))
    .into()
}
