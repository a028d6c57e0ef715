//! The client's side of a session: start `soku serve` through ssh, exchange hellos,
//! choose the data path (`choose.rs`: QUIC, TLS over TCP, or the ssh channel), and keep
//! what it runs on until the copy is done. How it is set up is `options.rs`.

mod choose;
mod kept;
mod options;
mod race;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use soku_engine::events::{EventSink, TransferEvent};
use soku_engine::link::{self, Link};
use soku_proto::frame;
use soku_proto::hello::{
    ClientHello, HelloScanner, ReceivePreview, Scan, ServerHello, ServerNote, ServerSummary,
    TransportChoice, KEEP_SINCE_VERSION,
};
use soku_proto::name::BYTE_NAMES_SINCE_VERSION;
use soku_proto::MAGIC;
use soku_transport::{Fingerprint, Identity};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::Child;

use self::choose::{Chosen, Offer};
pub use self::options::SessionOptions;
use crate::carrier::policing;
use crate::carrier::shaping::{self, RoundTrips};
use crate::carrier::udp_block::TcpRoundTrips;
use crate::cli::transport_mode::TransportMode;
use crate::client::kept::KeptServer;
use crate::client::launch::Forward;
use crate::client::preview;
use crate::exit::Exit;

/// Our half of the channel the server reads, as the session keeps it: ssh's stdin, or
/// any other writer that [`Session::over`] was given.
type ChannelWriter = Box<dyn AsyncWrite + Send + Unpin>;

/// A QUIC connection and the endpoint that made it.
pub struct QuicPath {
    /// The endpoint, kept until the session ends: dropping it would stop the connection.
    _endpoint: quinn::Endpoint,
    /// The connection.
    pub conn: quinn::Connection,
    /// Wakes the connection while its path is silent, so a blackout's end is noticed
    /// within half a second (`soku_transport::wake_when_silent`).
    _wake: soku_transport::SilenceWake,
}

/// A running session with the remote `soku serve`. The data moves over the [`Link`]
/// that [`Session::start`] returns beside it; the session keeps what the link runs on.
pub struct Session {
    /// ssh; none when the session reached a server kept from an earlier copy.
    child: Option<Child>,
    /// Over QUIC or TCP: ends when ssh's output does (see `watch_ssh`).
    ssh_watch: Option<tokio::task::JoinHandle<()>>,
    /// Kept open over QUIC or TCP: closing it tells the server to exit. Shared only with
    /// the pinger, which holds it weakly (see `crate::carrier::shaping`).
    ssh_stdin: Option<Arc<tokio::sync::Mutex<ChannelWriter>>>,
    /// Over QUIC with TCP as a way out: round trips over ssh, timed beside QUIC's to tell
    /// a UDP shaper (see `crate::carrier::shaping`), and the task that pings.
    pings: Option<(Arc<RoundTrips>, tokio::task::JoinHandle<()>)>,
    /// On a session with a kept server, which has no ssh channel: TCP handshakes with
    /// the login's host, made while QUIC is silent (see `crate::carrier::udp_block`).
    handshakes: Option<Arc<crate::carrier::tcp_probe::Handshakes>>,
    /// The QUIC connection, if the data moves over QUIC.
    pub quic: Option<QuicPath>,
    /// Why the data does not move over QUIC, when it does not (the user asked, or UDP
    /// did not get through).
    pub fallback: Option<String>,
    /// Over QUIC in auto mode: whether TCP gets through too, should UDP turn out
    /// rate-limited (see `carrier/policing.rs`).
    tcp_check: Option<choose::TcpCheck>,
    /// Why the server closed QUIC for a UDP rate limit, as it said on the ssh channel.
    note: Arc<OnceLock<String>>,
    /// The server's own figures at the end of its job, as it said on the ssh channel
    /// (for `--report`).
    summary: Arc<OnceLock<ServerSummary>>,
    /// With `diagnose`: when the transport choice left, and when the server's
    /// [`ServerNote::ChoiceSeen`] came back over ssh (see [`Session::ssh_rtt`]).
    choice_sent: tokio::time::Instant,
    choice_seen: Arc<OnceLock<tokio::time::Instant>>,
    /// The receiving side said it holds nothing under the names that come (see
    /// `crate::client::preview`): the copy runs without held reports.
    nothing_held: bool,
    /// The server takes names that are not UTF-8 (`soku_proto::name`).
    byte_names: bool,
    /// The most descriptors the server may hold open, as its hello said (`None`: an
    /// older server): an upload keeps the files open there within it.
    peer_open_files: Option<u64>,
    /// The server stays after this job for the next copies (see `crate::client::kept`), and how
    /// they reach it, until [`Session::take_kept`].
    stays: bool,
    kept: Option<KeptServer>,
    /// On a session with a kept server: reads the server's summary, which comes on a
    /// QUIC stream of its own (`server/serve/kept.rs`).
    kept_notes: Option<tokio::task::JoinHandle<()>>,
}

