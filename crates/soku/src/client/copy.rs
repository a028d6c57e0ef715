//! The copy command: work out the direction from scp-style paths, start the session and
//! run the sender or the receiver on this side.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use soku_engine::ahead::{HashAhead, Walked};
use soku_engine::events::{EventSink, PathReport, TransferEvent, PATH_SAMPLE_INTERVAL};
use soku_engine::filter::Filter;
use soku_engine::link::Link;
use soku_engine::partial::made_dir::resolve_target;
use soku_engine::sync_target::sync_target;
use soku_engine::{CopyOptions, EngineError, Role};
use soku_proto::hello::{ReceivePreview, ServerSummary};
use soku_proto::message::{Job, Message, SyncCopy, Unfinished};
use soku_proto::name::Name;
use soku_proto::path::{NameFilter, Target, TargetError};
use soku_proto::receive::Receiver;
use soku_proto::sync::{SyncRules, SYNC_SINCE_VERSION};
use soku_transport::{ConnectionHint, HintSlot, TransportOptions};

use crate::cli::args::{CopyArgs, DEFAULT_RETRY_FOR_SECS};
use crate::cli::cipher::CipherChoice;
use crate::cli::spec::{self, Location, Remote};
use crate::cli::transport_mode::TransportMode;
use crate::client::between_remotes;
use crate::client::interrupt::{Interrupt, Interrupted};
use crate::client::kept::{KeptKey, KeptServer};
use crate::client::launch::deploy::{self, NoRemoteSoku};
use crate::client::launch::{Launcher, ServeCommand};
use crate::client::path_memory::{self, Flow, Taught};
use crate::client::preview;
use crate::client::retry::{Next, Retry, WholeCopy};
use crate::client::session::{MasterSilent, Policed, Session, SessionOptions};
use crate::exit::{Exit, Stopped};
use crate::report::{self, Recorder};
use crate::ui::{JsonLines, ProgressMeter, SilenceWatch};

/// Which way the data flows.
pub enum Direction {
    /// Local sources to a remote (or local, through a local server) target.
    Upload { remote: Option<Remote>, sources: Vec<PathBuf>, target: Name },
    /// Remote sources to a local target.
    Download { remote: Remote, sources: Vec<Name>, target: PathBuf },
}

/// What a finished copy reports.
#[derive(Debug, Clone)]
pub struct CopyReport {
    /// Files verified.
    pub files: u32,
    /// Bytes verified.
    pub bytes: u64,
    /// The server's own figures, when `--report` asked for them and it sent them.
    pub server: Option<ServerSummary>,
}

/// Runs `soku [OPTIONS] SOURCE... TARGET`.
pub async fn run(args: CopyArgs) -> anyhow::Result<CopyReport> {
    // A local copy runs its server on this machine too: what that side says is not a
    // remote host's.
    let local = matches!(direction(&args.paths), Ok(Direction::Upload { remote: None, .. }));
    let result = run_between(args, if local { "local" } else { "remote" }).await;
    match result {
        Err(err) if local => Err(match err.downcast::<EngineError>() {
            Ok(EngineError::Remote(message)) => anyhow::anyhow!("local: {message}"),
            Ok(other) => other.into(),
            Err(err) => match err.downcast::<Stopped>() {
                Ok(stopped) => Stopped { side: "local", ..stopped }.into(),
                Err(err) => err,
            },
        }),
        result => result,
    }
}

