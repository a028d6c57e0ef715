//! `soku serve`: the remote end of a copy, started by the client through ssh. Its stdin
//! and stdout are the ssh channel, so nothing else may ever be printed on stdout.
//!
//! It opens a QUIC endpoint, announces its port and fingerprint, reads the client's
//! hello and pins the client's certificate, and then does the one job the client asks
//! for.
//! It exits when the job is done or the ssh channel closes.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use soku_proto::frame;
use soku_proto::hello::{ClientHello, ServerHello, TransportChoice};
use soku_proto::message::{Job, Message, Request};
use soku_proto::path::Target;
use soku_proto::receive::Receiver;
use soku_proto::{MAGIC, PROTOCOL_VERSIONS};
use soku_transport::{ClientPin, Fingerprint, Identity, TransportOptions};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::cli::ServeArgs;
use crate::events::{EventSink, Silent};
use crate::link::{read_message, spawn_writer, BoxRead, ChunkOut};
use crate::transfer::ahead::Walked;
use crate::transfer::receive::{self, ChunkIn};
use crate::transfer::{send, CopyOptions};

/// How long the server waits for the client's QUIC handshake after offering it.
const ACCEPT_TIMEOUT: Duration = Duration::from_secs(60);
/// Chunks in flight from a sender on QUIC: enough for 1 Gbit/s x 300 ms at 1 MiB chunks.
pub const QUIC_IN_FLIGHT: usize = 64;
/// Chunks in flight on the ssh channel, where they queue on one stream anyway.
pub const STREAM_IN_FLIGHT: usize = 8;

/// Runs the server on stdin/stdout.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();

    // Answer first, then read the client's hello: ssh forwards the client's first bytes
    // only once this command has started (OpenSSH waits for the reply to its exec
    // request), so waiting for them before answering cost one round trip (0.3 s of the
    // 4.5 s set-up on a 300 ms path, seen in a packet capture). The endpoint accepts
    // the client's certificate once its hello, with the fingerprint, has been read.
    let identity = Identity::generate()?;
    let server_addr = args.bind.or_else(ssh_server_ip);
    let client_pin = ClientPin::unset();
    let mut warnings = Vec::new();
    let bind = SocketAddr::new(server_addr.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)), 0);
    let opened = soku_transport::server_endpoint(
        bind,
        &identity,
        client_pin.clone(),
        &TransportOptions::default(),
    );
    let endpoint = match opened {
        Ok((endpoint, report)) => {
            warnings.extend(report.warning);
            Some(endpoint)
        }
        // No UDP here: port 0 tells the client to use the ssh channel.
        Err(e) => {
            warnings.push(format!("cannot open a QUIC endpoint: {e}"));
            None
        }
    };
    let udp_port = match &endpoint {
        Some(endpoint) => endpoint.local_addr()?.port(),
        None => 0,
    };
    let ready = ServerHello::Ready {
        version: *PROTOCOL_VERSIONS.end(),
        udp_port,
        server_addr,
        fingerprint: identity.fingerprint().0,
        soku_version: env!("CARGO_PKG_VERSION").to_string(),
        warnings,
    };
    let mut out = MAGIC.to_vec();
    frame::encode(&ready, &mut out)?;
    stdout.write_all(&out).await?;
    stdout.flush().await?;

    let mut magic = vec![0u8; MAGIC.len()];
    stdin.read_exact(&mut magic).await.context("reading the client's hello")?;
    if magic != MAGIC {
        anyhow::bail!("not a soku client on stdin (soku serve is started by soku itself)");
    }
    let hello: ClientHello = read_small_frame(&mut stdin).await?;
    // The client refuses our version itself if it does not speak it.
    hello.negotiate()?;
    let endpoint = if hello.want_quic {
        client_pin.set(Fingerprint(hello.fingerprint));
        endpoint
    } else {
        None
    };

    // Accept while the client decides: quinn completes a handshake only once the
    // incoming connection is accepted, and the client decides after its handshake.
    let accepting = endpoint.clone().map(|endpoint| {
        tokio::spawn(async move {
            tokio::time::timeout(ACCEPT_TIMEOUT, soku_transport::accept(&endpoint)).await
        })
    });
    let choice: TransportChoice = read_small_frame(&mut stdin).await?;
    match (choice, endpoint, accepting) {
        (TransportChoice::Quic, Some(endpoint), Some(accepting)) => {
            let conn = accepting.await?.context("the client chose QUIC but never connected")??;
            // The ssh channel's end means the client is gone: stop at once.
            let watched = conn.clone();
            tokio::spawn(async move {
                let mut sink = [0u8; 256];
                while stdin.read(&mut sink).await.is_ok_and(|n| n > 0) {}
                watched.close(1u32.into(), b"ssh channel closed");
            });
            let (send, recv) = conn.accept_bi().await?;
            send.set_priority(crate::link::CONTROL_PRIORITY)?;
            let (control, writer) = spawn_writer(send);
            let mut control_in: BoxRead = Box::new(recv);
            let result = serve_job(
                &mut control_in,
                control,
                ChunkOut::Quic(conn.clone()),
                Some(conn.clone()),
            )
            .await;
            let _ = writer.await;
            // The client closes the connection once it has what it needs.
            let _ = tokio::time::timeout(Duration::from_secs(10), conn.closed()).await;
            endpoint.close(0u32.into(), b"");
            result
        }
        (TransportChoice::SshChannel, endpoint, accepting) => {
            if let Some(accepting) = accepting {
                accepting.abort();
            }
            drop(endpoint);
            let (control, writer) = spawn_writer(stdout);
            let mut control_in: BoxRead = Box::new(stdin);
            let result =
                serve_job(&mut control_in, control.clone(), ChunkOut::Stream(control), None).await;
            let _ = writer.await;
            result
        }
        (TransportChoice::Quic, _, _) => anyhow::bail!("client chose QUIC after asking for none"),
    }
}

