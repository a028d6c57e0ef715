//! The client's side of a session: start `soku serve` through ssh, exchange hellos,
//! choose the data path (`choose.rs`), and keep what it runs on until the copy is done.
//! How it is set up is `options.rs`.
//!
//! A session has one carrier, with one file each, as the links they make
//! (`soku_engine::link::{quic,striped,stream}`):
//! - `quic.rs`: QUIC, with the ssh channel beside it (`side_channel.rs`);
//! - `tcp.rs`: TLS over TCP, with the ssh channel beside it;
//! - `ssh_channel.rs`: the ssh channel itself;
//! - `kept.rs`: QUIC to a server kept from an earlier copy, no ssh at all.

mod choose;
mod kept;
mod options;
mod quic;
mod race;
mod side_channel;
mod ssh_channel;
mod tcp;
mod terms;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use soku_engine::events::{EventSink, TransferEvent};
use soku_engine::link::Link;
use soku_proto::frame;
use soku_proto::hello::{
    ClientHello, HelloScanner, ReceivePreview, Scan, ServerHello, ServerSummary, TransportChoice,
    KEEP_SINCE_VERSION,
};
use soku_proto::name::BYTE_NAMES_SINCE_VERSION;
use soku_proto::{ProtoError, MAGIC};
use soku_transport::{Fingerprint, Identity};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::Child;

use self::choose::{Chosen, Offer};
use self::kept::{KeptCarrier, KeptGone};
pub use self::options::SessionOptions;
use self::quic::{Keeping, QuicCarrier, QuicPath};
use self::side_channel::{Halves, SideChannel};
use self::tcp::TcpCarrier;
use self::terms::Terms;
use crate::carrier::policing;
use crate::carrier::udp_block::TcpRoundTrips;
use crate::cli::spec::Remote;
use crate::cli::transport_mode::TransportMode;
use crate::client::kept::KeptServer;
use crate::client::launch::deploy::{self, Lack, NoRemoteSoku, Platform};
use crate::client::launch::Forward;
use crate::client::launch::{Launcher, ServeCommand};
use crate::client::preview;
use crate::exit::Exit;

/// A running session with the remote `soku serve`. The data moves over the [`Link`]
/// that [`Session::start`] returns beside it; the session keeps what the link runs on.
pub struct Session {
    /// ssh; none on a kept server, or over a channel given to [`Session::over`].
    child: Option<Child>,
    /// ssh's error output on its way to ours: a session that fails lets it out before
    /// soku's verdict ([`Session::stop`]).
    stderr: Option<Forward>,
    carrier: Carrier,
    terms: Terms,
    /// The server's own figures at the end of its job (for `--report`), as it said on
    /// the ssh channel, or on a stream of its own from a kept server.
    summary: Arc<OnceLock<ServerSummary>>,
}