/// [`run`], the server's side named `other_side` in what the user is told.
async fn run_between(args: CopyArgs, other_side: &'static str) -> anyhow::Result<CopyReport> {
    let started = Instant::now();
    if args.sync.is_some() && between_remotes::between(&args.paths)?.is_some() {
        return Err(Exit::usage(
            "sync between two remote hosts is not built: run soku sync on one of them",
        )
        .into());
    }
    if let Some((origin, sources, target)) = between_remotes::between(&args.paths)? {
        let args = crate::cli::config::apply(args, Some(&origin.host))?;
        between_remotes::run(&args, origin, sources, target).await?;
        // The origin's soku counted and verified what it copied, and said so.
        return Ok(CopyReport { files: 0, bytes: 0, server: None });
    }
    // The config files apply to what the command line leaves open, for the remote host
    // as the user wrote it (a local copy takes their top-level keys).
    let host = match direction(&args.paths)? {
        Direction::Upload { remote, .. } => remote.map(|r| r.host),
        Direction::Download { remote, .. } => Some(remote.host),
    };
    let args = crate::cli::config::apply(args, host.as_deref())?;
    // The silence watch tells the user when nothing has been verified for a while (see
    // `ui::silence`): a frozen meter alone does not say whether soku waits or hangs.
    let events: Arc<dyn EventSink> = if args.json {
        SilenceWatch::start(Arc::new(JsonLines::other_side(other_side)))
    } else {
        let dry_run = args.sync.as_ref().is_some_and(|rules| rules.dry_run);
        let meter = ProgressMeter::new(args.quiet, args.verbose > 0)
            .other_side(other_side)
            .dry_run(dry_run);
        SilenceWatch::start(Arc::new(meter))
    };
    let Some(path) = args.report.clone() else { return run_with(args, events).await };
    // A report that cannot be written is found out before the copy, not after it.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(Exit::usage(format!(
                "--report {}: no such directory {}",
                path.display(),
                dir.display()
            ))
            .into());
        }
    }
    let upload = matches!(direction(&args.paths), Ok(Direction::Upload { .. }));
    let rate_limit_bps = args.limit_kbps.map(|kbps| kbps.saturating_mul(1000));
    let recorder = Arc::new(Recorder::new(events.clone()));
    let result = run_with(args, recorder.clone()).await;
    // A failed copy gets its report too: it is when one is most wanted.
    let ctx = report::Context {
        command: command_line(),
        upload,
        rate_limit_bps,
        client_cpu: report::process_cpu(),
        client_wall: started.elapsed(),
        server: result.as_ref().ok().and_then(|r| r.server.clone()),
        started_unix: std::time::SystemTime::now()
            .checked_sub(started.elapsed())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs()),
    };
    match report::write(&path, &recorder.recording(), &ctx) {
        Ok(()) => {}
        Err(err) if result.is_ok() => return Err(Exit::failure(err.to_string()).into()),
        Err(err) => events.event(TransferEvent::Warning(err.to_string())),
    }
    result
}

/// This command line, quoted as a POSIX shell would need it, for the report.
fn command_line() -> String {
    let args: Vec<String> = std::env::args().collect();
    shlex::try_join(args.iter().map(String::as_str)).unwrap_or_else(|_| args.join(" "))
}

/// Runs a copy with the given event sink (the demo uses its own), until it ends or the
/// user interrupts it (`crate::client::interrupt`).
pub async fn run_with(args: CopyArgs, events: Arc<dyn EventSink>) -> anyhow::Result<CopyReport> {
    let interrupt = Interrupt::listen()?;
    let resumes = !args.no_resume;
    let result = tokio::select! {
        biased;
        result = copy_until_done(args, events, &interrupt) => result,
        () = interrupt.outside_copy() => Err(Interrupted.into()),
    };
    match result {
        Err(err) if err.is::<Interrupted>() || interrupt.fired() => {
            Err(crate::client::interrupt::exit(resumes).into())
        }
        other => other,
    }
}

