//! soku: fast, secure file transfer with scp's syntax.
//!
//! # Layout
//! - [`cli`]: the one command-line definition (help, man page, completions).
//! - [`spec`]: scp-style `[user@]host:path` parsing.
//! - [`copy`]: the copy command; [`demo`]: the same over loopback with no remote.
//! - [`launch`]: starting the remote `soku serve` (ssh, `-S`, `-e`, or locally).
//! - [`session`]: client bootstrap (hellos, QUIC or fallback) into a `soku_engine` link;
//!   [`serve`]: the server's bootstrap and the job the client asks for.
//! - [`tunnel`]: TCP connections carried over soku's QUIC transport.
//! - [`diagnose`]: `soku diagnose`, what limits a copy on a path, and its verdict.
//! - [`ui`]: the engine's typed events (`soku_engine::events`), rendered only here.
//!
//! The copy itself (sender, receiver, the data-path seam) is the `soku-engine` crate.
//! - `main`: dispatch and the exit-code table ([`exit`]).

mod cli;
mod copy;
mod demo;
mod diagnose;
mod exit;
mod launch;
mod path_memory;
mod policing;
mod ports;
mod retry;
mod serve;
mod session;
mod spec;
mod tcp_path;
mod tunnel;
mod ui;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use cli::{Cli, Command};

/// mimalloc instead of glibc malloc: every chunk moves through 1 MiB buffers, which
/// glibc serves from fresh mmaps or trimmed arenas, so each one was page-faulted and
/// zeroed again (~5 % of the loopback profile); mimalloc keeps them warm per thread.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Man) => print_man(),
        Some(Command::Completions { shell }) => {
            clap_complete::generate(shell, &mut Cli::command(), "soku", &mut std::io::stdout());
            Ok(())
        }
        Some(Command::Proxy(args)) => soku_relay::proxy::run(
            &args.host,
            args.port,
            soku_relay::BufferOptions { sndbuf: args.sndbuf, rcvbuf: args.rcvbuf },
        )
        .map_err(anyhow::Error::from),
        Some(Command::Relay(args)) => soku_relay::relay::run(
            &args.listen,
            &args.to,
            soku_relay::BufferOptions { sndbuf: args.sndbuf, rcvbuf: args.rcvbuf },
        )
        .map_err(anyhow::Error::from),
        Some(Command::Demo(args)) => block_on(demo::run(args)),
        Some(Command::Tunnel(args)) => block_on(tunnel::run(args)),
        Some(Command::Diagnose(args)) => block_on(diagnose::run(args)),
        Some(Command::Serve(args)) => block_on(serve::run(args)),
        None => block_on(copy::run(cli.copy)).map(|_| ()),
    };
    exit::report(result)
}

/// Runs `work` on a multi-threaded runtime, and leaves as soon as it is done: the
/// runtime is not waited for, since a read of stdin blocks one of its threads until the
/// peer closes it, and a server that gave up on a stalled client must not wait for that.
fn block_on<T>(work: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = rt.block_on(work);
    rt.shutdown_background();
    result
}

fn print_man() -> anyhow::Result<()> {
    let man = clap_mangen::Man::new(Cli::command());
    let mut out = Vec::new();
    man.render(&mut out)?;
    exit::write_stdout(&out)
}