/// What the data moves over, and what that needs kept.
enum Carrier {
    Quic(QuicCarrier),
    Tcp(TcpCarrier),
    /// The ssh channel, and why not QUIC or TCP.
    SshChannel {
        fallback: String,
    },
    Kept(KeptCarrier),
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
                session.stderr = stderr;
                Ok((session, link))
            }
            Err(err) => match err.downcast::<NoHello>() {
                Ok(NoHello(err)) => {
                    let dialed = opts.dial_errors.as_deref();
                    let named = opts.remote_soku.as_deref();
                    Err(explain_startup_failure(&mut child, stderr, dialed, named, err).await)
                }
                Err(err) => Err(err),
            },
        }
    }

    /// Starts the remote soku through `launcher` ([`Session::start`]), for a command
    /// with one session (a copy retries in a loop of its own). A remote with no soku
    /// this one can talk to gets one sent first, once, unless `deploy` is off
    /// (`client/launch/deploy.rs`).
    pub async fn launch(
        launcher: &Launcher,
        remote: &Remote,
        serve: &ServeCommand,
        opts: &SessionOptions,
        events: &dyn EventSink,
        deploy: bool,
    ) -> anyhow::Result<(Session, Link)> {
        Session::launch_shaped(launcher, remote, serve, opts, events, deploy, |_| {}).await
    }

    /// [`Session::launch`], with `shape` applied to the command that starts ssh.
    pub async fn launch_shaped(
        launcher: &Launcher,
        remote: &Remote,
        serve: &ServeCommand,
        opts: &SessionOptions,
        events: &dyn EventSink,
        deploy: bool,
        shape: fn(&mut tokio::process::Command),
    ) -> anyhow::Result<(Session, Link)> {
        let command = || {
            launcher.command(Some(remote), serve, false).map(|mut cmd| {
                shape(&mut cmd);
                cmd
            })
        };
        match Session::start(command()?, opts, events).await {
            Err(err) if deploy => {
                let Some(missing) = err.downcast_ref::<NoRemoteSoku>() else {
                    return Err(err);
                };
                deploy::send(launcher, remote, missing, events).await?;
                Session::start(command()?, opts, events).await
            }
            started => started,
        }
    }

    /// A session on `carrier`, with no ssh yet.
    fn with(carrier: Carrier, terms: Terms, summary: Arc<OnceLock<ServerSummary>>) -> Session {
        Session { child: None, stderr: None, carrier, terms, summary }
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
        let (payload, leftover) = found.map_err(NoHello)?;
        // The newest version both speak; with one version there is nothing to switch on.
        let (server_hello, version) = soku_proto::hello::decode_server_hello(&payload)
            .and_then(|hello| hello.negotiate().map(|version| (hello, version)))
            .and_then(|(hello, version)| new_enough(hello, version, opts.needs_version))
            .map_err(|e| refused_hello(e, opts.remote_soku.as_deref()))?;
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
        let terms =
            Terms { nothing_held, byte_names: version >= BYTE_NAMES_SINCE_VERSION, open_files };
        let choice = match &chosen {
            Chosen::Quic(_, check) => TransportChoice::Quic { tcp_ready: check.is_some() },
            Chosen::Tcp(won, _) => TransportChoice::Tcp { lanes: won.conns.lanes.len() as u8 },
            Chosen::Ssh(_) => TransportChoice::SshChannel,
        };
        writer.write_all(&frame::to_vec(&choice)?).await?;
        writer.flush().await?;

        let summary = Arc::new(OnceLock::new());
        let channel = Halves {
            // What was read past the hello and the preview's answer comes first.
            reader: std::io::Cursor::new(leftover).chain(reader),
            writer: Box::new(writer),
            choice_sent: tokio::time::Instant::now(),
            summary: summary.clone(),
        };
        let (carrier, link) = match chosen {
            Chosen::Quic(won, tcp_check) => {
                // The server stays after a job over QUIC that went well, if we asked it
                // to and it speaks a protocol that can.
                let keeps = opts.keep && version >= KEEP_SINCE_VERSION;
                let server = Fingerprint(fingerprint);
                let keeping = keeps.then_some(Keeping { identity, server, terms });
                let (quic, link) = quic::start(won, tcp_check, channel, keeping, events).await?;
                (Carrier::Quic(quic), link)
            }
            Chosen::Tcp(won, why) => {
                let switched = opts.switched.as_ref();
                let (tcp, link) = tcp::start(*won, why, switched, opts.background, channel, events);
                (Carrier::Tcp(tcp), link)
            }
            Chosen::Ssh(why) => {
                let link = ssh_channel::start(&why, opts.mode, channel, events);
                (Carrier::SshChannel { fallback: why }, link)
            }
        };
        Ok((Session::with(carrier, terms, summary), link))
    }

    /// Connects to the server kept from an earlier copy and opens the job's stream
    /// (`kept.rs`).
    pub async fn attach_kept(
        kept: KeptServer,
        opts: &SessionOptions,
        events: &dyn EventSink,
    ) -> Result<(Session, Link), KeptGone> {
        let summary = Arc::new(OnceLock::new());
        let (carrier, terms, link) = kept::attach(kept, opts, summary.clone(), events).await?;
        Ok((Session::with(Carrier::Kept(carrier), terms, summary), link))
    }

    /// The QUIC path, if the data moves over QUIC.
    fn quic_path(&self) -> Option<&QuicPath> {
        match &self.carrier {
            Carrier::Quic(quic) => Some(&quic.path),
            Carrier::Kept(kept) => Some(&kept.path),
            Carrier::Tcp(_) | Carrier::SshChannel { .. } => None,
        }
    }

    /// The ssh channel beside the data, if the data moves over QUIC or TCP through ssh.
    fn side(&self) -> Option<&SideChannel> {
        match &self.carrier {
            Carrier::Quic(quic) => Some(&quic.side),
            Carrier::Tcp(tcp) => Some(&tcp.side),
            Carrier::SshChannel { .. } | Carrier::Kept(_) => None,
        }
    }

    /// Over QUIC: whether TCP gets through too, as the race found (or the first
    /// session, for a kept server), until taken.
    fn tcp_check(&mut self) -> Option<&mut Option<choose::TcpCheck>> {
        match &mut self.carrier {
            Carrier::Quic(quic) => Some(&mut quic.tcp_check),
            Carrier::Kept(kept) => Some(&mut kept.tcp_check),
            Carrier::Tcp(_) | Carrier::SshChannel { .. } => None,
        }
    }

    /// The QUIC connection, if the data moves over QUIC.
    pub fn connection(&self) -> Option<&quinn::Connection> {
        self.quic_path().map(|path| &path.conn)
    }

    /// Why the data does not move over QUIC, when it does not (the user asked, or UDP
    /// did not get through).
    pub fn fallback(&self) -> Option<&str> {
        match &self.carrier {
            Carrier::Tcp(tcp) => Some(&tcp.fallback),
            Carrier::SshChannel { fallback } => Some(fallback),
            Carrier::Quic(_) | Carrier::Kept(_) => None,
        }
    }

    /// Over QUIC with TCP as a way out: starts watching our side of the connection for a
    /// UDP rate limit (it matters when we send the data).
    pub fn watch_policing(&self) -> Option<tokio::task::JoinHandle<Option<String>>> {
        let (conn, tcp) = match &self.carrier {
            Carrier::Quic(quic) => {
                quic.tcp_check.as_ref()?;
                (&quic.path.conn, quic.side.round_trips().map(TcpRoundTrips::Ssh))
            }
            Carrier::Kept(kept) => {
                kept.tcp_check.as_ref()?;
                (&kept.path.conn, kept.handshakes.clone().map(TcpRoundTrips::Handshakes))
            }
            Carrier::Tcp(_) | Carrier::SshChannel { .. } => return None,
        };
        Some(tokio::spawn(policing::watch_beside_tcp(conn.clone(), tcp)))
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
            self.side()
                .and_then(SideChannel::policed)
                .or_else(|| self.connection().and_then(policing::policed_by_peer))
        };
        let why = ours.or_else(theirs)?;
        let check = self.tcp_check()?.take()?;
        let tcp_reachable = check.await.unwrap_or(false);
        Some(Policed { why, tcp_reachable })
    }

    /// With `diagnose`, over QUIC or TCP: the time from our transport choice to the
    /// server's note that it read it, a round trip over ssh (waits up to `patience`).
    pub async fn ssh_rtt(&self, patience: Duration) -> Option<Duration> {
        self.side()?.round_trip(patience).await
    }

    /// Over QUIC in auto mode: whether the TLS-over-TCP attempt that raced QUIC got
    /// through (`None`: there was none).
    pub async fn tcp_reachable(&mut self) -> Option<bool> {
        let check = self.tcp_check()?.take()?;
        Some(check.await.unwrap_or(false))
    }

    /// Whether ssh ended under a QUIC or TCP copy (the server or the login is gone).
    pub fn ssh_ended(&self) -> bool {
        self.side().is_some_and(SideChannel::ended)
    }

    /// Whether the receiving side said it holds nothing under the names that come:
    /// the copy then runs without held reports (see `crate::client::preview`).
    pub fn nothing_held(&self) -> bool {
        self.terms.nothing_held
    }

    /// Whether the server takes names that are not UTF-8 (`soku_proto::name`).
    pub fn byte_names(&self) -> bool {
        self.terms.byte_names
    }

    /// The most descriptors the server may hold open, if it said.
    pub fn peer_open_files(&self) -> Option<u64> {
        self.terms.open_files
    }

    /// How the next copies reach the kept server this job leaves, if it leaves one, with
    /// the path's smallest RTT so far and whether TCP got through; taken once (to be
    /// recorded after the close).
    pub async fn take_kept(&mut self) -> Option<KeptServer> {
        let min_rtt = self.connection().map(soku_transport::min_rtt);
        let kept = match &mut self.carrier {
            Carrier::Quic(quic) => quic.kept.take(),
            Carrier::Kept(kept) => kept.kept.take(),
            Carrier::Tcp(_) | Carrier::SshChannel { .. } => None,
        };
        let mut kept = kept?;
        kept.min_rtt = min_rtt.unwrap_or(kept.min_rtt);
        if let Some(check) = self.tcp_check().and_then(Option::take) {
            // Decided long since on a copy that went well (the race ends with the
            // handshake); one still undecided counts as not through.
            kept.tcp_reachable = Some(check.is_finished() && check.await.unwrap_or(false));
        }
        Some(kept)
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
        let Session { child, carrier, summary: said, .. } = self;
        let (side, quic, summary_reader, kept) = match carrier {
            Carrier::Quic(quic) => (Some(quic.side), Some(quic.path), None, quic.kept_after),
            Carrier::Tcp(tcp) => (Some(tcp.side), None, None, false),
            Carrier::SshChannel { .. } => (None, None, None, false),
            Carrier::Kept(kept) => (None, Some(kept.path), Some(kept.summary_reader), true),
        };
        // Over QUIC or TCP the data did not travel in the ssh channel.
        let off_channel = side.is_some();
        if let Some(side) = &side {
            // Without a report nothing waits for the notes: reading stops at once.
            side.stop(!summary);
        }
        // The server ends its side once it is done; bounded, so a stuck peer cannot hang us.
        let _ = link.close(Duration::from_secs(5)).await;
        // A kept server does not end ssh: its summary, written before its side of
        // the link ended, is waited for by itself (on ssh's output, or on QUIC when
        // there is no ssh).
        if kept && summary {
            if let Some(reader) = summary_reader {
                let _ = tokio::time::timeout(SUMMARY_PATIENCE, reader).await;
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
        let notes = side.map(SideChannel::end);
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
        if let Some(notes) = notes {
            // ssh has exited: its output ends as soon as the pipe is drained. Bounded
            // anyway, should something else hold the pipe open (the reader then ends
            // with the pipe, detached).
            let _ = tokio::time::timeout(Duration::from_secs(1), notes).await;
        }
        drop(quic);
        Ok(said.get().cloned())
    }

    /// Tells the remote that the user interrupted the copy, while the copy still holds
    /// its link: QUIC is closed with [`crate::client::interrupt::CLOSE_CODE`], which ends the
    /// remote job as it arrives, and ssh is stopped, which ends the remote soku over
    /// the other transports. [`Session::end_interrupted`] follows once the copy let go
    /// of the link.
    pub fn interrupt(&mut self) {
        if let Some(conn) = self.connection() {
            soku_transport::close(conn, crate::client::interrupt::CLOSE_CODE, b"interrupted");
        }
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
        }
    }

    /// Ends a session that [`Session::interrupt`] closed, as [`Session::abort`] does, and
    /// then lets its endpoint drain for up to [`CLOSE_DRAIN`]: the process ends next,
    /// and with it the runtime that sends the CONNECTION_CLOSE. A kept job whose close
    /// never came holds the upload's partial files until a nudge finds its client gone
    /// (`server/serve/silent_client.rs`).
    pub async fn end_interrupted(self, link: Link) {
        if let Some(path) = self.stop(link).await {
            path.drain(CLOSE_DRAIN).await;
        }
    }

    /// Stops everything at once (after an error).
    pub async fn abort(self, link: Link) {
        drop(self.stop(link).await);
    }

    /// Stops the link, the readers and ssh, and closes QUIC; returns the QUIC path.
    async fn stop(self, link: Link) -> Option<QuicPath> {
        drop(link);
        let Session { child, stderr, carrier, .. } = self;
        let path = match carrier {
            Carrier::Quic(quic) => {
                quic.side.stop(true);
                Some(quic.path)
            }
            Carrier::Tcp(tcp) => {
                tcp.side.stop(true);
                None
            }
            Carrier::SshChannel { .. } => None,
            Carrier::Kept(kept) => {
                kept.summary_reader.abort();
                Some(kept.path)
            }
        };
        if let Some(path) = &path {
            soku_transport::close(&path.conn, 1, b"aborted");
        }
        if let Some(mut child) = child {
            let _ = child.kill().await;
        }
        // What the remote printed (a login banner, the remote shell's complaint) was
        // said before whatever made the copy fail: it goes out before soku's verdict,
        // which the caller prints next. ssh is gone, so its pipe ends at once.
        if let Some(stderr) = stderr {
            stderr.drain().await;
        }
        path
    }
}

