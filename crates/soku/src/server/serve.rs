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
//! The first job runs on the carrier the client chose, one file each, as the client's
//! (`client/session/`): `quic.rs` and `tcp.rs`, with the ssh channel beside them
//! (`side_channel.rs`), and `ssh_channel.rs`. One job, the first or a kept server's,
//! runs in `server/serve/job.rs`; what all of them need (`small_frame.rs`,
//! `patience.rs`, `home.rs`, `nudge.rs`) sits in leaf files beside it, so the files
//! below this one never import it.

mod browse;
mod fence;
mod home;
mod job;
mod kept;
mod nudge;
mod patience;
mod quic;
mod side_channel;
mod silent_client;
mod small_frame;
mod ssh_channel;
mod tcp;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use soku_proto::frame;
use soku_proto::hello::{
    ReceivePreview, ServerHello, ServerNote, TransportChoice, KEEP_SINCE_VERSION,
};
use soku_proto::{MAGIC, PROTOCOL_VERSIONS};
use soku_transport::{
    BoardSlot, ClientPin, ConnectionHint, Fingerprint, HintSlot, Identity, TransportOptions,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::carrier::tcp_path;
use crate::cli::args::ServeArgs;
use crate::client::{path_board, preview};
use crate::server::ports::{self, Bound};
use home::expand_home;
use job::Ground;
use patience::within;
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
    // 4.5 s set-up on a 300 ms path, seen in a packet capture). The endpoint takes the
    // client's handshake at once; the connection is used only once the hello's
    // fingerprint names the client's certificate (below).
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
    // Accept at once: quinn answers a client's Initial only once its connection is
    // accepted, and the client's handshake comes about when its hello does, or before
    // it when TCP resends a lost hello. Waiting for the hello held the answer for that
    // resend, and the client took the wait for the path's first RTT sample, which sets
    // its pacing and probe timeouts (`lab/2026-12-01-handshake-before-hello`). The
    // connection is handed over only once the hello's pin names its certificate
    // (`soku_transport::accept_with`).
    let accepting = endpoint.clone().map(|endpoint| {
        let (pin, board) = (client_pin.clone(), board.clone());
        AbortOnDrop::new(tokio::spawn(async move {
            tokio::time::timeout(ACCEPT_TIMEOUT, accept_client(&endpoint, &pin, &board)).await
        }))
    });

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
    let (endpoint, tcp, accepting) = if hello.want_direct {
        client_pin.set(Fingerprint(hello.fingerprint));
        (endpoint, tcp, accepting.and_then(AbortOnDrop::into_inner))
    } else {
        (None, None, None)
    };
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
    let ground =
        Ground { promise, fence, version, client_open_files: hello.open_files, stall, started };
    match (choice, endpoint, accepting) {
        (TransportChoice::Tcp { lanes }, endpoint, accepting) => {
            if let Some(accepting) = accepting {
                accepting.abort();
            }
            drop(endpoint);
            tcp::serve(gathering, lanes, input, output, &ground).await
        }
        (TransportChoice::Quic { tcp_ready }, Some(endpoint), Some(accepting)) => {
            let ended = quic::serve(&endpoint, accepting, tcp_ready, input, output, &ground).await;
            match ended {
                Ok(quic::Ended::WentWell) if keep => {
                    kept::run(kept::Handover {
                        endpoint,
                        identity,
                        client: Fingerprint(hello.fingerprint),
                        transport,
                        bind_ip: ip,
                        client_ip: ssh_client_ip(),
                        stall,
                        tcp_ready,
                        fence: ground.fence,
                        login,
                        version,
                    })
                    .await
                }
                Ok(quic::Ended::Policed) => Ok(()),
                ended => {
                    endpoint.close(0u32.into(), b"");
                    ended.map(drop)
                }
            }
        }
        (TransportChoice::SshChannel, endpoint, accepting) => {
            if let Some(accepting) = accepting {
                accepting.abort();
            }
            drop(endpoint);
            ssh_channel::serve(input, output, &ground).await
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
    pin: &ClientPin,
    board: &BoardSlot,
) -> Result<quinn::Connection, soku_transport::TransportError> {
    loop {
        // The board is named after the first address seen (the slot keeps its first).
        let share = |peer: SocketAddr| {
            if board.get().is_none() {
                path_board::share_on(board, peer.ip());
            }
        };
        match soku_transport::accept_with(endpoint, pin, share).await {
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

/// A task that ends when its handle is dropped: a session that ends early (a bad hello,
/// a client that wants no direct path) must not leave the accept running for its
/// minute with the endpoint.
struct AbortOnDrop<T>(Option<tokio::task::JoinHandle<T>>);

impl<T> AbortOnDrop<T> {
    fn new(task: tokio::task::JoinHandle<T>) -> Self {
        AbortOnDrop(Some(task))
    }

    /// The task, no longer ended by the drop.
    fn into_inner(mut self) -> Option<tokio::task::JoinHandle<T>> {
        self.0.take()
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}
