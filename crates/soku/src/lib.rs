//! soku: fast, secure file transfer with scp's syntax.
//!
//! # Layout
//! - [`cli`]: what the user types: the command line, scp-style paths, the config files.
//! - [`client`]: the copy, the remote server it starts, and the session that carries it;
//!   `soku sync` and `soku sftp`, built on the copy.
//! - [`server`]: `soku serve`, the remote end: its bootstrap, ports and job.
//! - [`carrier`]: TLS over TCP beside QUIC, and the watches that tell when to leave UDP.
//! - [`tunnel`]: TCP connections carried over soku's QUIC transport.
//! - [`diagnose`]: `soku diagnose`, what limits a copy on a path, and its verdict.
//! - [`ui`]: the engine's typed events (`soku_engine::events`), rendered only here.
//! - [`report`]: the same events as an HTML page after the copy (`--report`).
//! - [`exit`]: the exit-code table, and how an error becomes a line and a status.
//! - [`sys`]: what the binary asks of the operating system, one file per platform;
//!   [`unix_only`]: the commands that run on Unix systems only, and what Windows says.
//!
//! [`main`] dispatches the command line (the `soku` binary's `main.rs` only calls it).
//! The copy itself (sender, receiver, the data-path seam) is the `soku-engine` crate.

// On Windows `soku serve` is compiled out (`unix_only`), and what modules shared with
// the client keep for it goes unused there; the Unix builds still flag dead code.
#![cfg_attr(windows, allow(dead_code))]

mod carrier;
mod cli;
mod client;
mod diagnose;
mod exit;
mod report;
mod server;
mod sys;
mod tunnel;
mod ui;
mod unix_only;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use cli::args::{Cli, Command};

/// An option soku does not know, in one line that names it and the ways out; clap's
/// tip ("to pass '-Z' as a value, use '-- -Z'") would send the user to write it after
/// `--`, where it is read as a file name. Any other parse error (and --help, --version)
/// as clap says it.
fn usage_error(err: clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let unknown = match (err.kind(), err.get(ContextKind::InvalidArg)) {
        (ErrorKind::UnknownArgument, Some(ContextValue::String(arg))) => Some(arg.clone()),
        _ => None,
    };
    let Some(arg) = unknown else {
        let _ = err.print();
        return ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2));
    };
    let shown = ui::visible(&arg);
    ui::say(&format!(
        "soku: unknown option {shown}: soku takes scp's options and its own (soku --help \
         lists them); a file whose name starts with '-' is written ./{shown}"
    ));
    ExitCode::from(2)
}

/// Runs the command line the process was started with, and says how it ended.
pub fn main() -> ExitCode {
    no_huge_pages_for_small_buffers();
    let args = copy_of_a_file_named_config(std::env::args_os().collect());
    let parsed = Cli::command()
        .try_get_matches_from(args)
        .and_then(|matches| Cli::from_arg_matches(&matches).map(|cli| (cli, matches)));
    let cli = match parsed {
        Ok((mut cli, matches)) => {
            // The include and exclude rules, ordered as typed (`cli::filters`).
            let (copy, matches) = match &mut cli.command {
                None => (Some(&mut cli.copy), Some(&matches)),
                Some(Command::Sync(args)) => {
                    (Some(&mut args.copy), matches.subcommand_matches("sync"))
                }
                Some(Command::Sftp(args)) => {
                    (Some(&mut args.copy), matches.subcommand_matches("sftp"))
                }
                Some(_) => (None, None),
            };
            if let (Some(copy), Some(matches)) = (copy, matches) {
                match cli::filters::ordered(matches) {
                    Ok(rules) => copy.filter = rules,
                    Err(line) => {
                        ui::say(&format!("soku: {line}"));
                        return ExitCode::from(2);
                    }
                }
            }
            cli
        }
        Err(err) => return usage_error(err),
    };
    let json = match &cli.command {
        None => cli.copy.json,
        Some(Command::Sync(args)) => args.copy.json,
        Some(Command::Diagnose(args)) => args.json,
        Some(_) => false,
    };
    if json {
        ui::set_json();
    }
    let result = match cli.command {
        Some(Command::Config(args)) => cli::config::show(args.host.as_deref().map(without_user)),
        Some(Command::Man) => print_man(),
        Some(Command::Completions { shell }) => {
            clap_complete::generate(shell, &mut Cli::command(), "soku", &mut std::io::stdout());
            Ok(())
        }
        Some(Command::Proxy(args)) => unix_only::proxy(&args),
        Some(Command::Relay(args)) => unix_only::relay(&args),
        Some(Command::Demo(args)) => block_on(client::demo::run(args)),
        Some(Command::Sync(args)) => block_on(client::sync::run(*args)).map(|_| ()),
        Some(Command::Sftp(args)) => unix_only::sftp(*args),
        Some(Command::Tunnel(args)) => block_on(tunnel::run(args)),
        Some(Command::Diagnose(args)) => block_on(diagnose::run(args)),
        Some(Command::Serve(args)) => block_on(unix_only::serve(args)),
        None => block_on(client::copy::run(cli.copy)).map(|_| ()),
    };
    exit::report(result)
}