async fn copy_until_done(
    args: CopyArgs,
    events: Arc<dyn EventSink>,
    interrupt: &Interrupt,
) -> anyhow::Result<CopyReport> {
    let direction = direction(&args.paths)?;
    let walk_rules = walk_rules(&args)?;
    let dry_run = args.sync.as_ref().is_some_and(|rules| rules.dry_run);
    // The user is told the command's figures, not its last session's.
    let whole = WholeCopy::new(events);
    let stops = Arc::new(KeepsUnfinished { inner: whole.clone(), last: Mutex::default() });
    let events: Arc<dyn EventSink> = stops.clone();
    let choice = match &args.cipher {
        Some(name) => Some(CipherChoice::parse(name).map_err(Exit::usage)?),
        None => None,
    };
    let cipher = choice.as_ref().and_then(|c| c.data);
    let mut transport = TransportOptions {
        cipher,
        rate_limit_bps: args.limit_kbps.map(|kbps| kbps.saturating_mul(1000)),
        ..TransportOptions::default()
    };
    // Only root can make a file setuid for another user, and only root's files are
    // worth a hostile peer's setuid bit: anyone else asking is told so, not ignored.
    if args.keep_special_bits && !crate::sys::is_root() {
        return Err(Exit::usage(
            "--keep-special-bits is for root only: as another user the setuid, setgid and \
             sticky bits are cleared, as scp clears them; leave the option out",
        )
        .into());
    }
    // What each session learns from the hellos (what the receiving side holds, the
    // server's protocol) is set per session (`drive`); the server, which sends nothing
    // to the user, is told nothing of a disk that fills up.
    let opts = CopyOptions {
        keep_special_bits: args.keep_special_bits,
        ..CopyOptions::asked(args.copy_flags())
    };
    // A download's target is checked before anything connects.
    let local_target = match &direction {
        Direction::Download { target, .. } if args.sync.is_some() => {
            Some(sync_target(target, dry_run, None).map_err(on_this_side)?)
        }
        Direction::Download { sources, target, .. } => {
            let path = target.as_path();
            let count = u32::try_from(sources.len()).unwrap_or(u32::MAX);
            let target = resolve_target(path, count).map_err(on_this_side)?;
            if let Some(missing) = target.missing_root() {
                return Err(on_this_side(TargetError::NoSuchDirectory(missing)));
            }
            Some(target)
        }
        Direction::Upload { .. } => None,
    };

    let mut ssh = args.ssh.clone();
    ssh.ssh_cipher = choice.as_ref().and_then(|c| c.login.clone());
    if let Some(said) = choice.as_ref().and_then(CipherChoice::said) {
        if args.verbose > 0 && !args.quiet {
            crate::ui::say(&format!("soku: {said}"));
        }
    }
    let (remote, mut launcher) = match &direction {
        Direction::Upload { remote: None, .. } => (None, Launcher::Local),
        Direction::Upload { remote: Some(r), .. } | Direction::Download { remote: r, .. } => {
            (Some(r.clone()), Launcher::from_args(&ssh, args.verbose, args.quiet)?)
        }
    };
    let mode = args.transport_mode();
    let serve = ServeCommand::from_args(&args.ssh);
    // Through a shared login, the server stays after the copy for the next ones, which
    // reach it over QUIC alone (`crate::client::kept`). Not when the user chose another transport.
    let kept_key = |launcher: &Launcher| match mode {
        TransportMode::Auto | TransportMode::Quic => launcher.kept_key(&serve, args.background),
        TransportMode::Tcp | TransportMode::Ssh => None,
    };
    // The record of a server kept from the last copy, read once: the first session
    // reaches it (below).
    let mut recalled: Option<KeptServer> = None;
    if let (Some(remote), Launcher::Ssh { .. }, false) = (&remote, &launcher, args.no_share_login) {
        match launcher.share_login(remote).await {
            Err(why) => {
                if args.verbose > 0 {
                    crate::ui::say(&format!("soku: each copy logs in on its own: {why}"));
                }
            }
            Ok(()) => {
                // A kept server's record does not say its protocol, which a sync or a
                // filter needs to know: such a copy opens a session of its own.
                recalled = kept_key(&launcher)
                    .filter(|_| walk_rules.is_none())
                    .and_then(|key| key.recall());
                // A copy that reaches a kept server says so then.
                if recalled.is_none() && args.verbose > 0 {
                    if launcher.attach_timeout(false).is_some() {
                        crate::ui::say(&format!(
                            "soku: opening a session on the ssh login shared with {}",
                            remote.host
                        ));
                    } else {
                        crate::ui::say(&format!(
                            "soku: logging in; this ssh stays a minute after the copy as the \
                             login the next copies to {} share (--no-share-login: not)",
                            remote.host
                        ));
                        if launcher.dials_login() {
                            crate::ui::say(
                                "soku: soku connects ssh's TCP connection with TCP_NODELAY and \
                                 hands it to ssh (ProxyUseFdpass)",
                            );
                        }
                    }
                }
            }
        }
    }
    // What the last copy to this host in this direction learned: the data sender's
    // controller starts from it (see `client/path_memory.rs`). A copy under `-l` measures the
    // limit, not the path, so it teaches nothing.
    let flow = match &direction {
        Direction::Upload { .. } => Flow::Up,
        Direction::Download { .. } => Flow::Down,
    };
    let taught = if args.background { Taught::Yielded } else { Taught::Path };
    let learn = remote.as_ref().map(|r| (r.host.clone(), flow, taught));
    let memory = learn.as_ref().and_then(|(host, flow, _)| path_memory::recall(host, *flow));
    let learn = learn.filter(|_| args.limit_kbps.is_none());
    // The data sender's controller: ours on an upload, the server's (told through our
    // hello) on a download.
    let download_memory = memory.filter(|_| flow == Flow::Down);
    transport.hint = HintSlot::with(ConnectionHint {
        remembered: memory.filter(|_| flow == Flow::Up).map(path_memory::remembered),
        background: args.background && flow == Flow::Up,
    });
    // Our handshake's probe timeouts, whichever way the data goes.
    transport.expected_rtt = memory.map(|memory| path_memory::remembered(memory).min_rtt);
    let quic_timeout = args.quic_wait();
    let host = remote.as_ref().map_or_else(|| "127.0.0.1".into(), |r| r.host.clone());
    let kept_key = kept_key(&launcher);
    let mut session_opts = SessionOptions {
        transport,
        download_memory,
        background: args.background,
        keep: kept_key.is_some(),
        stall: args.stall_limit(),
        remote_soku: args.ssh.remote_soku.clone(),
        ..SessionOptions::for_command(mode, host, quic_timeout)
    };
    session_opts.login_at = launcher.login_address();
    if walk_rules.is_some() {
        session_opts.needs_version = SYNC_SINCE_VERSION;
    }
    // An upload walks and hashes its sources while ssh logs in (see `soku_engine::ahead`).
    let mut ahead = match &direction {
        // A sync's receiver skips most files unread: hashing them here would read them.
        Direction::Upload { .. } if walk_rules.is_some() => None,
        Direction::Upload { sources, .. } => {
            Some(HashAhead::start(sources.clone(), opts.flags.recursive, opts.flags.chunk_size))
        }
        Direction::Download { .. } => None,
    };
    // Without resume a new attempt would start over: the user asked for exactly that
    // by hand, not behind their back.
    let retry_for = Duration::from_secs(args.retry_for.unwrap_or(DEFAULT_RETRY_FOR_SECS));
    let limit = if opts.flags.resume { retry_for } else { Duration::ZERO };
    let mut retry = Retry::new(limit);
    // What cut the connection, for the line that gives up (the last attempt's error
    // is often only the login that did not get through).
    let mut lost_because: Option<String> = None;
    // Once per command: a remote that still finds no soku after that is told so.
    let mut deployed = false;
    loop {
        let reconnecting = retry.down_for(Instant::now()).is_some();
        // Only the first session tries the kept server: a reconnect logs in afresh.
        let kept = recalled.take();
        let attached = match (kept, &kept_key) {
            (Some(kept), Some(key)) => {
                attach_kept(kept, key, &session_opts, events.as_ref(), args.verbose).await
            }
            _ => None,
        };
        let start = match attached {
            Some(attached) => Start::Attached(Box::new(attached)),
            None => Start::Ssh(launcher.command(remote.as_ref(), &serve, reconnecting)?),
        };
        session_opts.attach_timeout = launcher.attach_timeout(reconnecting);
        session_opts.dial_errors = launcher.dial_errors(reconnecting);
        // Checked again in every session: an interrupted one leaves partial files.
        // A sync's receiver reports on every file (the preview looks at the sources'
        // own names, which a sync of a directory's contents does not land under).
        session_opts.receive_preview = receive_preview(&direction, local_target.as_ref())
            .filter(|_| opts.flags.resume && args.sync.is_none());
        whole.begin_session();
        let attempt = Attempt {
            direction: &direction,
            rules: walk_rules.as_ref().map(|rules| (rules, args.sync.is_some())),
            ahead: ahead.take(),
            local_target: local_target.clone(),
            opts,
            events: events.clone(),
            learn: learn.clone(),
            summary: args.report.is_some(),
            kept_key: kept_key.as_ref(),
            interrupt,
        };
        let was_kept = matches!(start, Start::Attached(_));
        let err = match attempt.run(start, &session_opts, &mut retry).await {
            Ok(report) => return Ok(report),
            Err(err) => err,
        };
        if interrupt.fired() {
            return Err(Interrupted.into());
        }
        if let Some((facts, here)) = stops.take() {
            // Not worth another attempt: the disk is as full as it was.
            return Err(stopped(&err, facts, here).into());
        }
        if let (Some(missing), Some(remote)) = (err.downcast_ref::<NoRemoteSoku>(), &remote) {
            if deployed || args.ssh.no_deploy {
                return Err(err);
            }
            deploy::send(&launcher, remote, missing, events.as_ref()).await?;
            deployed = true;
            continue;
        }
        if let Some(silent) = err.downcast_ref::<MasterSilent>() {
            // Not an outage of the path: the master's own connection may be what died.
            events.event(TransferEvent::Warning(format!("{silent}; logging in again")));
            if let Some(remote) = &remote {
                launcher.give_up_shared_login(remote).await;
            }
            continue;
        }
        if let Some(switch) = err.downcast_ref::<SwitchTransport>() {
            if let (true, Some(key)) = (was_kept, &kept_key) {
                // Over UDP, as the kept server is reached: the next copies log in.
                key.forget();
            }
            // Not an outage: the next session starts at once, on the other transport.
            events.event(TransferEvent::Warning(switch.to_string()));
            session_opts.mode = switch.to;
            session_opts.switched = Some(switch.why.clone());
            continue;
        }
        match retry.after_failure(&err, Instant::now()) {
            Next::Retry { wait, attempt } => {
                if let (true, Some(key)) = (was_kept, &kept_key) {
                    // It may be gone; the reconnect's own server takes its place.
                    key.forget();
                }
                let reason = crate::exit::one_line(&err);
                if attempt == 1 {
                    lost_because = Some(reason.clone());
                }
                events.event(TransferEvent::Reconnecting { reason, attempt, wait });
                tokio::time::sleep(wait).await;
                // Looked at after the wait: the remote's last words have come through
                // its ssh's error output by then.
                if let Some(said) = crate::client::launch::remote_out_of_memory() {
                    return Err(anyhow::anyhow!(
                        "remote: soku serve ran out of memory ({said}): not reconnecting, it \
                         would fail again; raise the remote's memory limit (ulimit -v, the \
                         login's cgroup) or copy less at once"
                    ));
                }
            }
            Next::GiveUp => {
                let Some(down) = retry.down_for(Instant::now()) else { return Err(err) };
                // The connection failed, not the copy: exit 255 as for a failed login,
                // whichever attempt failed last.
                let last = crate::exit::one_line(&err);
                let lost = lost_because.take().filter(|first| *first != last);
                let lost = lost.map_or(String::new(), |first| format!(" ({first})"));
                return Err(Exit::connection(format!(
                    "the connection was lost{lost} and did not come back: gave up \
                     reconnecting after {} s (--retry-for {}); last attempt: {last}; the \
                     partial files are kept: run the same command again to resume",
                    down.as_secs(),
                    retry_for.as_secs()
                ))
                .into());
            }
        }
    }
}

