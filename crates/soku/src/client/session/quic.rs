//! The data over QUIC, the ssh channel beside it (`side_channel.rs`). In auto mode the
//! copy keeps the TLS-over-TCP attempt that raced QUIC, to move to TCP should UDP turn
//! out rate-limited, and then pings the server over ssh to tell a UDP shaper
//! (`crate::carrier::shaping`).

use std::time::Duration;

use soku_engine::events::{EventSink, TransferEvent};
use soku_engine::link::{self, Link};
use soku_transport::{Fingerprint, Identity};
use tokio::io::AsyncRead;

use super::choose::{QuicWon, TcpCheck};
use super::side_channel::{Halves, SideChannel};
use super::terms::Terms;
use crate::client::kept::KeptServer;

/// A QUIC connection and the endpoint that made it.
pub struct QuicPath {
    /// The endpoint, kept until the session ends: dropping it would stop the connection.
    endpoint: quinn::Endpoint,
    /// The connection.
    pub conn: quinn::Connection,
    /// Wakes the connection while its path is silent, so a blackout's end is noticed
    /// within half a second (`soku_transport::wake_when_silent`).
    _wake: soku_transport::SilenceWake,
}

impl QuicPath {
    /// Keeps `conn`, made on `endpoint`, and wakes it while its path is silent.
    pub fn new(endpoint: quinn::Endpoint, conn: quinn::Connection) -> QuicPath {
        let _wake = soku_transport::wake_when_silent(&conn);
        QuicPath { endpoint, conn, _wake }
    }

    /// Waits up to `limit` for the endpoint to drain: a closed connection's
    /// CONNECTION_CLOSE has left, and is sent again to a packet showing it was lost
    /// (RFC 9000, section 10.2.1).
    pub async fn drain(self, limit: Duration) {
        let _ = tokio::time::timeout(limit, self.endpoint.wait_idle()).await;
    }
}

/// A session whose data moves over QUIC.
pub struct QuicCarrier {
    pub path: QuicPath,
    pub side: SideChannel,
    /// In auto mode: whether TCP got through too.
    pub tcp_check: Option<TcpCheck>,
    /// The server stays after this job for the next copies (see `crate::client::kept`),
    /// and how they reach it, until `Session::take_kept`.
    pub kept_after: bool,
    pub kept: Option<KeptServer>,
}

/// What the next copies need to reach the kept server this job leaves.
pub struct Keeping {
    pub identity: Identity,
    pub server: Fingerprint,
    pub terms: Terms,
}

/// Sets up the QUIC session that won the choice: opens the job's stream and starts
/// reading the ssh channel's notes.
pub async fn start<R>(
    won: QuicWon,
    tcp_check: Option<TcpCheck>,
    channel: Halves<R>,
    keeping: Option<Keeping>,
    events: &dyn EventSink,
) -> anyhow::Result<(QuicCarrier, Link)>
where
    R: AsyncRead + Send + Unpin + 'static,
{
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
    // Only a copy that could move to TCP has a use for the round trips.
    let side = SideChannel::start(channel, Some(conn.clone()), tcp_check.is_some());
    let kept = keeping.map(|keeping| KeptServer {
        addr: won.addr,
        server: keeping.server,
        identity: keeping.identity,
        min_rtt: Duration::ZERO,
        tcp_reachable: None,
        byte_names: keeping.terms.byte_names,
        open_files: keeping.terms.open_files,
    });
    let carrier = QuicCarrier {
        path: QuicPath::new(won.endpoint, conn),
        side,
        tcp_check,
        kept_after: kept.is_some(),
        kept,
    };
    Ok((carrier, link))
}
