//! `soku diagnose [user@]host`: what limits a copy on this path, measured in a few
//! seconds over the user's ssh, with `soku serve` on the far side.
//!
//! Order of work: measure this host (cipher speed, buffers, the local disk's read
//! speed) before anything else runs, so the two hosts' measurements do not share a
//! CPU or a disk when both are one machine; start the session as a copy does, asking
//! the server to answer the transport choice over ssh (the ssh round trip); ask for the
//! diagnose job, whose first answer is the server's own facts (the remote disk's write
//! speed among them); over QUIC, probe the rate each way with soku-cc; then judge.
//!
//! # Layout
//! - [`host`]: one host's facts (both sides run it).
//! - [`probe`]: the rate and reordering probes on QUIC (both sides run them).
//! - [`serve`]: the server's job.
//! - [`facts`]: what was measured, put together; [`verdict`]: what it means.
//! - [`show`]: the output, for people or `--json`; [`units`]: figures for people.

pub mod facts;
mod host;
mod probe;
#[cfg(unix)]
mod serve;
mod show;
pub mod units;
pub mod verdict;

use std::sync::Mutex;
use std::time::Duration;

use soku_engine::events::{EventSink, TransferEvent};
use soku_engine::link::{Inbound, Link};
use soku_proto::diagnose::{HostFacts, ProbeDirection, ProbeReport};
use soku_proto::message::{CopyFlags, Job, Message, Request};
use tokio::time::Instant;

use self::facts::{Direction, PathFacts, Side};
use self::host::DiskTest;
use self::probe::Probe;
use crate::cli::args::DiagnoseArgs;
use crate::cli::transport_mode::TransportMode;
use crate::client::launch::{Launcher, ServeCommand};
use crate::client::session::{Session, SessionOptions};
use crate::exit::Exit;

#[cfg(unix)]
pub use self::serve::serve;

/// The longest a probe sends ([`probe::send_for`] ends it once soku-cc has held its rate
/// for a while): start-up on 1 Gbit/s x 300 ms takes about 4 s, and the two probes
/// keep the whole diagnosis under 20 s.
const PROBE: Duration = Duration::from_millis(6000);
/// How long QUIC may take before the session moves to TCP (as a copy's default).
const QUIC_TIMEOUT: Duration = Duration::from_secs(4);
/// How long the server may take to measure its host (its disk test is bounded at
/// 1.5 s plus one flush).
const FACTS_TIMEOUT: Duration = Duration::from_secs(20);
/// Beyond a probe's duration, how long its report may take.
const REPORT_SLACK: Duration = Duration::from_secs(10);

/// Runs `soku diagnose`.
pub async fn run(mut args: DiagnoseArgs) -> anyhow::Result<()> {
    let remote = crate::tunnel::parse_remote(&args.remote).map_err(Exit::usage)?;
    // The config files' ssh-side settings (remote soku, ports, ssh program) for this
    // host, as a copy there would use them.
    crate::cli::config::apply_ssh(&mut args.ssh, &remote.host)?;
    let began = Instant::now();
    let local_dir = args.local_path.clone().unwrap_or_else(|| ".".into());
    let local =
        tokio::task::spawn_blocking(move || host::facts(Some(DiskTest::Read(local_dir)))).await?;

    let launcher = Launcher::from_args(&args.ssh, args.verbose, false)?;
    let serve = ServeCommand::from_args(&args.ssh);
    let opts = SessionOptions {
        diagnose: true,
        remote_soku: args.ssh.remote_soku.clone(),
        ..SessionOptions::for_command(TransportMode::Auto, remote.host.clone(), QUIC_TIMEOUT)
    };
    let events = Collected::default();
    let deploy = !args.ssh.no_deploy;
    let (mut session, mut link) =
        Session::launch(&launcher, &remote, &serve, &opts, &events, deploy).await?;
    let mut facts = PathFacts {
        host: args.remote.clone(),
        local: Side { name: "this host".into(), facts: local },
        ..Default::default()
    };
    let target = args.remote_path.clone().unwrap_or_default();
    match measure(&mut session, &mut link, &target, &mut facts).await {
        Ok(()) => session.close(link).await?,
        Err(err) => {
            session.abort(link).await;
            return Err(err);
        }
    }
    let transport = events.connected.lock().map(|t| t.clone()).unwrap_or_default();
    facts.udp = transport.starts_with("QUIC");
    if transport.starts_with("TLS/TCP") {
        facts.tcp = Some(true);
    } else if transport.starts_with("the ssh channel") {
        facts.tcp = Some(false);
    }
    facts.transport = transport;
    let verdict = verdict::verdict(&facts);
    let took = began.elapsed();
    let warnings = events.warnings.lock().map(|w| w.clone()).unwrap_or_default();
    if args.json {
        show::json(&facts, &verdict, took)
    } else {
        show::human(&facts, &verdict, &warnings, took)
    }
}

