//! The client's side of a session: start `soku serve` through ssh, exchange hellos, try
//! QUIC pinned to the server's certificate, and fall back to the ssh channel if QUIC does
//! not get through.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use soku_engine::events::{EventSink, TransferEvent};
use soku_engine::link::{self, Link};
use soku_proto::frame;
use soku_proto::hello::{ClientHello, HelloScanner, Scan, ServerHello, TransportChoice};
use soku_proto::MAGIC;
use soku_transport::{Fingerprint, Identity, SocketReport, TransportOptions};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::task::JoinSet;

use crate::exit::Exit;

/// A QUIC connection and the endpoint that made it.
pub struct QuicPath {
    /// The endpoint, kept until the session ends: dropping it would stop the connection.
    _endpoint: quinn::Endpoint,
    /// The connection.
    pub conn: quinn::Connection,
}

/// A running session with the remote `soku serve`. The data moves over the [`Link`]
/// that [`Session::start`] returns beside it; the session keeps what the link runs on.
pub struct Session {
    child: Child,
    /// In QUIC mode: closes the connection when ssh's output ends (see `watch_ssh`).
    ssh_watch: Option<tokio::task::JoinHandle<()>>,
    /// Kept open in QUIC mode: closing it tells the server to exit.
    ssh_stdin: Option<ChildStdin>,
    /// The QUIC connection, unless the data moves over the ssh channel.
    pub quic: Option<QuicPath>,
    /// Why QUIC is not used, when it is not (the user asked, or it did not get through).
    pub fallback: Option<String>,
}

/// How to set the session up.
pub struct SessionOptions {
    /// Try QUIC at all.
    pub want_quic: bool,
    /// How long to wait for the QUIC handshake.
    pub quic_timeout: Duration,
    /// Whether the data may move over the ssh channel when QUIC does not get through
    /// (a copy may; a tunnel may not, and says why itself from [`Session::fallback`]).
    pub ssh_fallback: bool,
    /// The host name the user typed (used when the server does not know its address).
    pub host: String,
    /// Cipher and rate cap.
    pub transport: TransportOptions,
}