/// Passes events on, keeping the receiving side's summary of a copy stopped for lack of
/// space: the copy's error carries it to the end ([`crate::exit::Stopped`]), where it
/// follows the error line.
struct KeepsUnfinished {
    inner: Arc<dyn EventSink>,
    /// The summary, and whether this side received.
    last: Mutex<Option<(Unfinished, bool)>>,
}

impl KeepsUnfinished {
    fn take(&self) -> Option<(Unfinished, bool)> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl EventSink for KeepsUnfinished {
    fn event(&self, event: TransferEvent) {
        if let TransferEvent::Unfinished { facts, here } = &event {
            *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some((facts.clone(), *here));
        }
        self.inner.event(event);
    }
}

/// The error of a copy stopped for lack of space, which `err` ended, with the summary
/// of the side that received (`here`: this one).
fn stopped(err: &anyhow::Error, facts: Unfinished, here: bool) -> Stopped {
    let line = err.chain().find_map(|cause| match cause.downcast_ref::<EngineError>() {
        Some(EngineError::NoSpace(line) | EngineError::Remote(line)) => Some(line.clone()),
        _ => None,
    });
    let line = line.unwrap_or_else(|| crate::exit::one_line(err));
    Stopped { side: if here { "local" } else { "remote" }, line, facts }
}

/// How long an interrupted copy waits for this side's chunk writes in hand to land: a
/// write takes milliseconds, and a disk that hangs must not hold the user's Ctrl-C.
const WRITES_LAND: Duration = Duration::from_secs(5);

/// Connects to the server kept from an earlier copy (`crate::client::kept`); forgets it if it
/// does not answer, and the copy opens an ssh session instead.
async fn attach_kept(
    kept: KeptServer,
    key: &KeptKey,
    session_opts: &SessionOptions,
    events: &dyn EventSink,
    verbose: u8,
) -> Option<(Session, Link)> {
    if verbose > 0 {
        crate::ui::say(&format!(
            "soku: reaching the remote soku kept from the last copy at {} over QUIC (no ssh \
             session)",
            kept.addr
        ));
    }
    match Session::attach_kept(kept, session_opts, events).await {
        Ok(attached) => Some(attached),
        Err(gone) => {
            key.forget();
            if verbose > 0 {
                crate::ui::say(&format!("soku: {gone}; opening an ssh session"));
            }
            None
        }
    }
}

/// One attempt at the copy: a session (ssh login, QUIC or the ssh channel) and the
/// copy over it.
struct Attempt<'a> {
    direction: &'a Direction,
    /// The sender's walk rules (a sync's, or an scp-style copy's filter), and whether
    /// the copy is a sync ([`drive`]).
    rules: Option<(&'a SyncRules, bool)>,
    ahead: Option<HashAhead>,
    local_target: Option<Target>,
    opts: CopyOptions,
    events: Arc<dyn EventSink>,
    /// Where to note what this copy learns about the path (host, direction), and how
    /// its figures stand for the path.
    learn: Option<(String, Flow, Taught)>,
    /// `--report`: wait for the server's summary at the end.
    summary: bool,
    /// Where to record the kept server this copy leaves, if it leaves one.
    kept_key: Option<&'a KeptKey>,
    /// The user's Ctrl-C, which the copy ends by itself on.
    interrupt: &'a Interrupt,
}

/// How an attempt's session starts.
enum Start {
    /// Through ssh, with this command.
    Ssh(tokio::process::Command),
    /// Already connected to a server kept from an earlier copy.
    Attached(Box<(Session, Link)>),
}

impl Attempt<'_> {
    async fn run(
        self,
        start: Start,
        session_opts: &SessionOptions,
        retry: &mut Retry,
    ) -> anyhow::Result<CopyReport> {
        let events = self.events;
        let (mut session, mut link) = match start {
            Start::Ssh(cmd) => Session::start(cmd, session_opts, events.as_ref()).await?,
            Start::Attached(attached) => *attached,
        };
        link.set_stall_limit(Some(session_opts.stall));
        let sampler = session
            .connection()
            .map(|conn| tokio::spawn(sample_path(conn.clone(), events.clone())));
        let policing = session.watch_policing();
        let counted = path_memory::CountVerified::new(events.clone());
        let verified = counted.counter();
        let moved = counted.counter();
        let counted: Arc<dyn EventSink> = counted;
        let meter = match (session.connection(), &self.learn) {
            (Some(conn), Some(_)) => Some(path_memory::Meter::start(
                conn.clone(),
                verified,
                u64::from(self.opts.flags.chunk_size),
            )),
            _ => None,
        };
        let opts = CopyOptions {
            nothing_held: session.nothing_held(),
            byte_names: session.byte_names(),
            peer_open_files: session.peer_open_files(),
            ..self.opts
        };
        let _copying = self.interrupt.copying();
        let mut copy = Box::pin(drive(
            &mut link,
            self.direction,
            self.ahead,
            self.local_target,
            opts,
            self.rules,
            counted,
        ));
        let result = tokio::select! {
            result = &mut copy => result,
            () = self.interrupt.wait() => {
                // The remote job ends as soon as it hears, and lets go of its partial
                // files for the next run; this side's writes in hand land meanwhile
                // (the engine's own end, on the closed link).
                session.interrupt();
                let _ = tokio::time::timeout(WRITES_LAND, &mut copy).await;
                Err(Interrupted.into())
            }
        };
        drop(copy);
        if moved.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            retry.progressed();
        }
        if let Some(sampler) = sampler {
            sampler.abort();
        }
        match result {
            Ok(mut report) => {
                if let Some(watch) = policing {
                    watch.abort();
                }
                if let Some(conn) = session.connection() {
                    events.event(TransferEvent::PathStats(PathReport::from_connection(conn)));
                }
                if let (Some(learned), Some((host, flow, taught))) =
                    (meter.and_then(path_memory::Meter::finish), &self.learn)
                {
                    path_memory::remember(host, *flow, learned, *taught);
                }
                let kept = session.take_kept().await;
                if self.summary {
                    report.server = session.close_for_summary(link).await?;
                } else {
                    session.close(link).await?;
                }
                if let (Some(kept), Some(key)) = (kept, self.kept_key) {
                    key.remember(&kept);
                }
                Ok(report)
            }
            Err(err) if err.is::<Interrupted>() => {
                session.end_interrupted(link).await;
                Err(err)
            }
            Err(err) => {
                if let Some(policed) = session.policed(policing).await {
                    session.abort(link).await;
                    return Err(SwitchTransport::after(policed).into());
                }
                let err = if session.ssh_ended() {
                    err.context("the ssh session ended (ssh or the remote soku stopped)")
                } else {
                    err
                };
                session.abort(link).await;
                Err(err)
            }
        }
    }
}