/// A QUIC copy closed because UDP looks rate-limited.
pub struct Policed {
    /// What the data sender saw.
    pub why: String,
    /// Whether TCP got through when the session was set up.
    pub tcp_reachable: bool,
}

/// The shared ssh login's master brought no hello within its time: it is given up.
#[derive(Debug, thiserror::Error)]
#[error("the shared ssh connection did not answer within {} s", .0.as_secs())]
pub struct MasterSilent(pub Duration);

impl Session {
    /// Starts the remote server with `cmd` and sets up the data path over its ssh
    /// channel ([`Session::over`]). A server that says no hello is explained from ssh's
    /// exit status and error output.
    pub async fn start(
        mut cmd: tokio::process::Command,
        opts: &SessionOptions,
        events: &dyn EventSink,
    ) -> anyhow::Result<(Session, Link)> {
        let program = format!("{:?}", cmd.as_std().get_program());
        let mut child =
            cmd.spawn().map_err(|e| Exit::connection(format!("cannot run {program}: {e}")))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            anyhow::bail!("internal: child pipes missing");
        };
        let dials = opts.dial_errors.is_some();
        let stderr = child.stderr.take().map(|pipe| Forward::start(pipe, dials));
        match Session::over(stdout, stdin, opts, events).await {
            Ok((mut session, link)) => {
                session.child = Some(child);
                Ok((session, link))
            }
            Err(err) => match err.downcast::<NoHello>() {
                Ok(NoHello(err)) => {
                    let dialed = opts.dial_errors.as_deref();
                    Err(explain_startup_failure(&mut child, stderr, dialed, err).await)
                }
                Err(err) => Err(err),
            },
        }
    }

    /// Sets up the data path with a server that reads our hello from `writer` and
    /// answers on `reader`: the halves of ssh's channel, or of anything else that
    /// carries the server's (an in-memory pipe in tests). Over QUIC or TCP the session
    /// keeps both for the server's notes and the end of the channel.
    pub async fn over<R, W>(
        mut reader: R,
        mut writer: W,
        opts: &SessionOptions,
        events: &dyn EventSink,
    ) -> anyhow::Result<(Session, Link)>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let identity = Identity::generate()?;
        let want_direct = opts.mode != TransportMode::Ssh;
        let mut hello = MAGIC.to_vec();
        let mut client_hello = ClientHello::new(identity.fingerprint().0, want_direct);
        client_hello.path_memory = opts.download_memory;
        client_hello.background = opts.background;
        client_hello.diagnose = opts.diagnose;
        client_hello.receive_preview = opts.receive_preview.clone();
        client_hello.keep = opts.keep;
        // A server that sends us the data keeps the files it announces within it.
        client_hello.open_files = Some(soku_engine::limits::open_files() as u64);
        frame::encode(&client_hello, &mut hello)?;
        // If the remote never starts soku, this write may fail; the read below says why.
        let _ = async {
            writer.write_all(&hello).await?;
            writer.flush().await
        }
        .await;

        let hello = read_server_hello(&mut reader);
        let found = match opts.attach_timeout {
            Some(limit) => match tokio::time::timeout(limit, hello).await {
                Ok(found) => found,
                Err(_) => return Err(MasterSilent(limit).into()),
            },
            None => hello.await,
        };
        let (server_hello, leftover) = found.map_err(NoHello)?;
        // The newest version both speak; with one version there is nothing to switch on.
        let version = server_hello.negotiate().map_err(|e| Exit::connection(e.to_string()))?;
        let ServerHello::Ready {
            udp_port,
            tcp_port,
            server_addr,
            fingerprint,
            warnings,
            open_files,
            ..
        } = server_hello;
        for warning in warnings {
            events.event(TransferEvent::Warning(format!("remote: {warning}")));
        }

        let offer = Offer {
            identity: &identity,
            server: Fingerprint(fingerprint),
            server_addr,
            udp_port,
            tcp_port,
        };
        // An upload's preview is answered once the server has read our hello, which ssh
        // hands it a round trip after it started: about when our handshake is done, so
        // the answer is read meanwhile (see `crate::client::preview`). A server from before
        // protocol 6 answers nothing.
        let previewed = opts.receive_preview.as_ref().filter(|_| version >= preview::SINCE_VERSION);
        let answering = async {
            match previewed {
                // A server that said hello and then nothing is stalled, as it is
                // once the copy runs: the wait is bounded by the same limit.
                Some(ReceivePreview::Upload { .. }) => {
                    tokio::time::timeout(opts.stall, preview::read_answer(&mut reader, leftover))
                        .await
                        .map_err(|_| soku_engine::LinkError::Stalled(opts.stall))?
                }
                Some(ReceivePreview::NothingHeld) => Ok((true, leftover)),
                None => Ok((false, leftover)),
            }
        };
        let (chosen, answered) = tokio::join!(choose::choose(&offer, opts), answering);
        let chosen = chosen.map_err(|why| {
            Exit::connection(format!(
                "{why} (--transport {}; auto tries QUIC, then TCP, then the ssh channel)",
                opts.mode.name()
            ))
        })?;
        let (nothing_held, leftover) = answered?;
        // The server stays after a job over QUIC that went well, if we asked it to and
        // it speaks a protocol that can.
        let keeps = opts.keep && version >= KEEP_SINCE_VERSION;
        let byte_names = version >= BYTE_NAMES_SINCE_VERSION;
        let choice = match &chosen {
            Chosen::Quic(_, check) => TransportChoice::Quic { tcp_ready: check.is_some() },
            Chosen::Tcp(won, _) => TransportChoice::Tcp { lanes: won.conns.lanes.len() as u8 },
            Chosen::Ssh(_) => TransportChoice::SshChannel,
        };
        writer.write_all(&frame::to_vec(&choice)?).await?;
        writer.flush().await?;
        let choice_sent = tokio::time::Instant::now();
        let choice_seen = Arc::new(OnceLock::new());

        let note = Arc::new(OnceLock::new());
        let summary = Arc::new(OnceLock::new());
        match chosen {
            Chosen::Quic(won, tcp_check) => {
                if let Some(warning) = won.report.warning {
                    events.event(TransferEvent::Warning(warning));
                }
                let conn = won.conn;
                let (send, recv) = conn.open_bi().await?;
                let link = link::quic::link(conn.clone(), send, recv);
                events.event(TransferEvent::Connected {
                    transport: format!("QUIC to {}", won.addr),
                    reason: None,
                });
                let notes = std::io::Cursor::new(leftover).chain(reader);
                let writer = Arc::new(tokio::sync::Mutex::new(Box::new(writer) as ChannelWriter));
                // Only a copy that could move to TCP has a use for the round trips.
                let pings = tcp_check.as_ref().map(|_| {
                    let pings = Arc::new(RoundTrips::default());
                    let pinging =
                        shaping::ping(Arc::downgrade(&writer), pings.clone(), policing::WATCH_FOR);
                    (pings, tokio::spawn(pinging))
                });
                let watch = watch_ssh(
                    notes,
                    Some(conn.clone()),
                    SshNotes {
                        policed: note.clone(),
                        summary: summary.clone(),
                        choice_seen: choice_seen.clone(),
                        pings: pings.as_ref().map(|(pings, _)| pings.clone()),
                    },
                );
                let ssh_watch = Some(tokio::spawn(watch));
                let _wake = soku_transport::wake_when_silent(&conn);
                let kept = keeps.then_some(KeptServer {
                    addr: won.addr,
                    server: Fingerprint(fingerprint),
                    identity,
                    min_rtt: Duration::ZERO,
                    tcp_reachable: None,
                    byte_names,
                    open_files,
                });
                let quic = Some(QuicPath { _endpoint: won.endpoint, conn, _wake });
                let session = Session {
                    child: None,
                    ssh_watch,
                    ssh_stdin: Some(writer),
                    pings,
                    handshakes: None,
                    quic,
                    fallback: None,
                    tcp_check,
                    note,
                    summary,
                    choice_sent,
                    choice_seen,
                    nothing_held,
                    byte_names,
                    peer_open_files: open_files,
                    stays: kept.is_some(),
                    kept,
                    kept_notes: None,
                };
                Ok((session, link))
            }
            Chosen::Tcp(won, why) => {
                let why = why.or_else(|| opts.switched.clone());
                let lanes = won.conns.lanes.len();
                if let (Some(why), None) = (&why, &opts.switched) {
                    events.event(TransferEvent::Warning(format!(
                        "{why}; the data moves over TLS/TCP instead"
                    )));
                }
                if let Some(warning) = won.report.warning(lanes + 1) {
                    events.event(TransferEvent::Warning(warning));
                }
                if opts.background {
                    events.event(TransferEvent::Warning(format!(
                        "--background yields only over QUIC: over TLS/TCP the kernel's {} \
                         runs as for any other connection",
                        won.report.congestion
                    )));
                }
                let link = won.conns.into_link(&won.report);
                events.event(TransferEvent::Connected {
                    transport: format!(
                        "TLS/TCP to {} ({lanes} data connection{}{}; {})",
                        won.addr,
                        if lanes == 1 { "" } else { "s" },
                        if lanes > 1 && won.report.has_bbr() { ", used as needed" } else { "" },
                        won.report.describe()
                    ),
                    reason: why.clone(),
                });
                let notes = SshNotes {
                    policed: note.clone(),
                    summary: summary.clone(),
                    choice_seen: choice_seen.clone(),
                    pings: None,
                };
                let ssh_watch = Some(tokio::spawn(watch_ssh(reader, None, notes)));
                let fallback = Some(why.unwrap_or_else(|| "--transport tcp".into()));
                let session = Session {
                    child: None,
                    ssh_watch,
                    ssh_stdin: Some(Arc::new(tokio::sync::Mutex::new(Box::new(writer)))),
                    pings: None,
                    handshakes: None,
                    quic: None,
                    fallback,
                    tcp_check: None,
                    note,
                    summary,
                    choice_sent,
                    choice_seen: choice_seen.clone(),
                    nothing_held,
                    byte_names,
                    peer_open_files: open_files,
                    stays: false,
                    kept: None,
                    kept_notes: None,
                };
                Ok((session, link))
            }
            Chosen::Ssh(why) => {
                if opts.mode == TransportMode::Auto {
                    events.event(TransferEvent::Warning(format!(
                        "{why}; carrying the data over the ssh channel instead (slower)"
                    )));
                }
                let input = std::io::Cursor::new(leftover).chain(reader);
                let link = link::stream::link(input, writer);
                events.event(TransferEvent::Connected {
                    transport: "the ssh channel".into(),
                    reason: Some(why.clone()),
                });
                let session = Session {
                    child: None,
                    ssh_watch: None,
                    ssh_stdin: None,
                    pings: None,
                    handshakes: None,
                    quic: None,
                    fallback: Some(why),
                    tcp_check: None,
                    note,
                    summary,
                    choice_sent,
                    choice_seen: choice_seen.clone(),
                    nothing_held,
                    byte_names,
                    peer_open_files: open_files,
                    stays: false,
                    kept: None,
                    kept_notes: None,
                };
                Ok((session, link))
            }
        }
    }

    /// Over QUIC with TCP as a way out: starts watching our side of the connection for a
    /// UDP rate limit (it matters when we send the data).
    pub fn watch_policing(&self) -> Option<tokio::task::JoinHandle<Option<String>>> {
        let conn = self.connection()?;
        self.tcp_check.as_ref()?;
        let tcp = match (&self.pings, &self.handshakes) {
            (Some((pings, _)), _) => Some(TcpRoundTrips::Ssh(pings.clone())),
            (None, Some(handshakes)) => Some(TcpRoundTrips::Handshakes(handshakes.clone())),
            (None, None) => None,
        };
        Some(tokio::spawn(crate::carrier::policing::watch_beside_tcp(conn.clone(), tcp)))
    }

    /// After a QUIC copy failed: whether it was closed for a UDP rate limit, by our
    /// `watch` or by the server's, and whether TCP gets through.
    pub async fn policed(
        &mut self,
        watch: Option<tokio::task::JoinHandle<Option<String>>>,
    ) -> Option<Policed> {
        let ours = match watch {
            Some(watch) => policing::verdict(watch).await,
            None => None,
        };
        let theirs = || {
            self.note
                .get()
                .cloned()
                .or_else(|| self.connection().and_then(policing::policed_by_peer))
        };
        let why = ours.or_else(theirs)?;
        let check = self.tcp_check.take()?;
        let tcp_reachable = check.await.unwrap_or(false);
        Some(Policed { why, tcp_reachable })
    }

    /// With `diagnose`, over QUIC or TCP: the time from our transport choice to the
    /// server's note that it read it, a round trip over ssh (waits up to `patience`).
    pub async fn ssh_rtt(&self, patience: Duration) -> Option<Duration> {
        let deadline = tokio::time::Instant::now() + patience;
        // Bounded: polls every 5 ms until the note or the deadline.
        loop {
            if let Some(seen) = self.choice_seen.get() {
                return Some(seen.saturating_duration_since(self.choice_sent));
            }
            if tokio::time::Instant::now() >= deadline || self.ssh_ended() {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Over QUIC in auto mode: whether the TLS-over-TCP attempt that raced QUIC got
    /// through (`None`: there was none).
    pub async fn tcp_reachable(&mut self) -> Option<bool> {
        let check = self.tcp_check.take()?;
        Some(check.await.unwrap_or(false))
    }

    /// Whether ssh ended under a QUIC or TCP copy (the server or the login is gone).
    pub fn ssh_ended(&self) -> bool {
        self.ssh_watch.as_ref().is_some_and(|watch| watch.is_finished())
    }

    /// Whether the receiving side said it holds nothing under the names that come:
    /// the copy then runs without held reports (see `crate::client::preview`).
    pub fn nothing_held(&self) -> bool {
        self.nothing_held
    }

    /// Whether the server takes names that are not UTF-8 (`soku_proto::name`).
    pub fn byte_names(&self) -> bool {
        self.byte_names
    }

    /// The most descriptors the server may hold open, if it said.
    pub fn peer_open_files(&self) -> Option<u64> {
        self.peer_open_files
    }

    /// How the next copies reach the server that stays after this job, if it does, with
    /// the path's smallest RTT so far and whether TCP got through; taken once (to be
    /// recorded after the close).
    pub async fn take_kept(&mut self) -> Option<KeptServer> {
        let min_rtt = self.connection().map(soku_transport::min_rtt);
        let mut kept = self.kept.take()?;
        kept.min_rtt = min_rtt.unwrap_or(kept.min_rtt);
        if let Some(check) = self.tcp_check.take() {
            // Decided long since on a copy that went well (the race ends with the
            // handshake); one still undecided counts as not through.
            kept.tcp_reachable = Some(check.is_finished() && check.await.unwrap_or(false));
        }
        Some(kept)
    }

    /// The QUIC connection, if the data moves over QUIC.
    pub fn connection(&self) -> Option<&quinn::Connection> {
        self.quic.as_ref().map(|quic| &quic.conn)
    }

    /// Ends the session cleanly: ends our side of the link and waits for the server to
    /// end its own, closes QUIC, closes ssh and reaps it.
    pub async fn close(self, link: Link) -> anyhow::Result<()> {
        self.close_with(link, false).await.map(drop)
    }

    /// [`Session::close`], and the server's summary (`--report`), if it sent one: the
    /// server writes it on the ssh channel when its job is done, before its side of the
    /// link ends, so it has been read once ssh's output ends after ssh exits.
    pub async fn close_for_summary(self, link: Link) -> anyhow::Result<Option<ServerSummary>> {
        self.close_with(link, true).await
    }

    async fn close_with(self, link: Link, summary: bool) -> anyhow::Result<Option<ServerSummary>> {
        let Session {
            child,
            ssh_stdin,
            quic,
            ssh_watch,
            summary: said,
            pings,
            stays: kept,
            kept_notes,
            ..
        } = self;
        if let Some((_, pinging)) = pings {
            pinging.abort();
        }
        // Over QUIC or TCP the data did not travel in the ssh channel.
        let off_channel = ssh_watch.is_some();
        // Without a report nothing waits for the watch: it is stopped at once.
        let ssh_watch = match ssh_watch {
            Some(watch) if !summary => {
                watch.abort();
                None
            }
            watch => watch,
        };
        // The server ends its side once it is done; bounded, so a stuck peer cannot hang us.
        let _ = link.close(Duration::from_secs(5)).await;
        // A server that stays does not end ssh: its summary, written before its side of
        // the link ended, is waited for by itself (on ssh's output, or on QUIC when
        // there is no ssh).
        if kept && summary {
            if let Some(notes) = kept_notes {
                let _ = tokio::time::timeout(SUMMARY_PATIENCE, notes).await;
            } else {
                let deadline = tokio::time::Instant::now() + SUMMARY_PATIENCE;
                // Bounded: polls every 5 ms until the summary or the deadline.
                while said.get().is_none() && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
        // Only the CONNECTION_CLOSE has to leave, and quinn's driver sends it while ssh
        // winds down below. Nothing waits for the endpoint to drain (3 PTO, at least
        // 75 ms with quinn's 25 ms ack delay): the server also ends when the ssh channel
        // closes, so a lost CONNECTION_CLOSE costs nothing. A fixed 20 ms grace here was
        // 20 ms of every copy's wall time (1.3 % of a 1 GiB loopback copy).
        if let Some(quic) = &quic {
            soku_transport::close(&quic.conn, 0, b"done");
        }
        drop(ssh_stdin);
        let Some(mut child) = child else {
            drop(quic);
            return Ok(said.get().cloned());
        };
        if off_channel && (!summary || kept) {
            // The job is done and verified at the target, and nothing more is read from
            // ssh: the user does not wait for ssh's goodbye, a round trip after our close
            // (the server exits on it, then sshd tells ssh). Dropping `child` kills ssh:
            // the server, done already, then exits as its ssh channel ends (or stays,
            // when it was asked to). Left to end by itself, an ssh whose path went away
            // meanwhile would linger for as long as its TCP connection takes to give up.
            drop(child);
            drop(quic);
            return Ok(said.get().cloned());
        }
        match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
            Ok(_) => {}
            Err(_) => {
                let _ = child.kill().await;
            }
        }
        if let Some(watch) = ssh_watch {
            // ssh has exited: its output ends as soon as the pipe is drained. Bounded
            // anyway, should something else hold the pipe open (the watch then ends with
            // the pipe, detached).
            let _ = tokio::time::timeout(Duration::from_secs(1), watch).await;
        }
        drop(quic);
        Ok(said.get().cloned())
    }

    /// Tells the remote that the user interrupted the copy, while the copy still holds
    /// its link: QUIC is closed with [`crate::client::interrupt::CLOSE_CODE`], which ends the
    /// remote job as it arrives, and ssh is stopped, which ends the remote soku over
    /// the other transports. [`Session::abort`] follows once the copy let go of the link.
    pub fn interrupt(&mut self) {
        if let Some(quic) = &self.quic {
            soku_transport::close(&quic.conn, crate::client::interrupt::CLOSE_CODE, b"interrupted");
        }
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
        }
    }

    /// Ends a session that [`Session::interrupt`] closed, as [`Session::abort`] does, and
    /// then waits up to [`CLOSE_DRAIN`] for the endpoint to drain: the process ends next,
    /// and with it the runtime that sends the CONNECTION_CLOSE, and that answers with it
    /// again a packet of the server's showing that it was lost (RFC 9000, section
    /// 10.2.1). A kept job whose close never came holds the upload's partial files
    /// until a nudge finds its client gone (`server/serve/silent_client.rs`).
    pub async fn end_interrupted(mut self, link: Link) {
        let quic = self.quic.take();
        self.abort(link).await;
        if let Some(quic) = quic {
            let _ = tokio::time::timeout(CLOSE_DRAIN, quic._endpoint.wait_idle()).await;
        }
    }

    /// Stops everything at once (after an error).
    pub async fn abort(mut self, link: Link) {
        drop(link);
        if let Some(watch) = self.ssh_watch.take() {
            watch.abort();
        }
        if let Some((_, pinging)) = self.pings.take() {
            pinging.abort();
        }
        if let Some(notes) = self.kept_notes.take() {
            notes.abort();
        }
        if let Some(quic) = &self.quic {
            soku_transport::close(&quic.conn, 1, b"aborted");
        }
        if let Some(child) = &mut self.child {
            let _ = child.kill().await;
        }
    }
}

/// How long a copy waits for the summary of a server that stays (`--report`): it was
/// written before the server's side of the link ended.
const SUMMARY_PATIENCE: Duration = Duration::from_secs(2);

/// How long an interrupted copy lets its endpoint drain before the process ends: three
/// probe timeouts on a short path (about 80 ms on loopback, with quinn's 25 ms ack
/// delay), and only the user's Ctrl-C waits for it.
const CLOSE_DRAIN: Duration = Duration::from_millis(300);

/// Where [`watch_ssh`] keeps what the server says on the ssh channel.
struct SshNotes {
    /// Why the server closed QUIC for a UDP rate limit.
    policed: Arc<OnceLock<String>>,
    /// The server's figures at the end of its job.
    summary: Arc<OnceLock<ServerSummary>>,
    /// When the server's [`ServerNote::ChoiceSeen`] came.
    choice_seen: Arc<OnceLock<tokio::time::Instant>>,
    /// The round trips its pongs complete, when we ping.
    pings: Option<Arc<RoundTrips>>,
}

/// Code of the QUIC close when the ssh session ended under a running copy.
pub const SSH_ENDED: u32 = 2;

/// Reads what the server still says on the ssh channel (a [`ServerNote`]) until ssh's
/// output ends, and closes the QUIC connection then, if there is one. The server exits
/// when its ssh channel ends (`server/serve.rs`), and ssh ends when the server does: so either
/// side stopping (killed, or its login dropped) is noticed at once, not after QUIC's
/// idle timeout of a minute (TCP connections end with the server anyway;
/// [`Session::ssh_ended`] then says why). A policed note is kept and closes QUIC with
/// the policed code at once.
async fn watch_ssh<R: AsyncRead + Unpin>(
    mut stdout: R,
    conn: Option<quinn::Connection>,
    notes: SshNotes,
) {
    let SshNotes { policed: note, summary, choice_seen: seen, pings } = notes;
    let mut decoder = frame::Decoder::new(64 * 1024);
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = stdout.read(&mut buf).await {
        decoder.feed(&buf[..n]);
        // Anything else than a note is not ours to act on; a malformed frame ends the
        // reading, not the copy.
        while let Ok(Some(payload)) = decoder.next_payload() {
            match soku_proto::hello::decode_hello(&payload) {
                Ok(ServerNote::Policed { why }) => {
                    // Kept first: the copy, failing on the close, looks for it.
                    let _ = note.set(why.clone());
                    if let Some(conn) = &conn {
                        soku_transport::close(conn, policing::POLICED, why.as_bytes());
                    }
                }
                Ok(ServerNote::Summary(said)) => {
                    let _ = summary.set(said);
                }
                Ok(ServerNote::ChoiceSeen) => {
                    let _ = seen.set(tokio::time::Instant::now());
                }
                Ok(ServerNote::Pong { seq }) => {
                    if let Some(pings) = &pings {
                        pings.answered(seq, tokio::time::Instant::now());
                    }
                }
                // Read at the start of the session (`preview::read_answer`), never here.
                Ok(ServerNote::Holds { .. }) | Err(_) => {}
            }
        }
    }
    if let Some(conn) = conn {
        soku_transport::close(&conn, SSH_ENDED, b"the ssh session ended");
    }
}

async fn read_server_hello<R: AsyncRead + Unpin>(
    stdout: &mut R,
) -> anyhow::Result<(ServerHello, Vec<u8>)> {
    let mut scanner = HelloScanner::default();
    let mut buf = vec![0u8; 16 * 1024];
    let mut decoder = frame::Decoder::new(64 * 1024);
    let mut found = false;
    loop {
        let n = stdout.read(&mut buf).await?;
        if n == 0 {
            let seen =
                String::from_utf8_lossy(if found { &[] } else { scanner.seen() }).into_owned();
            anyhow::bail!(StartupEof { noise: seen });
        }
        if !found {
            match scanner.feed(&buf[..n])? {
                Scan::NeedMore => continue,
                Scan::Found { rest, .. } => {
                    found = true;
                    decoder.feed(&rest);
                }
            }
        } else {
            decoder.feed(&buf[..n]);
        }
        if let Some(payload) = decoder.next_payload()? {
            let hello = soku_proto::hello::decode_server_hello(&payload)
                .map_err(|e| Exit::connection(e.to_string()))?;
            return Ok((hello, decoder.buffered().to_vec()));
        }
    }
}

/// The server's hello did not come: [`Session::start`] explains why from ssh's side.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct NoHello(anyhow::Error);

/// The remote's output ended before a hello.
#[derive(Debug, thiserror::Error)]
#[error("the remote closed the connection before soku started")]
struct StartupEof {
    noise: String,
}

async fn explain_startup_failure(
    child: &mut Child,
    stderr: Option<Forward>,
    dial_errors: Option<&std::path::Path>,
    err: anyhow::Error,
) -> anyhow::Error {
    if err.downcast_ref::<StartupEof>().is_none() {
        return Exit::connection(format!("remote soku did not start properly: {err:#}")).into();
    }
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    // ssh's own message goes first: ours points at it.
    if let Some(stderr) = stderr {
        stderr.drain().await;
    }
    // What soku's dialer could not reach, in ssh's place (ssh sent its output to
    // /dev/null: a persistent master's ProxyCommand must not hold the terminal).
    let mut dial_failed = false;
    if let Some(path) = dial_errors {
        if let Ok(text) = std::fs::read_to_string(path) {
            let _ = std::fs::remove_file(path);
            if let Some(line) = text.lines().next().filter(|l| !l.is_empty()) {
                if crate::ui::json() {
                    // No line of plain text among the JSON: the reason goes into the
                    // error's own message.
                    let message = format!("ssh could not connect to the remote host: {line}");
                    return Exit::connection(message).into();
                }
                crate::ui::say(&format!("ssh: {line}"));
                dial_failed = true;
            }
        }
    }
    let code = status.ok().and_then(|s| s.ok()).and_then(|s| s.code());
    let message = match code {
        Some(127) => "the remote host has no `soku` on its PATH: install soku there, \
                      or pass --remote-soku /path/to/soku"
            .to_string(),
        Some(126) => "the remote soku could not be executed (permission denied?): check \
                      --remote-soku or the file's mode on the remote host"
            .to_string(),
        // ssh exits 255 both when it cannot connect (and says why) and when the remote
        // command is killed by a signal (and says nothing): the crash suite's kill -9 of
        // `soku serve` during the handshake was told "could not connect".
        // The dialer said why it could not reach the host (a name that does not
        // resolve, a refused port): no remote soku ever ran.
        // ssh printed why it could not log in (a host key not accepted, no key the
        // server takes): no remote soku ever ran.
        Some(255) if dial_failed || crate::client::launch::ssh_login_failed() => {
            "ssh could not connect to the remote host (the reason is above)".to_string()
        }
        // Its allocator's last words came through ssh's error output (drained above).
        _ if crate::client::launch::remote_out_of_memory().is_some() => {
            "the remote soku ran out of memory as it started (see above): raise the remote's \
             memory limit (ulimit -v, the login's cgroup)"
                .to_string()
        }
        Some(255) => "ssh could not connect, or the remote soku was killed before it \
                      started (ssh exited with status 255; its message, if any, is above)"
            .to_string(),
        Some(code) => format!("the remote command exited with status {code} before soku started"),
        None => "the remote side ended before soku started".to_string(),
    };
    Exit::connection(message).into()
}
