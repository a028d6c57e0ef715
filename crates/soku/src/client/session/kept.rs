//! A session with a server kept from an earlier copy (`server/serve/kept.rs`): one QUIC
//! handshake with the certificates both sides pinned then, no ssh. The job, its
//! messages and its verification are the same as in any QUIC session; what the ssh
//! channel carried comes differently: a download's "nothing held" in a first frame
//! (`KeptOpening`), the server's summary on a stream of its own.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use soku_engine::events::{EventSink, TransferEvent};
use soku_engine::link::{self, Link};
use soku_proto::frame;
use soku_proto::hello::{KeptOpening, ReceivePreview, ServerNote, ServerSummary};
use soku_transport::TransportOptions;

use super::choose::TcpCheck;
use super::options::SessionOptions;
use super::quic::QuicPath;
use super::terms::Terms;
use crate::client::kept::KeptServer;
use crate::client::path_board;

/// The kept server did not answer: the copy opens an ssh session instead.
#[derive(Debug, thiserror::Error)]
#[error(
    "the remote soku kept from the last copy did not answer at {addr} within {waited:?}: {why}"
)]
pub struct KeptGone {
    addr: std::net::SocketAddr,
    waited: Duration,
    why: String,
}

/// Largest summary read from a kept server (the ssh channel's notes have the same bound).
const MAX_SUMMARY: usize = 64 * 1024;

/// Connects to `kept` and opens the job's stream; the server's summary, when it comes,
/// goes to `summary`.
pub async fn attach(
    kept: KeptServer,
    opts: &SessionOptions,
    summary: Arc<OnceLock<ServerSummary>>,
    events: &dyn EventSink,
) -> Result<(KeptCarrier, Terms, Link), KeptGone> {
    let (addr, waited) = (kept.addr, kept.patience());
    let gone = |why: String| KeptGone { addr, waited, why };
    // The controller shares its min RTT with the other copies to this address, as
    // in any session (`choose.rs`).
    let transport =
        TransportOptions { board: path_board::slot_for(addr.ip()), ..opts.transport.clone() };
    let (endpoint, _) =
        soku_transport::client_endpoint(addr, &kept.identity, kept.server, &transport)
            .map_err(|e| gone(e.to_string()))?;
    // What our hello would have said over ssh and still applies (`KeptOpening`).
    let preview = opts.receive_preview.clone().filter(|p| *p == ReceivePreview::NothingHeld);
    let nothing_held = preview.is_some();
    // This process's limit, which may not be that of the copy that left the server.
    let open_files = Some(soku_engine::limits::open_files() as u64);
    let opening = frame::to_vec(&KeptOpening { receive_preview: preview, open_files })
        .map_err(|e| gone(e.to_string()))?;
    // Opening the stream costs no round trip. The server judges our certificate
    // after our side of the handshake: a refusal would end the copy's first
    // exchange, and the copy's next attempt logs in through ssh.
    let connecting = async {
        let conn = soku_transport::connect(&endpoint, addr).await.map_err(|e| e.to_string())?;
        let (mut send, recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
        // Sent at once: the stream, and so the job, reaches the server with it.
        send.write_all(&opening).await.map_err(|e| e.to_string())?;
        Ok::<_, String>((conn, (send, recv)))
    };
    let (conn, (send, recv)) = match tokio::time::timeout(waited, connecting).await {
        Ok(Ok(made)) => made,
        Ok(Err(why)) => return Err(gone(why)),
        Err(_) => return Err(gone("no handshake".into())),
    };
    let link = link::quic::link(conn.clone(), send, recv);
    events.event(TransferEvent::Connected {
        transport: format!("QUIC to {addr} (the remote soku kept from the last copy)"),
        reason: None,
    });
    let summary_reader = tokio::spawn(read_summary(conn.clone(), summary));
    let terms = Terms { nothing_held, byte_names: kept.byte_names, open_files: kept.open_files };
    let carrier = KeptCarrier {
        path: QuicPath::new(endpoint, conn),
        // No ssh channel to ping on: TCP handshakes stand in, if UDP goes silent,
        // for a copy that watches its path (it could move to TCP).
        handshakes: kept
            .tcp_reachable
            .and(opts.login_at.clone())
            .map(crate::carrier::tcp_probe::Handshakes::start),
        // As the first session found it, for the watch for a UDP rate limit.
        tcp_check: kept.tcp_reachable.map(|through| tokio::spawn(async move { through })),
        summary_reader,
        kept: Some(kept),
    };
    Ok((carrier, terms, link))
}

/// A session with a kept server: QUIC alone.
pub struct KeptCarrier {
    pub path: QuicPath,
    /// TCP handshakes with the login's host, made while QUIC is silent (see
    /// `crate::carrier::udp_block`).
    pub handshakes: Option<Arc<crate::carrier::tcp_probe::Handshakes>>,
    /// Whether TCP got through when the server was started.
    pub tcp_check: Option<TcpCheck>,
    /// Reads the server's summary, which comes on a QUIC stream of its own
    /// (`server/serve/kept.rs`).
    pub summary_reader: tokio::task::JoinHandle<()>,
    /// How the next copies reach the server, until `Session::take_kept`.
    pub kept: Option<KeptServer>,
}

/// Reads the server's summary from the first bidirectional stream it opens to us (the
/// engine's own streams from the server are unidirectional).
async fn read_summary(conn: quinn::Connection, summary: Arc<OnceLock<ServerSummary>>) {
    let Ok((_, mut stream)) = conn.accept_bi().await else { return };
    let Ok(bytes) = stream.read_to_end(MAX_SUMMARY).await else { return };
    let mut decoder = frame::Decoder::new(MAX_SUMMARY);
    decoder.feed(&bytes);
    if let Ok(Some(payload)) = decoder.next_payload() {
        if let Ok(ServerNote::Summary(said)) = soku_proto::hello::decode_hello(&payload) {
            let _ = summary.set(said);
        }
    }
}