/// How long a copy waits for the summary of a kept server (`--report`): it was
/// written before the server's side of the link ended.
const SUMMARY_PATIENCE: Duration = Duration::from_secs(2);

/// How long an interrupted copy lets its endpoint drain before the process ends: three
/// probe timeouts on a short path (about 80 ms on loopback, with quinn's 25 ms ack
/// delay), and only the user's Ctrl-C waits for it.
const CLOSE_DRAIN: Duration = Duration::from_millis(300);

/// The remote's hello, undecoded, and what came after it.
async fn read_server_hello<R: AsyncRead + Unpin>(
    stdout: &mut R,
) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
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
            return Ok((payload, decoder.buffered().to_vec()));
        }
    }
}

/// Why the server's hello will not do. A soku that the remote's search found (no
/// `--remote-soku`) and that speaks no protocol version in common with this one may be
/// passed over for one the copy sends (`client/launch/deploy.rs`); the message stands
/// if it is not.
/// The server's hello and the version both speak, if that is one the job can run on
/// (`needs`); otherwise the mismatch, as if this build spoke nothing older.
fn new_enough(
    hello: ServerHello,
    version: u16,
    needs: u16,
) -> Result<(ServerHello, u16), ProtoError> {
    if version >= needs {
        return Ok((hello, version));
    }
    let remote = hello.versions();
    Err(ProtoError::VersionMismatch {
        remote: "the remote host",
        remote_min: *remote.start(),
        remote_max: *remote.end(),
        local_min: needs,
        local_max: *soku_proto::PROTOCOL_VERSIONS.end(),
    })
}

