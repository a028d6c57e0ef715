//! `soku serve`: the remote end of a copy, started by the client through ssh. Its stdin
//! and stdout are the ssh channel, so nothing else may ever be printed on stdout.
//!
//! It opens a QUIC endpoint and a TCP port (TLS over TCP, for networks that block UDP),
//! announces both ports and its fingerprint, reads the client's hello and pins the
//! client's certificate, and then does the one job the client asks for over the data
//! path the client chose.
//! It exits when the job is done or the ssh channel closes; or, when the client's hello
//! asks it to and the job went well over QUIC, it stays for the client's next copies
//! (`server/serve/kept.rs`).
//!
//! An administrator can fence it in a forced command (`--root`, `--read-only`,
//! `--write-only`, `--no-tunnel`): every job, the kept server's too, is held to them
//! (`server/serve/fence.rs`).
//!
//! One job, the first or a kept server's, runs in `server/serve/job.rs`; what both
//! need (`small_frame.rs`, `patience.rs`, `home.rs`, `nudge.rs`) sits in leaf
//! files beside it, so the files below this one never import it.

mod fence;
mod home;
mod job;
mod kept;
mod nudge;
mod patience;
mod silent_client;
mod small_frame;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use soku_proto::frame;
use soku_proto::hello::{
    ClientNote, ReceivePreview, ServerHello, ServerNote, ServerSummary, TransportChoice,
    KEEP_SINCE_VERSION, MAX_CLIENT_NOTE,
};
use soku_proto::{MAGIC, PROTOCOL_VERSIONS};
use soku_transport::{
    BoardSlot, ClientPin, ConnectionHint, Fingerprint, HintSlot, Identity, TransportOptions,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use soku_engine::link;

use crate::carrier::{policing, tcp_path};
use crate::cli::args::ServeArgs;
use crate::client::{path_board, preview};
use crate::report::ServerSampler;
use crate::server::ports::{self, Bound};
use home::expand_home;
use job::serve_job;
use patience::{within, CLOSE_PATIENCE};
use small_frame::read_small_frame;

/// How long the server waits for the client's QUIC handshake or TCP connections after
/// offering them.
const ACCEPT_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs the server on stdin/stdout, the ssh channel.
pub async fn run_on_stdio(args: ServeArgs) -> anyhow::Result<()> {
    run(tokio::io::stdin(), tokio::io::stdout(), args).await
}

/// Runs the server on a channel to the client: it reads the client's hello from
/// `input` and answers on `output` (stdin and stdout under ssh, an in-memory pipe in
/// tests). The end of `input` means the client is gone.
pub async fn run<R, W>(mut input: R, mut output: W, args: ServeArgs) -> anyhow::Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let started = Instant::now();
    // Before anything is offered: a forced command the client cannot use ends here,
    // with the reason on the error output (which ssh carries to the client).
    let (args, fence) = fence::effective(args)?;
    let fence = Arc::new(fence);

    // Answer first, then read the client's hello: ssh forwards the client's first bytes
    // only once this command has started (OpenSSH waits for the reply to its exec
    // request), so waiting for them before answering cost one round trip (0.3 s of the
    // 4.5 s set-up on a 300 ms path, seen in a packet capture). The endpoint accepts
    // the client's certificate once its hello, with the fingerprint, has been read.
    let identity = Identity::generate()?;
    let server_addr = args.bind.or_else(ssh_server_ip);
    let client_pin = ClientPin::unset();
    // Filled from the client's hello: its path memory on a download (see
    // `client/path_memory.rs`), and `--background`.
    let hint = HintSlot::new();
    // Named after the client's address once it connects (see `client/path_board.rs`).
    let board = BoardSlot::new();
    let transport = TransportOptions {
        hint: hint.clone(),
        board: board.clone(),
        ..TransportOptions::default()
    };
    let ip = server_addr.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let Bound { quic: endpoint, tcp, warnings } =
        ports::bind(ip, ssh_client_ip(), args.ports.clone(), &identity, &client_pin, &transport);
    let udp_port = match &endpoint {
        Some(endpoint) => endpoint.local_addr()?.port(),
        None => 0,
    };
    let tcp_port = match &tcp {
        Some(tcp) => tcp.local_addr()?.port(),
        None => 0,
    };
    let ready = ServerHello::Ready {
        version: *PROTOCOL_VERSIONS.end(),
        udp_port,
        server_addr,
        fingerprint: identity.fingerprint().0,
        soku_version: env!("CARGO_PKG_VERSION").to_string(),
        warnings,
        min_version: *PROTOCOL_VERSIONS.start(),
        tcp_port,
        // A client that sends us the data keeps the files it announces within it.
        open_files: Some(soku_engine::limits::open_files() as u64),
    };
    let mut out = MAGIC.to_vec();
    frame::encode(&ready, &mut out)?;
    output.write_all(&out).await?;
    output.flush().await?;

    let stall = Duration::from_secs(args.stall_timeout);
    let mut magic = vec![0u8; MAGIC.len()];
    within(stall, input.read_exact(&mut magic)).await?.context("reading the client's hello")?;
    if magic != MAGIC {
        anyhow::bail!("not a soku client on stdin (soku serve is started by soku itself)");
    }
    let hello = within(stall, read_small_frame(&mut input)).await??;
    let hello = soku_proto::hello::decode_client_hello(&hello)?;
    hint.set(ConnectionHint {
        remembered: hello.path_memory.map(crate::client::path_memory::remembered),
        background: hello.background,
    });
    // The newest version both speak (the client makes the same choice from our hello,
    // and says so itself if there is none); with one version there is nothing to switch on.
    let version = hello.negotiate()?;
    let keep = hello.keep && version >= KEEP_SINCE_VERSION;
    // Found now, while this process surely runs in the login that started it.
    let login = keep.then(kept::Login::of_this_process).flatten();
    // An upload's preview is answered at once, before the client's handshake (see
    // `crate::client::preview`): the client reads the answer beside our hello.
    let asked = hello.receive_preview.clone().filter(|_| version >= preview::SINCE_VERSION);
    let answered = asked.as_ref().and_then(|asked| {
        // A fenced server answers "maybe": whether a name is taken is itself a look at
        // what is there (one that would not resolve beneath a root, too).
        if fence.hides_files() {
            matches!(asked, ReceivePreview::Upload { .. }).then_some(false)
        } else {
            preview::answer(asked, |target| expand_home(target))
        }
    });
    if let Some(nothing) = answered {
        output.write_all(&frame::to_vec(&ServerNote::Holds { nothing })?).await?;
        output.flush().await?;
    }
    let promise = preview::Promise::new(asked, answered);
    let (endpoint, tcp) = if hello.want_direct {
        client_pin.set(Fingerprint(hello.fingerprint));
        (endpoint, tcp)
    } else {
        (None, None)
    };

    // Accept while the client decides: quinn completes a handshake only once the
    // incoming connection is accepted, and the client decides after its handshake.
    let accepting = endpoint.clone().map(|endpoint| {
        tokio::spawn(async move {
            tokio::time::timeout(ACCEPT_TIMEOUT, accept_client(&endpoint, &board)).await
        })
    });
    // The client may connect over TCP meanwhile too (it tries both at once); the
    // listener's socket report goes with it, for the link the connections become.
    let gathering = tcp.map(|tcp| {
        let report = tcp.report().clone();
        let task = tokio::spawn(async move {
            tokio::time::timeout(ACCEPT_TIMEOUT, tcp_path::gather(tcp)).await
        });
        (report, task)
    });
    let choice = within(stall, read_small_frame(&mut input)).await??;
    let choice: TransportChoice = soku_proto::hello::decode_hello(&choice)?;
    // `soku diagnose` times a round trip over ssh with this; over the ssh channel the
    // channel carries the link itself, so nothing else may be written there.
    if hello.diagnose && choice != TransportChoice::SshChannel {
        output.write_all(&frame::to_vec(&ServerNote::ChoiceSeen)?).await?;
        output.flush().await?;
    }
    // Over QUIC the client may still finish its TCP connections (to know that TCP gets
    // through, should UDP turn out rate-limited): they are accepted and dropped.
    if choice == TransportChoice::SshChannel {
        if let Some((_, gathering)) = &gathering {
            gathering.abort();
        }
    }
    match (choice, endpoint, accepting) {
        (TransportChoice::Tcp { lanes }, endpoint, accepting) => {
            if let Some(accepting) = accepting {
                accepting.abort();
            }
            drop(endpoint);
            let Some((report, gathering)) = gathering else {
                anyhow::bail!("client chose TCP, which this server does not offer");
            };
            let conns = gathering.await?.context("the client chose TCP but never connected")?;
            if conns.lanes.len() != usize::from(lanes) {
                anyhow::bail!(
                    "client chose TCP with {lanes} data connections but opened {}",
                    conns.lanes.len()
                );
            }
            let mut link = conns.into_link(&report);
            link.set_stall_limit(Some(stall));
            let sampler = ServerSampler::start(started, None);
            // The ssh channel's end means the client is gone: stop at once.
            let result = tokio::select! {
                result = serve_job(&mut link, None, &promise, &fence, version, hello.open_files) => result,
                () = channel_closed(input) => Err(anyhow::anyhow!("ssh channel closed")),
            };
            if let Ok(sent_data) = result {
                send_summary(&mut output, sampler.finish(sent_data)).await;
            }
            let _ = link.close(CLOSE_PATIENCE).await;
            result.map(drop)
        }
        (TransportChoice::Quic { tcp_ready }, Some(endpoint), Some(accepting)) => {
            // The client chooses QUIC once its handshake is done, so ours is done too
            // or about to be: a client that says so and stays away is stalled.
            let never = || {
                format!("the client chose QUIC but never connected (waited {} s)", stall.as_secs())
            };
            let accepted = within(stall, accepting).await.map_err(|_| anyhow::anyhow!(never()))?;
            let conn = accepted?.map_err(|_| anyhow::anyhow!(never()))??;
            // Woken while the path is silent, so that a blackout's end is noticed within
            // half a second (`soku_transport::wake_when_silent`); kept for the session.
            let _wake = soku_transport::wake_when_silent(&conn);
            // If we send the data and UDP turns out rate-limited, the client moves to TCP.
            let watching = tcp_ready.then(|| tokio::spawn(policing::watch(conn.clone())));
            // The ssh channel's end means the client is gone: stop at once.
            let (watched, gone) = (conn.clone(), Arc::new(AtomicBool::new(false)));
            let channel_gone = gone.clone();
            // Meanwhile the client's pings there are answered (`crate::carrier::shaping`): our
            // output is shared with the notes below from here on.
            let output = Arc::new(tokio::sync::Mutex::new(output));
            let answering = output.clone();
            tokio::spawn(async move {
                answer_pings_until_closed(input, answering).await;
                channel_gone.store(true, Ordering::SeqCst);
                soku_transport::close(&watched, 1, b"ssh channel closed");
            });
            // What failed because of that says so (not QUIC's "closed").
            let why = |err: anyhow::Error| {
                if gone.load(Ordering::SeqCst) {
                    anyhow::anyhow!("ssh channel closed")
                } else {
                    err
                }
            };
            let (send, recv) = within(stall, conn.accept_bi()).await?.map_err(|e| why(e.into()))?;
            let mut link = link::quic::link(conn.clone(), send, recv);
            link.set_stall_limit(Some(stall));
            let sampler = ServerSampler::start(started, Some(&conn));
            let result =
                serve_job(&mut link, Some(&conn), &promise, &fence, version, hello.open_files)
                    .await
                    .map_err(why);
            // A copy cut short may have been cut by the watch (whose task can still be
            // returning its verdict: it ends within one look once QUIC is closed).
            let policed = match watching {
                Some(watching) if result.is_err() => policing::verdict(watching).await,
                Some(watching) => {
                    watching.abort();
                    None
                }
                None => None,
            };
            if let Some(why) = policed {
                // The copy goes on over TCP in the client's next session, once the client
                // has our reason. QUIC's close may be lost to the very rate limit it
                // reports; the ssh channel is not, and the client would otherwise see
                // only ssh end, and take it for an outage.
                let mut note = Vec::new();
                frame::encode(&ServerNote::Policed { why }, &mut note)?;
                let mut output = output.lock().await;
                output.write_all(&note).await?;
                output.flush().await?;
                let _ = tokio::time::timeout(CLOSE_PATIENCE, endpoint.wait_idle()).await;
                return Ok(());
            }
            if let Ok(sent_data) = result {
                send_summary(&mut *output.lock().await, sampler.finish(sent_data)).await;
            }
            // The client closes the connection once it has what it needs.
            let _ = link.close(CLOSE_PATIENCE).await;
            if result.is_err() {
                // A client that took our reason (a `Fatal`) has closed by now, in
                // `link.close`; one that did not (a broken or hostile one) is not given
                // the patience a second time.
                soku_transport::close(&conn, 1, b"aborted");
            }
            let _ = tokio::time::timeout(CLOSE_PATIENCE, conn.closed()).await;
            if keep && result.is_ok() {
                return kept::run(kept::Handover {
                    endpoint,
                    identity,
                    client: Fingerprint(hello.fingerprint),
                    transport,
                    bind_ip: ip,
                    client_ip: ssh_client_ip(),
                    stall,
                    tcp_ready,
                    fence,
                    login,
                    version,
                })
                .await;
            }
            endpoint.close(0u32.into(), b"");
            result.map(drop)
        }
        (TransportChoice::SshChannel, endpoint, accepting) => {
            if let Some(accepting) = accepting {
                accepting.abort();
            }
            drop(endpoint);
            let mut link = link::stream::link(input, output);
            link.set_stall_limit(Some(stall));
            let result =
                serve_job(&mut link, None, &promise, &fence, version, hello.open_files).await;
            let _ = link.close(CLOSE_PATIENCE).await;
            result.map(drop)
        }
        (TransportChoice::Quic { .. }, _, _) => {
            anyhow::bail!("client chose QUIC after asking for none")
        }
    }
}