/// What the receiving side is asked (upload) or told (download) before the copy, so that
/// no file need wait for its first held report (see `crate::client::preview`).
fn receive_preview(direction: &Direction, local_target: Option<&Target>) -> Option<ReceivePreview> {
    match (direction, local_target) {
        (Direction::Upload { sources, target, .. }, _) => preview::for_upload(sources, target),
        (Direction::Download { sources, .. }, Some(target)) => {
            preview::for_download(sources, target)
        }
        (Direction::Download { .. }, None) => None,
    }
}

/// The copy moves to another transport in a new session: UDP looked rate-limited.
#[derive(Debug, thiserror::Error)]
#[error("{why}; {}", if self.to == TransportMode::Tcp {
    "moving the copy to TLS/TCP (what arrived is kept)"
} else {
    "TCP does not get through either: going on over QUIC"
})]
struct SwitchTransport {
    /// What the data sender saw.
    why: String,
    /// The transport of the next session.
    to: TransportMode,
}

impl SwitchTransport {
    fn after(policed: Policed) -> SwitchTransport {
        let to = if policed.tcp_reachable { TransportMode::Tcp } else { TransportMode::Quic };
        SwitchTransport { why: policed.why, to }
    }
}

/// Reports the QUIC path every [`PATH_SAMPLE_INTERVAL`] until aborted.
async fn sample_path(conn: quinn::Connection, events: Arc<dyn EventSink>) {
    let mut tick = tokio::time::interval(PATH_SAMPLE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        events.event(TransferEvent::PathSample(PathReport::from_connection(&conn)));
    }
}