fn refused_hello(err: ProtoError, named: Option<&str>) -> anyhow::Error {
    let message = err.to_string();
    match err {
        ProtoError::VersionMismatch { remote_min, remote_max, .. } if named.is_none() => {
            let lack = Lack::OtherVersion(remote_min..=remote_max);
            anyhow::Error::new(NoRemoteSoku { lack, message: message.clone() })
                .context(Exit::connection(message))
        }
        _ => Exit::connection(message).into(),
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
    remote_soku: Option<&str>,
    err: anyhow::Error,
) -> anyhow::Error {
    let Some(eof) = err.downcast_ref::<StartupEof>() else {
        return Exit::connection(format!("remote soku did not start properly: {err:#}")).into();
    };
    // What the remote's search for soku said it runs (`client/launch/remote_soku.rs`).
    let platform = Platform::said_in(&eof.noise);
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
        Some(127) => match remote_soku {
            Some(named) => format!(
                "the remote host has no {named} (--remote-soku): install soku there, or \
                 name the path where it is"
            ),
            None => format!(
                "the remote host has no `soku` on its PATH or in {}: install soku in one \
                 of them, or pass --remote-soku /path/to/soku",
                crate::client::launch::remote_soku::USER_PLACES
            ),
        },
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
    if code == Some(127) && remote_soku.is_none() {
        // The copy may send a soku there (`client/launch/deploy.rs`); the message
        // stands if it does not.
        let missing = NoRemoteSoku { lack: Lack::Missing(platform), message: message.clone() };
        return anyhow::Error::new(missing).context(Exit::connection(message));
    }
    Exit::connection(message).into()
}
