//! `soku sftp`: an interactive session as sftp(1)'s, every transfer at soku's speed.
//!
//! - **One login.** The session's ssh logs in once and, as a copy's does, becomes the
//!   login that later ssh sessions to the host share (`client/launch/shared_login.rs`).
//!   It runs `soku serve` with the browse job (`soku_proto::browse`) on the ssh
//!   channel, which stays for the session: listings, `cd`, `mkdir`, `rm`, `rename`,
//!   `chmod`, `df` are calls there (`browse.rs`), each path held by the server to the
//!   rules of a copy (`server/serve/browse.rs`).
//! - **Transfers are copies.** `get` and `put` run the copy command through that login
//!   (`transfer.rs`): QUIC or TCP as a copy chooses, verified, resumable, with the
//!   progress line; after the first, the copies reach the server the first one left
//!   (`crate::client::kept`) over QUIC alone.
//! - **Ctrl-C** during a transfer ends that copy as it ends any copy
//!   (`crate::client::interrupt`), and the session reads the next command. The
//!   session's own ssh is started with SIGINT ignored, as sftp(1) starts its ssh: the
//!   terminal sends the signal to every process of the foreground group, and the
//!   session must outlive it (`no_interrupt.rs`).
//! - **Input**: the prompt or a batch (`input.rs`), commands as sftp's
//!   (`command.rs`), completion (`complete.rs`), listings shown (`listing.rs`).

mod browse;
mod command;
mod complete;
mod dirs;
mod input;
mod listing;
mod local;
mod no_interrupt;
mod outcome;
mod shell;
mod transfer;

use std::io::IsTerminal as _;
use std::sync::{Arc, Mutex};

use rustyline::completion::FilenameCompleter;
use soku_engine::events::{EventSink, TransferEvent};
use soku_proto::browse::BROWSE_SINCE_VERSION;
use soku_proto::message::{CopyFlags, Job, Message, Request};
use soku_proto::name::Name;

use self::browse::Browse;
use self::complete::Completion;
use self::dirs::RemoteDirs;
use self::input::Ended;
use self::shell::Shell;
use crate::cli::args::SftpArgs;
use crate::cli::spec::{self, Location, Remote};
use crate::cli::transport_mode::TransportMode;
use crate::client::launch::{Launcher, ServeCommand};
use crate::client::session::{Session, SessionOptions};
use crate::exit::{Exit, Told};
use crate::ui::say;

/// Runs `soku sftp [OPTIONS] [user@]host[:dir]`.
pub fn run(args: SftpArgs) -> anyhow::Result<()> {
    let SftpArgs { mut copy, batch_file } = args;
    let remote = destination(&copy.paths)?;
    // As sftp -b: a batch never stops to ask for a password.
    copy.ssh.batch |= batch_file.is_some();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let (browse, dirs) = rt.block_on(open(&copy, &remote))?;
    // From here on Ctrl-C is the transfers' (each copy takes it) and the prompt's (a
    // key there): outside both it must not end the session by its default action.
    rt.spawn(async {
        if let Ok(mut signals) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        {
            while signals.recv().await.is_some() {}
        }
    });
    let browse = Arc::new(tokio::sync::Mutex::new(browse));
    let dirs = Arc::new(Mutex::new(dirs));
    let shell = Shell {
        rt: rt.handle().clone(),
        browse: browse.clone(),
        dirs: dirs.clone(),
        listings: Arc::default(),
        destination: copy_destination(&remote),
        host: remote.host.clone(),
        copy,
    };
    let ended = match batch_file {
        Some(file) if file.as_os_str() == "-" => {
            input::batch(&shell, std::io::stdin().lock(), true)
        }
        Some(file) => {
            let opened = std::fs::File::open(&file).map_err(|e| {
                Exit::usage(format!(
                    "-b {}: cannot read it: {}",
                    crate::ui::visible(&file.to_string_lossy()),
                    local::reason(&e)
                ))
            })?;
            input::batch(&shell, std::io::BufReader::new(opened), true)
        }
        // Commands piped in are run as sftp runs them: echoed, a failure not the end.
        None if !std::io::stdin().is_terminal() => {
            input::batch(&shell, std::io::stdin().lock(), false)
        }
        None => {
            let completion = Completion {
                rt: rt.handle().clone(),
                browse: browse.clone(),
                dirs,
                listings: shell.listings.clone(),
                local: FilenameCompleter::new(),
            };
            input::interactive(&shell, completion)
        }
    };
    drop(shell);
    if let Ok(browse) = Arc::try_unwrap(browse) {
        rt.block_on(browse.into_inner().close());
    }
    match ended? {
        Ended::Done => Ok(()),
        // The failing command's line was said.
        Ended::Failed => Err(Told("a batch command failed".into()).into()),
        Ended::Lost => Err(Told("the session ended".into()).into()),
    }
}