/// A failure of this side's files (a copy's own target or sources): one line that says
/// `local:` before its path, problem and remedy, exit 1.
fn on_this_side(line: impl std::fmt::Display) -> anyhow::Error {
    Exit::failure(format!("local: {line}")).into()
}

/// Asks the server for its part of the copy and runs ours.
///
/// With `rules`, the sender walks by them (`soku_engine::sync_walk`); the bool says
/// whether the copy is a sync, whose receiver skips and deletes by them too (otherwise
/// they are an scp-style copy's filter, and only the sender needs them).
pub async fn drive(
    link: &mut Link,
    direction: &Direction,
    ahead: Option<HashAhead>,
    local_target: Option<Target>,
    opts: CopyOptions,
    rules: Option<(&SyncRules, bool)>,
    events: Arc<dyn EventSink>,
) -> anyhow::Result<CopyReport> {
    let sync = rules.filter(|(_, sync)| *sync).map(|(rules, _)| rules.clone());
    let role = match direction {
        Direction::Upload { sources, target, .. } => {
            utf8_for_an_older_server(std::iter::once(target), opts)?;
            let count = u32::try_from(sources.len()).unwrap_or(u32::MAX);
            let job = match &sync {
                // The receiver needs no list of what comes.
                Some(rules) => Job::Sync {
                    copy: SyncCopy::Receive { target: target.clone(), sources: count },
                    rules: SyncRules { files_from: Vec::new(), ..rules.clone() },
                },
                None => Job::Receive { target: target.clone(), sources: count },
            };
            link.tx.send_control(Message::Request(opts.request(job))).await?;
            let walked = match (ahead, rules) {
                (_, Some((rules, _))) => {
                    let filter = Filter::new(&rules.filter)?;
                    Walked::walk_sync(sources.clone(), rules.clone(), filter, None).await?
                }
                (Some(ahead), None) => ahead.finish().await?,
                (None, None) => Walked::walk(sources.clone(), opts.flags.recursive).await?,
            };
            Role::Send(walked)
        }
        Direction::Download { sources, .. } => {
            utf8_for_an_older_server(sources, opts)?;
            // A sync of a directory's contents, or of a list, lands under names the
            // request does not spell: any name the path rules allow.
            let any_name = sync.as_ref().is_some_and(|r| r.contents || !r.files_from.is_empty());
            let names =
                (!any_name).then(|| NameFilter::for_requested(sources.iter().map(Name::as_bytes)));
            let job = match rules {
                Some((rules, _)) => Job::Sync {
                    copy: SyncCopy::Send { sources: sources.clone() },
                    rules: rules.clone(),
                },
                None => Job::Send { sources: sources.clone() },
            };
            let request = Message::Request(opts.request(job));
            fits_a_frame(&request)?;
            link.tx.send_control(request).await?;
            // safe: local_target is Some for every download (set above)
            let Some(target) = local_target else { anyhow::bail!("internal: no local target") };
            let root = target.root().to_path_buf();
            let receiver =
                Receiver::new(target, names, opts.flags.recursive, opts.flags.chunk_size)?;
            let receiver = Box::new(receiver);
            Role::Receive { receiver, root, beneath: None, blind: false, sync }
        }
    };
    let outcome = soku_engine::run(role, link, opts, events).await.map_err(|e| match e {
        // This side's file system: the line says so, as the remote's say `remote:`.
        EngineError::Target(line) | EngineError::Source(line) => on_this_side(line),
        other => other.into(),
    })?;
    let (files, bytes, failures) = (outcome.files, outcome.bytes, outcome.failures);
    if failures > 0 {
        return Err(Exit::failure(format!(
            "{failures} of {} file{} failed",
            failures + files,
            if failures + files == 1 { "" } else { "s" }
        ))
        .into());
    }
    Ok(CopyReport { files, bytes, server: None })
}