/// Turns transparent huge pages off for this process (and the ssh it starts). mimalloc
/// asks for them on its arenas (`madvise(MADV_HUGEPAGE)`), so a buffer in a fresh part of
/// an arena costs the kernel a whole 2 MiB page to zero, however small the buffer: a
/// small file's chunk buffer is read into once and freed, and freed memory is returned
/// to the kernel after a while, so a copy of many small files zeroed a huge page again
/// and again (most of `clear_page_erms`, under `do_huge_pmd_anonymous_page`, in `perf`).
/// Measured in `lab/2026-11-27-small-files-lan`. A failure (an old kernel)
/// changes nothing else.
fn no_huge_pages_for_small_buffers() {
    sys::no_huge_pages();
}

/// `soku config host:dir/` and `soku config a b` copy a file named `config`, as scp
/// would; only `soku config [HOST]` is the settings command. The copy's `config` becomes
/// `./config`, which names the same file and which clap cannot take for the command.
fn copy_of_a_file_named_config(mut args: Vec<OsString>) -> Vec<OsString> {
    let is_copy = args.get(1).is_some_and(|a| a == "config") && {
        let rest: Vec<&str> = args[2..].iter().filter_map(|a| a.to_str()).collect();
        let paths = rest.iter().filter(|a| !a.starts_with('-')).count();
        paths >= 2
            || rest.iter().any(|a| !a.starts_with('-') && (a.contains(':') || a.contains('/')))
    };
    if is_copy {
        args[1] = OsString::from("./config");
    }
    args
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

/// `user@host` matches config sections by its host, as a copy's `user@host:path` does.
fn without_user(destination: &str) -> &str {
    destination.rsplit_once('@').map_or(destination, |(_, host)| host)
}

fn print_man() -> anyhow::Result<()> {
    exit::write_stdout(&man_page()?)
}

/// The man page: clap's sections, the commands listed here (clap would point to a page
/// of their own, `soku-diagnose(1)`, which no one installs: each has `--help`), and the
/// exit statuses ([`exit::STATUSES`]).
fn man_page() -> anyhow::Result<Vec<u8>> {
    let cmd = Cli::command();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    out.extend_from_slice(b".SH COMMANDS\n");
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        let name = roff_text(sub.get_name());
        let line = format!(
            ".TP\n\\fBsoku {name}\\fR\n{} (see soku {name} \\-\\-help)\n",
            roff_text(&about)
        );
        out.extend_from_slice(line.as_bytes());
    }
    out.extend_from_slice(b".SH \"EXIT STATUS\"\n");
    for (code, meaning) in exit::STATUSES {
        out.extend_from_slice(format!(".TP\n\\fB{code}\\fR\n{}\n", roff_text(meaning)).as_bytes());
    }
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// Text for a roff paragraph: backslashes and hyphens escaped, no line that starts with a
/// control character.
fn roff_text(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    match escaped.chars().next() {
        Some('.' | '\'') => format!("\\&{escaped}"),
        _ => escaped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(args: &[&str]) -> Vec<String> {
        let args = args.iter().map(OsString::from).collect();
        copy_of_a_file_named_config(args).into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    /// The man page names no page that does not exist and says what each exit status
    /// means.
    #[test]
    fn the_man_page_lists_commands_and_exit_statuses() {
        let page = String::from_utf8(man_page().expect("rendered")).expect("text");
        assert!(!page.contains("soku\\-diagnose(1)") && !page.contains("(1)\n.TP"), "{page}");
        assert!(page.contains(".SH COMMANDS") && page.contains("soku diagnose"), "{page}");
        assert!(page.contains(".SH \"EXIT STATUS\""), "{page}");
        for (code, _) in exit::STATUSES {
            assert!(page.contains(&format!("\\fB{code}\\fR")), "{code}: {page}");
        }
    }

    #[test]
    fn config_with_a_host_alone_is_the_settings_command() {
        assert_eq!(rewritten(&["soku", "config", "db.lab"]), ["soku", "config", "db.lab"]);
        assert_eq!(rewritten(&["soku", "config"]), ["soku", "config"]);
        assert_eq!(rewritten(&["soku", "config", "--help"]), ["soku", "config", "--help"]);
    }

    #[test]
    fn config_followed_by_paths_is_a_copy_of_that_file() {
        assert_eq!(rewritten(&["soku", "config", "h:"]), ["soku", "./config", "h:"]);
        assert_eq!(rewritten(&["soku", "config", "dir/"]), ["soku", "./config", "dir/"]);
        assert_eq!(rewritten(&["soku", "config", "a", "b"]), ["soku", "./config", "a", "b"]);
        assert_eq!(rewritten(&["soku", "-r", "config", "h:"]), ["soku", "-r", "config", "h:"]);
    }

    #[test]
    fn the_user_is_not_part_of_the_host() {
        assert_eq!(without_user("alice@db.lab"), "db.lab");
        assert_eq!(without_user("db.lab"), "db.lab");
    }
}