impl Session {
    /// Starts the remote server with `cmd` and sets up the data path.
    pub async fn start(
        mut cmd: tokio::process::Command,
        opts: &SessionOptions,
        events: &dyn EventSink,
    ) -> anyhow::Result<(Session, Link)> {
        let program = format!("{:?}", cmd.as_std().get_program());
        let mut child =
            cmd.spawn().map_err(|e| Exit::connection(format!("cannot run {program}: {e}")))?;
        let (Some(mut stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
            anyhow::bail!("internal: child pipes missing");
        };
        let identity = Identity::generate()?;
        let mut hello = MAGIC.to_vec();
        frame::encode(&ClientHello::new(identity.fingerprint().0, opts.want_quic), &mut hello)?;
        // If the remote never starts soku, this write may fail; the read below says why.
        let _ = async {
            stdin.write_all(&hello).await?;
            stdin.flush().await
        }
        .await;

        let (server_hello, leftover) = match read_server_hello(&mut stdout).await {
            Ok(found) => found,
            Err(err) => return Err(explain_startup_failure(&mut child, err).await),
        };
        // The newest version both speak; with one version there is nothing to switch on.
        server_hello.negotiate().map_err(|e| Exit::connection(e.to_string()))?;
        let ServerHello::Ready { udp_port, server_addr, fingerprint, warnings, .. } = server_hello;
        for warning in warnings {
            events.event(TransferEvent::Warning(format!("remote: {warning}")));
        }

        let mut fallback = None;
        let quic = if !opts.want_quic {
            fallback = Some("the data was asked to move over the ssh channel".to_string());
            None
        } else if udp_port == 0 {
            fallback = Some("the remote soku has no QUIC endpoint".to_string());
            None
        } else {
            let server = Fingerprint(fingerprint);
            match try_quic(&identity, server, server_addr, udp_port, opts, events).await {
                Ok(quic) => Some(quic),
                Err(why) => {
                    if opts.ssh_fallback {
                        events.event(TransferEvent::Warning(format!(
                            "{why}; carrying the data over the ssh channel instead (slower)"
                        )));
                    }
                    fallback = Some(why);
                    None
                }
            }
        };
        let choice =
            if quic.is_some() { TransportChoice::Quic } else { TransportChoice::SshChannel };
        stdin.write_all(&frame::to_vec(&choice)?).await?;
        stdin.flush().await?;

        match quic {
            Some((endpoint, conn, addr)) => {
                let (send, recv) = conn.open_bi().await?;
                let link = link::quic::link(conn.clone(), send, recv);
                events.event(TransferEvent::Connected { transport: format!("QUIC to {addr}") });
                let ssh_watch = Some(tokio::spawn(watch_ssh(stdout, conn.clone())));
                let quic = Some(QuicPath { _endpoint: endpoint, conn });
                let session =
                    Session { child, ssh_watch, ssh_stdin: Some(stdin), quic, fallback: None };
                Ok((session, link))
            }
            None => {
                let input = std::io::Cursor::new(leftover).chain(stdout);
                let link = link::stream::link(input, stdin);
                events.event(TransferEvent::Connected { transport: "the ssh channel".into() });
                let session =
                    Session { child, ssh_watch: None, ssh_stdin: None, quic: None, fallback };
                Ok((session, link))
            }
        }
    }

    /// Whether ssh ended under a QUIC copy (the server or the login is gone).
    pub fn ssh_ended(&self) -> bool {
        self.ssh_watch.as_ref().is_some_and(|watch| watch.is_finished())
    }

    /// The QUIC connection, if the data moves over QUIC.
    pub fn connection(&self) -> Option<&quinn::Connection> {
        self.quic.as_ref().map(|quic| &quic.conn)
    }

    /// Ends the session cleanly: ends our side of the link and waits for the server to
    /// end its own, closes QUIC, closes ssh and reaps it.
    pub async fn close(self, link: Link) -> anyhow::Result<()> {
        let Session { mut child, ssh_stdin, quic, ssh_watch, .. } = self;
        if let Some(watch) = ssh_watch {
            watch.abort();
        }
        // The server ends its side once it is done; bounded, so a stuck peer cannot hang us.
        let _ = link.close(Duration::from_secs(5)).await;
        // Only the CONNECTION_CLOSE has to leave, and quinn's driver sends it while ssh
        // winds down below. Nothing waits for the endpoint to drain (3 PTO, at least
        // 75 ms with quinn's 25 ms ack delay): the server also ends when the ssh channel
        // closes, so a lost CONNECTION_CLOSE costs nothing. A fixed 20 ms grace here was
        // 20 ms of every copy's wall time (1.3 % of a 1 GiB loopback copy).
        if let Some(quic) = &quic {
            quic.conn.close(0u32.into(), b"done");
        }
        drop(ssh_stdin);
        match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
            Ok(_) => {}
            Err(_) => {
                let _ = child.kill().await;
            }
        }
        drop(quic);
        Ok(())
    }

    /// Stops everything at once (after an error).
    pub async fn abort(mut self, link: Link) {
        drop(link);
        if let Some(watch) = self.ssh_watch.take() {
            watch.abort();
        }
        if let Some(quic) = &self.quic {
            quic.conn.close(1u32.into(), b"aborted");
        }
        let _ = self.child.kill().await;
    }
}

/// Code of the QUIC close when the ssh session ended under a running copy.
pub const SSH_ENDED: u32 = 2;