/// The rules the sender walks by: a sync's, or an scp-style copy's filter (which needs
/// `-r`); `None` for a plain copy.
fn walk_rules(args: &CopyArgs) -> anyhow::Result<Option<SyncRules>> {
    if let Some(rules) = &args.sync {
        return Ok(Some(rules.clone()));
    }
    if args.filter.is_empty() {
        return Ok(None);
    }
    if !args.recursive {
        return Err(Exit::usage(
            "--exclude and --include choose among what a directory holds: add -r",
        )
        .into());
    }
    Filter::new(&args.filter).map_err(|e| Exit::usage(format!("--exclude/--include: {e}")))?;
    // A plain copy's rules: nothing is skipped but by hash, as without a filter.
    Ok(Some(SyncRules { checksum: true, filter: args.filter.clone(), ..SyncRules::default() }))
}

/// A download's request must fit a control frame: a long `--files-from` list may not.
fn fits_a_frame(request: &Message) -> anyhow::Result<()> {
    match soku_proto::frame::to_vec(request) {
        Err(soku_proto::ProtoError::FrameTooLarge { len, limit }) => Err(Exit::usage(format!(
            "the request is {len} bytes, more than the {limit} a message may take: a \
             download's --files-from list goes with it; split the list (fpart -n) and run \
             one soku per part"
        ))
        .into()),
        _ => Ok(()),
    }
}