/// The remote of `[user@]host[:dir]`, the one path of the command line.
fn destination(paths: &[std::ffi::OsString]) -> anyhow::Result<Remote> {
    let [destination] = paths else {
        return Err(Exit::usage(
            "soku sftp takes one destination, [user@]host[:dir]; copy files with get and put \
             inside the session, or with soku SOURCE... TARGET",
        )
        .into());
    };
    // A host alone is the host with no directory.
    let with_colon = |d: &std::ffi::OsStr| {
        let mut spelled = d.to_os_string();
        if !d.as_encoded_bytes().contains(&b':') || d.as_encoded_bytes().ends_with(b"]") {
            spelled.push(":");
        }
        spelled
    };
    match spec::parse(&with_colon(destination)) {
        Ok(Location::Remote(remote)) => Ok(remote),
        Ok(Location::Local(_)) => Err(Exit::usage(format!(
            "{}: not a host; soku sftp takes [user@]host[:dir]",
            crate::ui::visible(&destination.to_string_lossy())
        ))
        .into()),
        Err(why) => Err(Exit::usage(why).into()),
    }
}

/// Logs in, starts the browse job, and finds the start directory.
async fn open(
    copy: &crate::cli::args::CopyArgs,
    remote: &Remote,
) -> anyhow::Result<(Browse, RemoteDirs)> {
    let copy = crate::cli::config::apply(copy.clone(), Some(&remote.host))?;
    let mut launcher = Launcher::from_args(&copy.ssh, copy.verbose, copy.quiet)?;
    if let (Launcher::Ssh { .. }, false) = (&launcher, copy.no_share_login) {
        if let Err(why) = launcher.share_login(remote).await {
            if copy.verbose > 0 {
                say(&format!("soku: each transfer logs in on its own: {why}"));
            }
        }
    }
    let serve = ServeCommand::from_args(&copy.ssh);
    // The calls are small: the ssh channel carries them, and no UDP port is opened.
    let mut opts =
        SessionOptions::for_command(TransportMode::Ssh, remote.host.clone(), copy.quic_wait());
    opts.needs_version = BROWSE_SINCE_VERSION;
    opts.remote_soku = copy.ssh.remote_soku.clone();
    opts.stall = copy.stall_limit();
    opts.attach_timeout = launcher.attach_timeout(false);
    opts.dial_errors = launcher.dial_errors(false);
    let events = Warnings { quiet: copy.quiet };
    let deploy = !copy.ssh.no_deploy;
    let (session, link) = Session::launch_shaped(
        &launcher,
        remote,
        &serve,
        &opts,
        &events,
        deploy,
        no_interrupt::ignore_interrupt,
    )
    .await?;
    link.tx
        .send_control(Message::Request(Request { job: Job::Browse, flags: CopyFlags::NONE }))
        .await?;
    let mut browse = Browse::new(session, link);
    let home = browse.directory(&Name::from("")).await?;
    let cwd = match remote.path.as_bytes() {
        b"" => home.clone(),
        asked => {
            let asked = RemoteDirs { cwd: home.clone(), home: home.clone() }.resolve_bytes(asked);
            browse.directory(&asked).await?
        }
    };
    Ok((browse, RemoteDirs { cwd, home }))
}

/// `[user@]host` as a copy's remote path starts with it (an IPv6 address in brackets).
fn copy_destination(remote: &Remote) -> String {
    let host =
        if remote.host.contains(':') { format!("[{}]", remote.host) } else { remote.host.clone() };
    match &remote.user {
        Some(user) => format!("{user}@{host}"),
        None => host,
    }
}

/// The session's events, while it starts: warnings only.
struct Warnings {
    quiet: bool,
}

impl EventSink for Warnings {
    fn event(&self, event: TransferEvent) {
        if let TransferEvent::Warning(line) = event {
            if !self.quiet {
                say(&format!("soku: {line}"));
            }
        }
    }
}
