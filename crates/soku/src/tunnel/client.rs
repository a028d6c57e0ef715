//! `soku tunnel -L [ADDR:]PORT [--to HOST:PORT] [user@]host`: the client side.
//!
//! Order of work: check the addresses, bind the local port (so a port in use fails
//! before ssh starts), start the session (QUIC only: a tunnel over the ssh channel would
//! gain nothing), ask for the tunnel job, then accept until Ctrl-C, SIGTERM, or the end
//! of the session.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use soku_engine::events::{EventSink, TransferEvent};
use soku_engine::link::Inbound;
use soku_proto::message::{CopyFlags, Job, Message, Request};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::code;
use super::listen::{check_destination, parse_listen, parse_remote};
use super::pipe::{self, RelayError};
use super::stream::{MAX_CONNECTIONS, STREAM_HEADER};
use crate::cli::args::TunnelArgs;
use crate::cli::transport_mode::TransportMode;
use crate::client::launch::{Launcher, ServeCommand};
use crate::client::session::{Session, SessionOptions};
use crate::exit::Exit;

/// How long to wait for the QUIC handshake: longer than a copy's default, as a tunnel
/// has no fallback to try instead.
const QUIC_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the tunnel until Ctrl-C, SIGTERM, or the end of the session.
pub async fn run(mut args: TunnelArgs) -> anyhow::Result<()> {
    let listen = parse_listen(&args.listen).map_err(Exit::usage)?;
    check_destination(&args.to).map_err(Exit::usage)?;
    let remote = parse_remote(&args.remote).map_err(Exit::usage)?;
    crate::cli::config::apply_ssh(&mut args.ssh, &remote.host)?;
    let listener = TcpListener::bind((listen.host.as_str(), listen.port)).await.map_err(|e| {
        Exit::failure(format!("cannot listen on {}:{}: {e}", listen.host, listen.port))
    })?;
    let local = listener.local_addr()?;

    let launcher = Launcher::from_args(&args.ssh, args.verbose, false)?;
    let serve = ServeCommand::from_args(&args.ssh);
    let session_opts = SessionOptions {
        remote_soku: args.ssh.remote_soku.clone(),
        ..SessionOptions::for_command(TransportMode::Quic, remote.host.clone(), QUIC_TIMEOUT)
    };
    let events = Notices::new(args.verbose > 0);
    let deploy = !args.ssh.no_deploy;
    let (session, mut link) =
        Session::launch(&launcher, &remote, &serve, &session_opts, &events, deploy).await?;
    let Some(conn) = session.connection().cloned() else {
        let why = session
            .fallback()
            .map(str::to_string)
            .unwrap_or_else(|| "QUIC is not available".into());
        session.abort(link).await;
        return Err(Exit::connection(format!(
            "a tunnel needs UDP between the two hosts, and {why}"
        ))
        .into());
    };
    link.tx
        .send_control(Message::Request(Request {
            job: Job::Tunnel { destination: args.to.clone(), compress: args.compress },
            flags: CopyFlags { compress: args.compress, ..CopyFlags::NONE },
        }))
        .await?;
    crate::ui::say(&format!(
        "soku tunnel: listening on {local} -> {} via {}{}",
        args.to,
        remote.host,
        if args.compress { " (compressed)" } else { "" }
    ));

    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let ctx = Arc::new(Ctx {
        destination: args.to.clone(),
        compress: args.compress,
        verbose: args.verbose > 0,
    });
    let stop = shutdown_signal();
    tokio::pin!(stop);
    let outcome: anyhow::Result<()> = loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (tcp, peer) = match accepted {
                    Ok(pair) => pair,
                    // Out of descriptors and the like: pass, as servers do.
                    Err(e) => {
                        crate::ui::say(&format!("soku tunnel: accept failed: {e}"));
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    crate::ui::say(&format!("soku tunnel: {peer}: refused, {MAX_CONNECTIONS} connections already open"));
                    continue;
                };
                let (conn, ctx) = (conn.clone(), ctx.clone());
                tokio::spawn(async move {
                    let _slot = slot;
                    carry(conn, tcp, peer, &ctx).await;
                });
            }
            signal = &mut stop => break signal,
            reason = conn.closed() => {
                break Err(Exit::connection(format!("the tunnel's connection closed: {reason}")).into());
            }
            // The server answers only if the job fails: a Fatal message, or the end of control.
            inbound = link.recv() => {
                let why = match inbound {
                    Some(Ok(Inbound::Control(Message::Fatal { message }))) => {
                        format!("the remote end failed: {message}")
                    }
                    Some(Err(e)) => format!("the tunnel's control stream failed: {e}"),
                    _ => "the remote end closed the tunnel".to_string(),
                };
                break Err(Exit::connection(why).into());
            }
        }
    };
    // Closing the connection first ends the server's job at once; then ssh is reaped.
    soku_transport::close(&conn, 0, b"done");
    session.close(link).await?;
    outcome
}

/// What every connection task needs to know.
struct Ctx {
    destination: String,
    compress: bool,
    verbose: bool,
}

/// One accepted connection: open a stream, announce it, relay.
async fn carry(conn: quinn::Connection, tcp: TcpStream, peer: SocketAddr, ctx: &Ctx) {
    let _ = tcp.set_nodelay(true);
    if ctx.verbose {
        crate::ui::say(&format!("soku tunnel: {peer}: connected"));
    }
    let opened = async {
        let (mut send, recv) = conn.open_bi().await?;
        send.write_all(STREAM_HEADER).await?;
        anyhow::Ok((send, recv))
    };
    let (send, recv) = match opened.await {
        Ok(streams) => streams,
        Err(e) => {
            crate::ui::say(&format!("soku tunnel: {peer}: cannot open a stream: {e}"));
            return;
        }
    };
    match pipe::relay(tcp, send, recv, ctx.compress).await {
        Ok(totals) if ctx.verbose => crate::ui::say(&format!(
            "soku tunnel: {peer}: closed, {} bytes sent, {} received",
            totals.sent, totals.received
        )),
        Ok(_) => {}
        Err(RelayError::PeerAbort(why)) if why == code::CONNECT_FAILED => {
            crate::ui::say(&format!("soku tunnel: {peer}: the remote end could not connect to {}", ctx.destination))
        }
        Err(RelayError::PeerAbort(why)) if why == code::TOO_MANY => crate::ui::say(&format!(
            "soku tunnel: {peer}: refused, the remote end already relays {MAX_CONNECTIONS} connections"
        )),
        Err(e) if ctx.verbose => crate::ui::say(&format!("soku tunnel: {peer}: {e}")),
        Err(_) => {}
    }
}

/// Warnings go to stderr (a tunnel does not fall back to the ssh channel: it says why
/// QUIC failed itself, from [`Session::fallback`]).
struct Notices {
    verbose: bool,
}

impl Notices {
    fn new(verbose: bool) -> Self {
        Self { verbose }
    }
}

impl EventSink for Notices {
    fn event(&self, event: TransferEvent) {
        match event {
            TransferEvent::Warning(message) => {
                crate::ui::say(&format!("soku tunnel: warning: {message}"))
            }
            TransferEvent::Notice(message) => crate::ui::say(&format!("soku tunnel: {message}")),
            TransferEvent::Connected { transport, .. } if self.verbose => {
                crate::ui::say(&format!("soku tunnel: connected over {transport}"))
            }
            _ => {}
        }
    }
}

/// Resolves at Ctrl-C or SIGTERM: the normal way to end a tunnel.
async fn shutdown_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            result = tokio::signal::ctrl_c() => Ok(result?),
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        Ok(tokio::signal::ctrl_c().await?)
    }
}