/// A server from before `soku_proto::name::BYTE_NAMES_SINCE_VERSION` cannot decode a
/// request naming a path that is not UTF-8: such a copy stops here, saying what to do.
fn utf8_for_an_older_server<'a>(
    paths: impl IntoIterator<Item = &'a Name>,
    opts: CopyOptions,
) -> anyhow::Result<()> {
    match paths.into_iter().find(|path| !opts.byte_names && !path.is_utf8()) {
        None => Ok(()),
        Some(path) => Err(Exit::failure(format!(
            "remote: {path}: the path is not valid UTF-8, and the remote soku is too old to \
             take it (protocol before {}): upgrade soku there",
            soku_proto::name::BYTE_NAMES_SINCE_VERSION
        ))
        .into()),
    }
}

/// Decides the direction from the command-line paths.
pub fn direction(paths: &[OsString]) -> anyhow::Result<Direction> {
    let Some((target, sources)) = paths.split_last().filter(|(_, sources)| !sources.is_empty())
    else {
        return Err(
            Exit::usage("name at least one source and a target (soku SOURCE... TARGET)").into()
        );
    };
    let target_loc = spec::parse(target).map_err(Exit::usage)?;
    let mut locals = Vec::new();
    let mut remotes: Vec<Remote> = Vec::new();
    for source in sources {
        match spec::parse(source).map_err(Exit::usage)? {
            Location::Local(path) => locals.push(path),
            Location::Remote(remote) => remotes.push(remote),
        }
    }
    match target_loc {
        Location::Remote(remote) => {
            if !remotes.is_empty() {
                return Err(Exit::usage(
                    "copying between two remote hosts is not supported yet: copy through a local directory",
                )
                .into());
            }
            let target = remote.path.clone();
            Ok(Direction::Upload { remote: Some(remote), sources: locals, target })
        }
        Location::Local(target) => {
            if remotes.is_empty() {
                // A local copy's server takes the target as a remote one takes it.
                let Some(target) = Name::from_os(target.as_os_str()) else {
                    let shown = soku_proto::name::shown(&target);
                    return Err(
                        Exit::usage(format!("{shown}: a name this system cannot spell")).into()
                    );
                };
                return Ok(Direction::Upload { remote: None, sources: locals, target });
            }
            if !locals.is_empty() {
                return Err(Exit::usage(
                    "mixing local and remote sources is not supported: copy them in two runs",
                )
                .into());
            }
            let first = remotes[0].clone();
            if remotes.iter().any(|r| r.host != first.host || r.user != first.user) {
                return Err(Exit::usage(
                    "sources from several remote hosts: copy from one host per run",
                )
                .into());
            }
            let sources = remotes.into_iter().map(|r| r.path).collect();
            Ok(Direction::Download { remote: first, sources, target })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn directions() {
        assert!(matches!(
            direction(&paths(&["a", "b", "h:dir"])).expect("ok"),
            Direction::Upload { remote: Some(_), .. }
        ));
        assert!(matches!(
            direction(&paths(&["h:a", "h:b", "."])).expect("ok"),
            Direction::Download { .. }
        ));
        assert!(matches!(
            direction(&paths(&["a", "b"])).expect("ok"),
            Direction::Upload { remote: None, .. }
        ));
        assert!(direction(&paths(&["h:a", "g:b"])).is_err());
        assert!(direction(&paths(&["h:a", "g:b", "."])).is_err());
        assert!(direction(&paths(&["a", "h:b", "."])).is_err());
        assert!(direction(&paths(&["only-one"])).is_err());
    }
}