/// Accepts the client's QUIC connection. A handshake that fails (a certificate other
/// than the one the client announced, a forged Initial packet) is refused and the wait
/// goes on: anyone can send to the UDP port, and a stranger's attempt must not end the
/// session before the client connects. The caller bounds the wait. The first client
/// that passes is the only one.
async fn accept_client(
    endpoint: &quinn::Endpoint,
    board: &BoardSlot,
) -> Result<quinn::Connection, soku_transport::TransportError> {
    loop {
        // The board is named after the first address seen (the slot keeps its first).
        let share = |peer: SocketAddr| {
            if board.get().is_none() {
                path_board::share_on(board, peer.ip());
            }
        };
        match soku_transport::accept_with(endpoint, share).await {
            Ok(conn) => {
                // No other connection is taken from here on: attempts are answered
                // with a reset, not queued (quinn holds up to 65 536 unaccepted ones,
                // each with its first datagram: 60 000 forged Initial packets during a
                // copy took the server to 138 MiB, against 85 for as many others).
                endpoint.set_server_config(None);
                return Ok(conn);
            }
            Err(err @ soku_transport::TransportError::EndpointClosed) => return Err(err),
            Err(_) => continue,
        }
    }
}

/// Returns when the ssh channel (our stdin) ends: the client, or its login, is gone.
async fn channel_closed<R: AsyncRead + Unpin>(mut stdin: R) {
    let mut sink = [0u8; 256];
    while stdin.read(&mut sink).await.is_ok_and(|n| n > 0) {}
}

