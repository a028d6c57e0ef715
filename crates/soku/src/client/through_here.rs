//! A copy between two remote hosts through this one (`-3`, and scp's default): a
//! session to each host, the origin's soku asked to send and the destination's to
//! receive, and the two links joined here by `soku_engine::bridge`, which passes every
//! chunk on as it arrives (nothing is stored here) with the origin's BLAKE3, checked at
//! the destination. What the destination holds is told to the origin as in any copy,
//! so a rerun, or a new pair of sessions after a lost connection, sends only the rest.
//!
//! Both hosts must speak this soku's newest protocol (each is sent this soku when it
//! may be, as any remote is): the bridge passes one side's messages to the other as they
//! are, so both must read them alike.

use std::sync::Arc;
use std::time::{Duration, Instant};

use soku_engine::events::{EventSink, TransferEvent};
use soku_engine::{bridge, CopyOptions};
use soku_proto::message::{Job, Message};
use soku_proto::name::Name;
use soku_proto::path::NameFilter;
use soku_transport::TransportOptions;

use crate::cli::args::{CopyArgs, DEFAULT_RETRY_FOR_SECS};
use crate::cli::cipher::CipherChoice;
use crate::cli::spec::{self, Location, Remote};
use crate::client::launch::{Launcher, ServeCommand};
use crate::client::retry::{Next, Retry, WholeCopy};
use crate::client::session::{Session, SessionOptions};
use crate::exit::Exit;
use crate::ui::{JsonLines, ProgressMeter, SilenceWatch};

/// The copy's two ends as the command line names them.
struct Ends {
    origin: Remote,
    sources: Vec<Name>,
    destination: Remote,
}

/// Runs `soku -3 h1:SOURCE... h2:TARGET` (or without `-3`, scp's default).
pub async fn run(args: &CopyArgs) -> anyhow::Result<()> {
    let ends = ends(&args.paths)?;
    let shown: Arc<dyn EventSink> = if args.json {
        SilenceWatch::start(Arc::new(JsonLines::other_side("remote")))
    } else {
        SilenceWatch::start(Arc::new(ProgressMeter::new(args.quiet, args.verbose > 0)))
    };
    // The user is told the command's figures, not its last pair of sessions'.
    let whole = WholeCopy::new(shown);
    let events: Arc<dyn EventSink> = whole.clone();
    let choice =
        args.cipher.as_deref().map(CipherChoice::parse).transpose().map_err(Exit::usage)?;
    let mut ssh = args.ssh.clone();
    ssh.ssh_cipher = choice.as_ref().and_then(|c| c.login.clone());
    let launcher = Launcher::from_args(&ssh, args.verbose, args.quiet)?;
    let serve = ServeCommand::from_args(&args.ssh);
    let opts = CopyOptions::asked(args.copy_flags());
    let rate_limit_bps = opts.flags.rate_limit_bps;
    let (mode, quic_timeout, stall) = (args.transport_mode(), args.quic_wait(), args.stall_limit());
    let session_opts = |host: &str| {
        let mut opts = SessionOptions {
            stall,
            transport: TransportOptions {
                cipher: choice.as_ref().and_then(|c| c.data),
                rate_limit_bps,
                ..TransportOptions::default()
            },
            remote_soku: args.ssh.remote_soku.clone(),
            ..SessionOptions::for_command(mode, host.to_string(), quic_timeout)
        };
        opts.needs_version = *soku_proto::PROTOCOL_VERSIONS.end();
        opts
    };
    let (at_origin, at_destination) =
        (session_opts(&ends.origin.host), session_opts(&ends.destination.host));
    // As any copy: without resume a new attempt would start over, which only the user
    // may ask for.
    let retry_for = Duration::from_secs(args.retry_for.unwrap_or(DEFAULT_RETRY_FOR_SECS));
    let mut retry = Retry::new(if opts.flags.resume { retry_for } else { Duration::ZERO });
    let deploy = !args.ssh.no_deploy;
    loop {
        let started = Instant::now();
        whole.begin_session();
        let attempt = async {
            // Both logins at once: each is round trips on a long path.
            let (origin, destination) = tokio::join!(
                Session::launch(
                    &launcher,
                    &ends.origin,
                    &serve,
                    &at_origin,
                    events.as_ref(),
                    deploy
                ),
                Session::launch(
                    &launcher,
                    &ends.destination,
                    &serve,
                    &at_destination,
                    events.as_ref(),
                    deploy,
                ),
            );
            let ((origin, mut from), (destination, mut to)) = match (origin, destination) {
                (Ok(origin), Ok(destination)) => (origin, destination),
                (Err(err), other) | (other, Err(err)) => {
                    if let Ok((session, link)) = other {
                        session.abort(link).await;
                    }
                    return Err(err);
                }
            };
            // A host that goes silent is taken for gone as in any copy, and both
            // sessions are made again.
            from.set_stall_limit(Some(stall));
            to.set_stall_limit(Some(stall));
            let passed = pass(&ends, opts, &mut from, &mut to, events.clone()).await;
            match passed {
                Ok(outcome) => {
                    origin.close(from).await?;
                    destination.close(to).await?;
                    Ok(outcome)
                }
                Err(err) => {
                    origin.abort(from).await;
                    destination.abort(to).await;
                    Err(err)
                }
            }
        };
        let err = match attempt.await {
            Ok(outcome) if outcome.failures > 0 => {
                let all = outcome.failures + outcome.files;
                let plural = if all == 1 { "" } else { "s" };
                return Err(Exit::failure(format!(
                    "{} of {all} file{plural} failed",
                    outcome.failures
                ))
                .into());
            }
            Ok(_) => return Ok(()),
            Err(err) => err,
        };
        // A session that ran a while moved data; a login that failed at once did not.
        if started.elapsed() > Duration::from_secs(5) {
            retry.progressed();
        }
        match retry.after_failure(&err, Instant::now()) {
            Next::Retry { wait, attempt } => {
                let reason = crate::exit::one_line(&err);
                events.event(TransferEvent::Reconnecting { reason, attempt, wait });
                tokio::time::sleep(wait).await;
            }
            Next::GiveUp => return Err(err),
        }
    }
}

