//! soku: fast, secure file transfer with scp's syntax.
//!
//! # Layout
//! - [`cli`]: the one command-line definition (help, man page, completions).
//! - `main`: dispatch and the exit-code table ([`exit`]).

mod cli;
mod exit;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use cli::{Cli, Command};

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
        Some(Command::Demo(_)) | Some(Command::Serve(_)) | None => {
            Err(anyhow::anyhow!("not implemented yet"))
        }
    };
    exit::report(result)
}

fn print_man() -> anyhow::Result<()> {
    let man = clap_mangen::Man::new(Cli::command());
    let mut out = Vec::new();
    man.render(&mut out)?;
    exit::write_stdout(&out)
}
