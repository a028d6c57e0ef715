//! The server side of a tunnel, run by `soku serve` for a [`Job::Tunnel`] request: for
//! each stream the client opens, connect to the destination and relay.
//!
//! stdout is the ssh channel, so nothing is printed; a connection that cannot be made
//! is reported to the client as a stream reset with [`code::CONNECT_FAILED`].
//!
//! [`Job::Tunnel`]: soku_proto::message::Job::Tunnel

use std::sync::Arc;
use std::time::Duration;

use quinn::{ConnectionError, RecvStream, SendStream, VarInt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::stream::{MAX_CONNECTIONS, STREAM_HEADER};
use super::{code, pipe};

/// How long a new stream may take to send its header.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to the destination may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Relays each stream the client opens on `conn` to `destination` (`HOST:PORT`, resolved
/// here), until the connection closes.
pub async fn serve(
    conn: quinn::Connection,
    destination: &str,
    compress: bool,
) -> anyhow::Result<()> {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let destination: Arc<str> = Arc::from(destination);
    loop {
        let (send, recv) = match conn.accept_bi().await {
            Ok(streams) => streams,
            // The client closed the tunnel, or the ssh channel ended (serve closes then).
            Err(ConnectionError::ApplicationClosed(_) | ConnectionError::LocallyClosed) => {
                return Ok(())
            }
            Err(e) => return Err(anyhow::anyhow!("tunnel connection lost: {e}")),
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refuse(send, recv, code::TOO_MANY);
            continue;
        };
        let destination = destination.clone();
        tokio::spawn(async move {
            let _slot = slot;
            carry(send, recv, &destination, compress).await;
        });
    }
}

/// One stream: check its header, connect, relay. Failures are the client's to report.
async fn carry(send: SendStream, mut recv: RecvStream, destination: &str, compress: bool) {
    let mut header = [0u8; STREAM_HEADER.len()];
    match tokio::time::timeout(HEADER_TIMEOUT, recv.read_exact(&mut header)).await {
        Ok(Ok(())) if &header == STREAM_HEADER => {}
        _ => return refuse(send, recv, code::BAD_HEADER),
    }
    let tcp = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(destination)).await {
        Ok(Ok(tcp)) => tcp,
        _ => return refuse(send, recv, code::CONNECT_FAILED),
    };
    let _ = tcp.set_nodelay(true);
    let _ = pipe::relay(tcp, send, recv, compress).await;
}

fn refuse(mut send: SendStream, mut recv: RecvStream, why: VarInt) {
    let _ = send.reset(why);
    let _ = recv.stop(why);
}