async fn read_small_frame<R: AsyncRead + Unpin, T: serde::de::DeserializeOwned>(
    input: &mut R,
) -> anyhow::Result<T> {
    let mut prefix = [0u8; frame::PREFIX_LEN];
    input.read_exact(&mut prefix).await.context("the client closed the channel")?;
    let len = frame::payload_len(prefix, 4096)?;
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload).await.context("the client closed the channel")?;
    Ok(frame::decode_payload(&payload)?)
}

/// The server's address as ssh saw it (the third field of SSH_CONNECTION): the address
/// the client already reached, so the likeliest to work for UDP too.
fn ssh_server_ip() -> Option<IpAddr> {
    std::env::var("SSH_CONNECTION").ok()?.split_whitespace().nth(2)?.parse().ok()
}

/// Reads the client's request and runs it.
async fn serve_job(
    control_in: &mut BoxRead,
    control: crate::link::ControlTx,
    chunks_out: ChunkOut,
    quic: Option<quinn::Connection>,
) -> anyhow::Result<()> {
    let Some(Message::Request(request)) = read_message(control_in).await? else {
        anyhow::bail!("expected a request from the client");
    };
    let Request { job, recursive, preserve, compress, chunk_size, rate_limit_bps } = request;
    let opts = CopyOptions { recursive, preserve, compress, chunk_size, rate_limit_bps };
    let events: Arc<dyn EventSink> = Arc::new(Silent);
    let outcome = async {
        match job {
            Job::Receive { target, sources } => {
                let target = expand_home(&target);
                let is_dir = std::fs::metadata(&target).is_ok_and(|md| md.is_dir());
                let target = Target::resolve(&target, is_dir, sources)?;
                let root = target.root().to_path_buf();
                let receiver = Receiver::new(target, None, recursive, chunk_size)?;
                let chunks_in = match &quic {
                    Some(conn) => ChunkIn::Quic(conn.clone()),
                    None => ChunkIn::Stream,
                };
                receive::run(receiver, root, opts, control.clone(), control_in, chunks_in, events)
                    .await?;
            }
            Job::Tunnel { destination, compress } => {
                let Some(conn) = &quic else {
                    anyhow::bail!("a tunnel needs QUIC, and UDP did not get through");
                };
                crate::tunnel::serve(conn.clone(), &destination, compress).await?;
            }
            Job::Send { sources } => {
                let sources = expand_sources(&sources);
                let in_flight = if quic.is_some() { QUIC_IN_FLIGHT } else { STREAM_IN_FLIGHT };
                // The sender reads reports on its own task, so it takes the input.
                let input = std::mem::replace(control_in, Box::new(tokio::io::empty()));
                let walked = Walked::walk(sources, recursive).await?;
                send::run(walked, opts, control.clone(), input, chunks_out, in_flight, events)
                    .await?;
            }
        }
        anyhow::Ok(())
    }
    .await;
    if let Err(err) = &outcome {
        let _ = control.send(Message::Fatal { message: format!("{err:#}") }).await;
    }
    outcome
}

/// Remote paths are relative to the home directory, where ssh starts us; `~/x` is `x`.
fn expand_home(path: &str) -> PathBuf {
    match path {
        "" | "~" => PathBuf::from("."),
        _ => match path.strip_prefix("~/") {
            Some("") => PathBuf::from("."),
            Some(rest) => PathBuf::from(rest),
            None => PathBuf::from(path),
        },
    }
}

/// Expands `~` and globs in source paths, as the remote shell does for scp.
fn expand_sources(sources: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for source in sources {
        let path = expand_home(source).display().to_string();
        let has_glob = path.contains(['*', '?', '[']);
        let matches: Vec<String> = if has_glob && !Path::new(&path).exists() {
            glob::glob(&path)
                .map(|paths| {
                    paths.filter_map(Result::ok).map(|p| p.display().to_string()).collect()
                })
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        if matches.is_empty() {
            out.push(path);
        } else {
            out.extend(matches);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_relative_paths() {
        assert_eq!(expand_home(""), Path::new("."));
        assert_eq!(expand_home("~/a/b"), Path::new("a/b"));
        assert_eq!(expand_home("/abs"), Path::new("/abs"));
    }

    #[test]
    fn globs_expand_and_literals_stay() {
        let tmp = tempfile::tempdir().expect("tempdir");
        for name in ["a.txt", "b.txt", "c.log"] {
            std::fs::write(tmp.path().join(name), b"x").expect("write");
        }
        let pattern = format!("{}/*.txt", tmp.path().display());
        let found = expand_sources(&[pattern]);
        assert_eq!(found.len(), 2);
        let missing = format!("{}/none*", tmp.path().display());
        assert_eq!(expand_sources(std::slice::from_ref(&missing)), [missing]);
    }
}