/// Asks each server for its part and passes the copy between them.
async fn pass(
    ends: &Ends,
    opts: CopyOptions,
    from: &mut soku_engine::link::Link,
    to: &mut soku_engine::link::Link,
    events: Arc<dyn EventSink>,
) -> anyhow::Result<soku_engine::Outcome> {
    let count = u32::try_from(ends.sources.len()).unwrap_or(u32::MAX);
    let send = Job::Send { sources: ends.sources.clone() };
    let receive = Job::Receive { target: ends.destination.path.clone(), sources: count };
    from.tx.send_control(Message::Request(opts.request(send))).await?;
    to.tx.send_control(Message::Request(opts.request(receive))).await?;
    let names = NameFilter::for_requested(ends.sources.iter().map(Name::as_bytes));
    let chunk_size = opts.flags.chunk_size;
    Ok(bridge::run(from, to, Some(names), chunk_size, events).await?)
}

/// The origin with its paths, and the destination, from the command line (checked to
/// be a copy between two remote hosts before this is called).
fn ends(paths: &[std::ffi::OsString]) -> anyhow::Result<Ends> {
    let Some((target, sources)) = paths.split_last() else {
        return Err(Exit::usage("name at least one source and a target").into());
    };
    let remote = |path: &std::ffi::OsString| match spec::parse(path).map_err(Exit::usage)? {
        Location::Remote(remote) => Ok(remote),
        Location::Local(_) => Err(anyhow::Error::from(Exit::usage(
            "a copy through this host takes remote sources and a remote target",
        ))),
    };
    let destination = remote(target)?;
    let sources = sources.iter().map(&remote).collect::<anyhow::Result<Vec<_>>>()?;
    let Some(origin) = sources.first().cloned() else {
        return Err(Exit::usage("name at least one source and a target").into());
    };
    Ok(Ends { origin, sources: sources.into_iter().map(|r| r.path).collect(), destination })
}