/// [`channel_closed`], answering each of the client's pings there with a pong on
/// `stdout` at once (the client times round trips over ssh beside QUIC's, see
/// `crate::carrier::shaping`). Pings are the only notes a client sends; anything that does not
/// decode as one is not answered, and once the framing breaks nothing more is (the
/// reading goes on, to see the channel end). The decoder holds at most one small frame.
async fn answer_pings_until_closed<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    mut stdin: R,
    stdout: Arc<tokio::sync::Mutex<W>>,
) {
    let mut decoder = frame::Decoder::new(MAX_CLIENT_NOTE);
    let mut buf = [0u8; 256];
    let mut answering = true;
    while let Ok(n @ 1..) = stdin.read(&mut buf).await {
        if !answering {
            continue;
        }
        decoder.feed(&buf[..n]);
        loop {
            match decoder.next_payload() {
                Ok(Some(payload)) => {
                    let Ok(ClientNote::Ping { seq }) = soku_proto::hello::decode_hello(&payload)
                    else {
                        continue;
                    };
                    let Ok(pong) = frame::to_vec(&ServerNote::Pong { seq }) else { continue };
                    let mut out = stdout.lock().await;
                    if out.write_all(&pong).await.is_err() || out.flush().await.is_err() {
                        answering = false;
                        break;
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    answering = false;
                    break;
                }
            }
        }
    }
}

/// The server's address as ssh saw it (the third field of SSH_CONNECTION): the address
/// the client already reached, so the likeliest to work for UDP too.
fn ssh_server_ip() -> Option<IpAddr> {
    ssh_connection_field(2)
}

/// The client's address as ssh saw it (the first field of SSH_CONNECTION).
fn ssh_client_ip() -> Option<IpAddr> {
    ssh_connection_field(0)
}

/// An address field of SSH_CONNECTION (`client_ip client_port server_ip server_port`).
fn ssh_connection_field(index: usize) -> Option<IpAddr> {
    std::env::var("SSH_CONNECTION").ok()?.split_whitespace().nth(index)?.parse().ok()
}

/// Writes the server's summary on the ssh channel for the client's `--report` (read by
/// `watch_ssh` in `client/session.rs`; a client that does not read it loses nothing). Only
/// over QUIC or TCP: over the ssh channel, stdout carries the data itself.
async fn send_summary<W: AsyncWrite + Unpin>(stdout: &mut W, summary: ServerSummary) {
    let mut note = Vec::new();
    if frame::encode(&ServerNote::Summary(summary), &mut note).is_err() {
        return;
    }
    let write = async {
        stdout.write_all(&note).await?;
        stdout.flush().await
    };
    // A client gone already must not hold the server up.
    let _ = tokio::time::timeout(Duration::from_secs(2), write).await;
}
