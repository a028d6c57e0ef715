//! The client's side of a session: start `soku serve` through ssh, exchange hellos, try
//! QUIC pinned to the server's certificate, and fall back to the ssh channel if QUIC does
//! not get through.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use soku_proto::frame;
use soku_proto::hello::{ClientHello, HelloScanner, Scan, ServerHello, TransportChoice};
use soku_proto::MAGIC;
use soku_transport::{Fingerprint, Identity, TransportOptions};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};

use crate::events::{EventSink, TransferEvent};
use crate::exit::Exit;
use crate::link::{spawn_writer, BoxRead, ControlTx};

/// The data path a session ended up with.
pub enum DataPath {
    /// QUIC: control on a bidirectional stream, chunks on their own streams.
    Quic {
        /// The endpoint (kept to drain it at the end).
        endpoint: quinn::Endpoint,
        /// The connection.
        conn: quinn::Connection,
    },
    /// The ssh channel carries everything.
    SshChannel,
}

/// A running session with the remote `soku serve`.
pub struct Session {
    child: Child,
    /// Kept open in QUIC mode: closing it tells the server to exit.
    ssh_stdin: Option<ChildStdin>,
    /// How data moves.
    pub path: DataPath,
    /// Sends control messages.
    pub control: ControlTx,
    writer: tokio::task::JoinHandle<anyhow::Result<()>>,
    /// Reads control messages (and chunks on the ssh channel).
    pub control_in: BoxRead,
}

/// How to set the session up.
pub struct SessionOptions {
    /// Try QUIC at all.
    pub want_quic: bool,
    /// How long to wait for the QUIC handshake.
    pub quic_timeout: Duration,
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
    ) -> anyhow::Result<Session> {
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
        let (version, udp_port, server_addr, fingerprint, warnings) = match server_hello {
            ServerHello::Refused { reason } => {
                return Err(Exit::connection(format!("remote soku refused: {reason}")).into())
            }
            ServerHello::Ready {
                version, udp_port, server_addr, fingerprint, warnings, ..
            } => (version, udp_port, server_addr, fingerprint, warnings),
        };
        let _ = version;
        for warning in warnings {
            events.event(TransferEvent::Warning(format!("remote: {warning}")));
        }

        let quic = if opts.want_quic && udp_port != 0 {
            let server = Fingerprint(fingerprint);
            match try_quic(&identity, server, server_addr, udp_port, opts, events).await {
                Ok(quic) => Some(quic),
                Err(why) => {
                    events.event(TransferEvent::Warning(format!(
                        "{why}; carrying the data over the ssh channel instead (slower)"
                    )));
                    None
                }
            }
        } else {
            None
        };
        let choice =
            if quic.is_some() { TransportChoice::Quic } else { TransportChoice::SshChannel };
        stdin.write_all(&frame::to_vec(&choice)?).await?;
        stdin.flush().await?;

        match quic {
            Some((endpoint, conn, addr)) => {
                let (send, recv) = conn.open_bi().await?;
                let (control, writer) = spawn_writer(send);
                events.event(TransferEvent::Connected { transport: format!("QUIC to {addr}") });
                Ok(Session {
                    child,
                    ssh_stdin: Some(stdin),
                    path: DataPath::Quic { endpoint, conn },
                    control,
                    writer,
                    control_in: Box::new(recv),
                })
            }
            None => {
                let (control, writer) = spawn_writer(stdin);
                events.event(TransferEvent::Connected { transport: "the ssh channel".into() });
                let input = std::io::Cursor::new(leftover).chain(stdout);
                Ok(Session {
                    child,
                    ssh_stdin: None,
                    path: DataPath::SshChannel,
                    control,
                    writer,
                    control_in: Box::new(input),
                })
            }
        }
    }

    /// Ends the session cleanly: waits for the server to end its side of the control
    /// channel, closes QUIC, closes ssh and reaps it.
    pub async fn close(self) -> anyhow::Result<()> {
        let Session { mut child, ssh_stdin, path, control, writer, mut control_in } = self;
        drop(control);
        let _ = writer.await;
        // The server ends its side once it is done; bounded, so a stuck peer cannot hang us.
        let mut sink = [0u8; 4096];
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            while control_in.read(&mut sink).await.is_ok_and(|n| n > 0) {}
        })
        .await;
        if let DataPath::Quic { endpoint, conn } = path {
            conn.close(0u32.into(), b"done");
            let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
        }
        drop(ssh_stdin);
        drop(control_in);
        match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
            Ok(_) => {}
            Err(_) => {
                let _ = child.kill().await;
            }
        }
        Ok(())
    }

    /// Stops everything at once (after an error).
    pub async fn abort(mut self) {
        if let DataPath::Quic { conn, .. } = &self.path {
            conn.close(1u32.into(), b"aborted");
        }
        let _ = self.child.kill().await;
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
        if let Some(hello) = decoder.next_message::<ServerHello>()? {
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

/// Connects over QUIC, trying the server's own address first, then the host name.
async fn try_quic(
    identity: &Identity,
    server: Fingerprint,
    server_addr: Option<IpAddr>,
    port: u16,
    opts: &SessionOptions,
    events: &dyn EventSink,
) -> Result<Quic, String> {
    let mut candidates: Vec<SocketAddr> = Vec::new();
    if let Some(ip) = server_addr.filter(|ip| !ip.is_unspecified()) {
        candidates.push(SocketAddr::new(ip, port));
    }
    let host = opts.host.trim_start_matches('[').trim_end_matches(']').to_string();
    let resolved = tokio::task::spawn_blocking(move || (host.as_str(), port).to_socket_addrs());
    if let Ok(Ok(found)) = resolved.await {
        for addr in found {
            if !candidates.contains(&addr) {
                candidates.push(addr);
            }
        }
    }
    if candidates.is_empty() {
        return Err(format!("cannot find an address for {}", opts.host));
    }
    let deadline = tokio::time::Instant::now() + opts.quic_timeout;
    let mut last_error = String::new();
    for addr in candidates {
        let (endpoint, report) =
            soku_transport::client_endpoint(addr, identity, server, &opts.transport)
                .map_err(|e| e.to_string())?;
        match tokio::time::timeout_at(deadline, soku_transport::connect(&endpoint, addr)).await {
            Ok(Ok(conn)) => {
                if let Some(warning) = report.warning {
                    events.event(TransferEvent::Warning(warning));
                }
                return Ok((endpoint, conn, addr));
            }
            Ok(Err(e)) => last_error = format!("QUIC to {addr} failed: {e}"),
            Err(_) => {
                last_error = format!(
                    "no QUIC handshake with {addr} within {:.0} s (UDP blocked?)",
                    opts.quic_timeout.as_secs_f64()
                );
                break;
            }
        }
    }
    Err(last_error)
}
