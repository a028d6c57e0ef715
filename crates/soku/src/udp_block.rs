//! Telling UDP blocked under a running copy from an outage: QUIC hears nothing while
//! round trips over ssh (a TCP connection on the same path, `crate::shaping`) go on as
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
//! A server from before the pings never answers them, and a copy through a kept server
//! has no ssh channel: no verdict, as before.

use std::time::Duration;

use tokio::time::Instant;

use crate::shaping::SshPings;

/// How long QUIC must hear nothing: longer than the keep-alive interval (5 s) and a
/// round trip, with a margin for a busy host's timers.
pub const QUIC_SILENCE: Duration = Duration::from_secs(8);
/// The longest round trip over ssh that counts as answered at once.
pub const PONG_PATIENCE: Duration = Duration::from_millis(1500);
/// How often the watch looks.
const LOOK_EVERY: Duration = Duration::from_millis(500);

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

    /// One look at `conn` and `pings`: the reason, if UDP looks blocked (see the module
    /// documentation).
    pub fn look(&mut self, conn: &quinn::Connection, pings: &SshPings) -> Option<String> {
        let now = Instant::now();
        let heard = conn.stats().udp_rx.datagrams;
        if heard != self.heard {
            (self.heard, self.since) = (heard, now);
            return None;
        }
        let silent = now.saturating_duration_since(self.since);
        if silent < QUIC_SILENCE {
            return None;
        }
        let ssh = pings.answered_throughout(self.since, now, PONG_PATIENCE)?;
        Some(format!(
            "UDP stopped getting through on this path: QUIC heard nothing for {:.1} s while \
             ssh (TCP) answered every ping (rtt up to {:.1} ms)",
            silent.as_secs_f64(),
            ssh.as_secs_f64() * 1e3
        ))
    }
}

/// Looks at `conn` with `silence` until it closes; the reason, once UDP looks blocked.
/// Does not close the connection.
pub async fn watch(
    conn: &quinn::Connection,
    pings: &SshPings,
    mut silence: Silence,
) -> Option<String> {
    loop {
        tokio::time::sleep(LOOK_EVERY).await;
        if conn.close_reason().is_some() {
            return None;
        }
        if let Some(why) = silence.look(conn, pings) {
            return Some(why);
        }
    }
}