/// Asks for the job and runs the probes, filling `facts`.
async fn measure(
    session: &mut Session,
    link: &mut Link,
    target: &str,
    facts: &mut PathFacts,
) -> anyhow::Result<()> {
    link.tx
        .send_control(Message::Request(Request {
            job: Job::Diagnose { target: target.to_string() },
            flags: CopyFlags::NONE,
        }))
        .await?;
    facts.ssh_rtt_ms = session.ssh_rtt(Duration::from_secs(3)).await.map(ms);
    let remote = expect_facts(link).await.map_err(|e| {
        e.context("the remote soku did not run the diagnose job (if it is older than this one, update it)")
    })?;
    facts.remote = Some(Side { name: facts.host.clone(), facts: remote });
    let Some(conn) = session.connection().cloned() else {
        return Ok(());
    };
    let idle_rtt = conn.rtt();

    // Upload: we send, the server receives and reports.
    let probe =
        |direction| Probe { direction, duration: PROBE, streams: probe::STREAMS, extra: false };
    let (mut send, _recv) = conn.open_bi().await?;
    send.write_all(&probe::header(probe(ProbeDirection::Upload))).await?;
    let sends = probe::with_more(&conn, send, probe(ProbeDirection::Upload)).await?;
    let sent = probe::send_for(&conn, sends, probe::MIN_PROBE, PROBE).await?;
    let report = expect_probe(link, ProbeDirection::Upload).await?;
    let received = report.received.unwrap_or_default();
    facts.upload = Some(Direction::new(sent, received));

    // Download: the server sends, we receive; it reports what its side saw.
    let (mut send, recv) = conn.open_bi().await?;
    send.write_all(&probe::header(probe(ProbeDirection::Download))).await?;
    let received =
        probe::receive(&conn, recv, probe(ProbeDirection::Download), PROBE + REPORT_SLACK).await?;
    let report = expect_probe(link, ProbeDirection::Download).await?;
    facts.download = Some(Direction::new(report.sent.unwrap_or_default(), received));

    let rtts = [&facts.upload, &facts.download]
        .into_iter()
        .flatten()
        .map(|d| d.sent.min_rtt_us)
        .filter(|&us| us > 0)
        .map(|us| us as f64 / 1000.0);
    facts.quic_rtt_ms = rtts.chain(std::iter::once(ms(idle_rtt))).reduce(f64::min);
    facts.mtu = Some(conn.stats().path.current_mtu);
    facts.tcp = match tokio::time::timeout(Duration::from_secs(3), session.tcp_reachable()).await {
        Ok(reachable) => reachable,
        Err(_) => Some(false),
    };
    Ok(())
}

/// The server's facts, the first thing it sends; an older server's refusal of the job
/// is its `Fatal`.
async fn expect_facts(link: &mut Link) -> anyhow::Result<HostFacts> {
    match expect(link, FACTS_TIMEOUT).await? {
        Message::DiagnoseFacts(facts) => Ok(facts.bounded()),
        other => {
            anyhow::bail!("the remote soku answered with {} instead of its facts", other.kind())
        }
    }
}

/// The server's report of the probe in `direction`.
async fn expect_probe(link: &mut Link, direction: ProbeDirection) -> anyhow::Result<ProbeReport> {
    match expect(link, PROBE + REPORT_SLACK).await? {
        Message::DiagnoseProbe(report) if report.direction == direction => {
            let report = report.bounded();
            match &report.error {
                Some(error) => {
                    Err(Exit::failure(format!("the remote's probe failed: {error}")).into())
                }
                None => Ok(report),
            }
        }
        other => anyhow::bail!(
            "the remote soku answered with {} instead of a probe report",
            other.kind()
        ),
    }
}

/// The next control message within `patience`; a `Fatal` is the remote's error.
async fn expect(link: &mut Link, patience: Duration) -> anyhow::Result<Message> {
    let deadline = Instant::now() + patience;
    // Bounded by the deadline; chunks (none are expected) are skipped.
    loop {
        let next = tokio::time::timeout_at(deadline, link.recv()).await.map_err(|_| {
            Exit::connection(format!("the remote soku did not answer within {patience:?}"))
        })?;
        match next {
            None | Some(Ok(Inbound::Closed)) => anyhow::bail!("the remote soku closed the session"),
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(Inbound::Control(Message::Fatal { message }))) => {
                let hint = if message.contains("Diagnose") || message.contains("variant") {
                    " (the remote soku may be too old for diagnose: update it)"
                } else {
                    ""
                };
                return Err(Exit::failure(format!("remote: {message}{hint}")).into());
            }
            Some(Ok(Inbound::Control(message))) => return Ok(message),
            Some(Ok(Inbound::Chunk(_))) => continue,
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// What the session said while it was set up: the transport, and warnings.
#[derive(Default)]
struct Collected {
    connected: Mutex<String>,
    warnings: Mutex<Vec<String>>,
}

impl EventSink for Collected {
    fn event(&self, event: TransferEvent) {
        match event {
            TransferEvent::Connected { transport, .. } => {
                if let Ok(mut slot) = self.connected.lock() {
                    *slot = transport;
                }
            }
            // Said at once, as a copy says it: what was sent to the remote.
            TransferEvent::Notice(message) => crate::ui::say(&format!("soku: {message}")),
            TransferEvent::Warning(warning) => {
                if let Ok(mut list) = self.warnings.lock() {
                    // Bounded: a session says a handful of things.
                    if list.len() < 32 {
                        list.push(warning);
                    }
                }
            }
            _ => {}
        }
    }
}