/// Waits for the end of ssh's output and closes the QUIC connection then. The server
/// exits when its ssh channel ends (`serve.rs`), and ssh ends when the server does: so
/// either side stopping (killed, or its login dropped) is noticed at once, not after
/// QUIC's idle timeout of a minute.
async fn watch_ssh<R: AsyncRead + Unpin>(mut stdout: R, conn: quinn::Connection) {
    let mut sink = [0u8; 256];
    while stdout.read(&mut sink).await.is_ok_and(|n| n > 0) {}
    conn.close(SSH_ENDED.into(), b"the ssh session ended");
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

/// The remote's output ended before a hello.
#[derive(Debug, thiserror::Error)]
#[error("the remote closed the connection before soku started")]
struct StartupEof {
    noise: String,
}

async fn explain_startup_failure(child: &mut Child, err: anyhow::Error) -> anyhow::Error {
    if err.downcast_ref::<StartupEof>().is_none() {
        return Exit::connection(format!("remote soku did not start properly: {err:#}")).into();
    }
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    let code = status.ok().and_then(|s| s.ok()).and_then(|s| s.code());
    let message = match code {
        Some(127) => "the remote host has no `soku` on its PATH: install soku there, \
                      or pass --remote-soku /path/to/soku"
            .to_string(),
        Some(126) => "the remote soku could not be executed (permission denied?): check \
                      --remote-soku or the file's mode on the remote host"
            .to_string(),
        Some(255) => "ssh could not connect (see its message above)".to_string(),
        Some(code) => format!("the remote command exited with status {code} before soku started"),
        None => "the remote side ended before soku started".to_string(),
    };
    Exit::connection(message).into()
}

type Quic = (quinn::Endpoint, quinn::Connection, SocketAddr);

/// How long the server's own address (from `SSH_CONNECTION`: the address our ssh reached)
/// has to itself before the host name's other addresses join the race. It is right
/// unless the server sits behind NAT, where the name's public address is the one that works.
const STAGGER: Duration = Duration::from_millis(300);

/// Connects over QUIC: the server's own address first, then, after [`STAGGER`] or its
/// failure, every other address of the host name as well; the first handshake wins.
/// The name is resolved meanwhile, so the common case waits for no DNS lookup.
async fn try_quic(
    identity: &Identity,
    server: Fingerprint,
    server_addr: Option<IpAddr>,
    port: u16,
    opts: &SessionOptions,
    events: &dyn EventSink,
) -> Result<Quic, String> {
    let deadline = tokio::time::Instant::now() + opts.quic_timeout;
    let host = opts.host.trim_start_matches('[').trim_end_matches(']').to_string();
    let resolving = tokio::task::spawn_blocking(move || {
        (host.as_str(), port).to_socket_addrs().map(|found| found.collect::<Vec<_>>())
    });
    let mut race = Race { attempts: JoinSet::new(), tried: Vec::new(), last_error: String::new() };
    if let Some(ip) = server_addr.filter(|ip| !ip.is_unspecified()) {
        race.start(SocketAddr::new(ip, port), identity, server, opts)?;
        // The primary failing fast or not answering yet both lead to the wider race.
        let first = tokio::time::timeout(STAGGER.min(opts.quic_timeout), race.next()).await;
        if let Ok(Some(won)) = first {
            return Ok(race.won(won, events));
        }
    }
    if let Ok(Ok(Ok(found))) = tokio::time::timeout_at(deadline, resolving).await {
        for addr in found {
            race.start(addr, identity, server, opts)?;
        }
    }
    if race.tried.is_empty() {
        return Err(format!("cannot find an address for {}", opts.host));
    }
    match tokio::time::timeout_at(deadline, race.next()).await {
        Ok(Some(won)) => Ok(race.won(won, events)),
        Ok(None) => Err(race.last_error),
        Err(_) => {
            let tried: Vec<String> = race.tried.iter().map(ToString::to_string).collect();
            Err(format!(
                "no QUIC handshake with {} within {:.0} s (UDP blocked?)",
                tried.join(" or "),
                opts.quic_timeout.as_secs_f64()
            ))
        }
    }
}

/// Connection attempts running at once; dropping it abandons the losers.
struct Race {
    attempts:
        JoinSet<(quinn::Endpoint, SocketReport, SocketAddr, Result<quinn::Connection, String>)>,
    tried: Vec<SocketAddr>,
    last_error: String,
}

/// A finished handshake and the endpoint that made it.
type Won = (quinn::Endpoint, SocketReport, SocketAddr, quinn::Connection);

impl Race {
    /// Starts an attempt on `addr` unless one is already under way.
    fn start(
        &mut self,
        addr: SocketAddr,
        identity: &Identity,
        server: Fingerprint,
        opts: &SessionOptions,
    ) -> Result<(), String> {
        if self.tried.contains(&addr) {
            return Ok(());
        }
        self.tried.push(addr);
        let (endpoint, report) =
            soku_transport::client_endpoint(addr, identity, server, &opts.transport)
                .map_err(|e| e.to_string())?;
        self.attempts.spawn(async move {
            let result = soku_transport::connect(&endpoint, addr)
                .await
                .map_err(|e| format!("QUIC to {addr} failed: {e}"));
            (endpoint, report, addr, result)
        });
        Ok(())
    }

    /// The next successful handshake; `None` once every attempt has failed.
    async fn next(&mut self) -> Option<Won> {
        while let Some(done) = self.attempts.join_next().await {
            match done {
                Ok((endpoint, report, addr, Ok(conn))) => {
                    return Some((endpoint, report, addr, conn))
                }
                Ok((_, _, _, Err(e))) => self.last_error = e,
                Err(e) => self.last_error = format!("QUIC attempt ended: {e}"),
            }
        }
        None
    }

    fn won(self, (endpoint, report, addr, conn): Won, events: &dyn EventSink) -> Quic {
        if let Some(warning) = report.warning {
            events.event(TransferEvent::Warning(warning));
        }
        (endpoint, conn, addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use soku_engine::events::Silent;

    fn options(host: &str, quic_timeout: Duration) -> SessionOptions {
        SessionOptions {
            want_quic: true,
            quic_timeout,
            ssh_fallback: true,
            host: host.into(),
            transport: TransportOptions::default(),
        }
    }

    /// The server's reported address does not answer (as behind NAT: it reports its
    /// private address); the host name's address does, and wins the race.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn host_name_wins_when_the_reported_address_is_silent() {
        let (server_id, client_id) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let (server, _) = soku_transport::server_endpoint(
            "127.0.0.1:0".parse().unwrap(),
            &server_id,
            client_id.fingerprint(),
            &TransportOptions::default(),
        )
        .unwrap();
        let port = server.local_addr().unwrap().port();
        let accepting = tokio::spawn(async move { soku_transport::accept(&server).await });
        // 127.0.0.2 is local on Linux but nothing listens there on this port.
        let silent: IpAddr = "127.0.0.2".parse().unwrap();
        let opts = options("127.0.0.1", Duration::from_secs(4));
        let (_, conn, addr) =
            try_quic(&client_id, server_id.fingerprint(), Some(silent), port, &opts, &Silent)
                .await
                .expect("connects through the host name");
        assert_eq!(addr, SocketAddr::from(([127, 0, 0, 1], port)));
        assert!(accepting.await.unwrap().is_ok());
        conn.close(0u32.into(), b"");
    }

    /// Nothing answers anywhere: the error names what was tried, within the timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn silence_everywhere_is_a_timeout_naming_the_addresses() {
        let (server_id, client_id) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let silent_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = silent_socket.local_addr().unwrap().port();
        let opts = options("127.0.0.1", Duration::from_millis(800));
        let started = std::time::Instant::now();
        let err = try_quic(&client_id, server_id.fingerprint(), None, port, &opts, &Silent)
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(err.contains("no QUIC handshake with 127.0.0.1:"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    }
}
