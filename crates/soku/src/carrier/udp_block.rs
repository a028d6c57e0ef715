//! Telling UDP blocked under a running copy from an outage: QUIC hears nothing while
//! round trips over ssh (a TCP connection on the same path, `crate::carrier::shaping`) go on as
//! before, so that the copy moves to TLS over TCP instead of waiting out QUIC's idle
//! timeout (a minute) and logging in again.
//!
//! UDP can stop mid-copy while TCP goes on: a firewall whose UDP state expired, a NAT
//! that drops the mapping, a VPN that comes up and carries TCP only. Nothing QUIC sees
//! tells that from an outage, where soku rides the silence out and resumes on the same
//! connection (`docs/durability.md`). ssh tells them apart: in an outage its round
//! trips stop too. The verdict needs both, over the same span:
//!
//! - QUIC received nothing for [`QUIC_SILENCE`]. A live connection hears at least the
//!   peer's keep-alive and the acknowledgement of its own every 5 s
//!   (`soku_transport`'s config), however idle the copy;
//! - every ping sent over ssh from the start of that silence until [`PONG_PATIENCE`]
//!   ago was answered within [`PONG_PATIENCE`]. A ping sent during an outage is
//!   answered late or not at all, and keeps the verdict off for the rest of that
//!   silence: QUIC's probes find the path again within a second of its return.
//!
//! A copy through a kept server has no ssh channel: its round trips over TCP are
//! handshakes with the host ssh logs in to, made once QUIC has been silent for longer
//! than a live connection ever is (`crate::carrier::tcp_probe`), and they cover the silence
//! from then on. Where soku cannot make them (ssh goes through a proxy), and with a
//! server from before the pings, which never answers them: no verdict.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::carrier::shaping::RoundTrips;
use crate::carrier::tcp_probe::Handshakes;

/// How long QUIC must hear nothing: longer than the keep-alive interval (5 s) and a
/// round trip, with a margin for a busy host's timers.
pub const QUIC_SILENCE: Duration = Duration::from_secs(8);
/// The longest round trip over ssh that counts as answered at once.
pub const PONG_PATIENCE: Duration = Duration::from_millis(1500);
/// How often the watch looks.
const LOOK_EVERY: Duration = Duration::from_millis(500);

/// The round trips over TCP that stand beside QUIC's silence.
#[derive(Debug, Clone)]
pub enum TcpRoundTrips {
    /// Pings over the ssh channel, sent all through the copy (`crate::carrier::shaping`).
    Ssh(Arc<RoundTrips>),
    /// TCP handshakes, made only while QUIC is silent (a copy through a kept server).
    Handshakes(Arc<Handshakes>),
}

impl TcpRoundTrips {
    /// ssh's pings, which also time the path beside QUIC for a shaper.
    pub fn ssh_pings(&self) -> Option<&RoundTrips> {
        match self {
            TcpRoundTrips::Ssh(pings) => Some(pings),
            TcpRoundTrips::Handshakes(_) => None,
        }
    }

    fn record(&self) -> &RoundTrips {
        match self {
            TcpRoundTrips::Ssh(pings) => pings,
            TcpRoundTrips::Handshakes(handshakes) => handshakes.round_trips(),
        }
    }

    /// Where the span the round trips must cover starts, for a silence from `since`.
    fn covering_from(&self, since: Instant) -> Instant {
        match self {
            TcpRoundTrips::Ssh(_) => since,
            TcpRoundTrips::Handshakes(_) => since + crate::carrier::tcp_probe::PROBE_AFTER,
        }
    }

    fn silent_for(&self, silent: Duration, now: Instant) {
        if let TcpRoundTrips::Handshakes(handshakes) = self {
            handshakes.silent_for(silent, now);
        }
    }
}

/// When QUIC last heard anything, as the looks see it.
#[derive(Debug)]
pub struct Silence {
    heard: u64,
    since: Instant,
}

impl Silence {
    /// Starts counting at `conn`'s datagrams now.
    pub fn new(conn: &quinn::Connection) -> Silence {
        Silence { heard: conn.stats().udp_rx.datagrams, since: Instant::now() }
    }

    /// How long QUIC had heard nothing at the last look, as of `now`.
    pub fn silent_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.since)
    }

    /// Looks at `conn` now: how long it has heard nothing.
    pub fn update(&mut self, conn: &quinn::Connection) -> Duration {
        let now = Instant::now();
        let heard = conn.stats().udp_rx.datagrams;
        if heard != self.heard {
            (self.heard, self.since) = (heard, now);
        }
        now.saturating_duration_since(self.since)
    }

    /// One look at `conn` and `tcp`: the reason, if UDP looks blocked (see the module
    /// documentation).
    pub fn look(&mut self, conn: &quinn::Connection, tcp: &TcpRoundTrips) -> Option<String> {
        let silent = self.update(conn);
        let now = Instant::now();
        tcp.silent_for(silent, now);
        if silent < QUIC_SILENCE {
            return None;
        }
        let from = tcp.covering_from(self.since);
        let rtt = tcp.record().answered_throughout(from, now, PONG_PATIENCE)?;
        // Over ssh, a remote soku that stopped ends the channel and is told at once; a
        // kept server that stopped without a word (killed) looks like UDP cut.
        let (suspects, answered) = match tcp {
            TcpRoundTrips::Ssh(_) => ("", "ssh (TCP) answered every ping"),
            TcpRoundTrips::Handshakes(_) => (
                ", or the remote soku kept from the last copy stopped",
                "TCP to the ssh port answered every handshake",
            ),
        };
        Some(format!(
            "UDP stopped getting through on this path{suspects}: QUIC heard nothing for \
             {:.1} s while {answered} (rtt up to {:.1} ms)",
            silent.as_secs_f64(),
            rtt.as_secs_f64() * 1e3
        ))
    }
}

/// Looks at `conn` with `silence` until it closes; the reason, once UDP looks blocked.
/// Does not close the connection.
pub async fn watch(
    conn: &quinn::Connection,
    tcp: &TcpRoundTrips,
    mut silence: Silence,
) -> Option<String> {
    loop {
        tokio::time::sleep(LOOK_EVERY).await;
        if conn.close_reason().is_some() {
            return None;
        }
        if let Some(why) = silence.look(conn, tcp) {
            return Some(why);
        }
    }
}
