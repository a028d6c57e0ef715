//! Round trips over TCP for a copy through a kept server (`server/serve/kept.rs`), which has
//! no ssh channel to ping on (`crate::carrier::shaping`): TCP handshakes with the host ssh logs
//! in to, timed, so that UDP cut under such a copy is told from an outage as it is for
//! a copy over ssh (`crate::carrier::udp_block`).
//!
//! - **Only while QUIC hears nothing.** A handshake a second once QUIC has been silent
//!   for [`PROBE_AFTER`], longer than a live connection ever is: however idle the copy,
//!   QUIC hears the peer's keep-alive or the acknowledgement of its own every 5 s
//!   (`soku_transport`'s config). A copy that goes well makes none.
//! - **Coverage.** The verdict counts the silence from the first handshake on: from
//!   then, every handshake must have been answered at once. An outage that ends
//!   within those seconds spoils it (its handshakes are answered late or not at all),
//!   and one that ends before them is over before the verdict could come: QUIC hears
//!   the path within half a second of its return, or a round trip on a slower path
//!   (`soku_transport::wake_when_silent`).
//! - **Only where ssh connects to the host itself** (no ProxyCommand or ProxyJump;
//!   `client/launch/shared_login.rs`): the handshake then crosses the path the login did. The
//!   name is resolved when the copy starts: in the silence a DNS query, over UDP, would
//!   be lost too.
//! - **Nothing is said.** Each connection is closed once made; sshd sees a client that
//!   left before its banner (and may log it).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::carrier::shaping::RoundTrips;

/// How long QUIC must have been silent before the first handshake: the keep-alive
/// interval (5 s), a round trip of a long path and a margin; two seconds short of
/// `udp_block::QUIC_SILENCE`, so that the verdict has handshakes to go by.
pub const PROBE_AFTER: Duration = Duration::from_secs(6);
/// How often a handshake is made while the silence lasts.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long a handshake may take before it is given up (it is late for the verdict
/// long before).
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(5);

/// Where ssh connects to log in, as `ssh -G` resolves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginAddress {
    /// The host name or address (`hostname`).
    pub host: String,
    /// The port (`port`).
    pub port: u16,
    /// `any`, `inet` or `inet6` (`addressfamily`).
    pub family: String,
}

impl LoginAddress {
    /// Whether ssh would connect to `addr` under this address family.
    fn admits(&self, addr: &SocketAddr) -> bool {
        match self.family.as_str() {
            "inet" => addr.is_ipv4(),
            "inet6" => addr.is_ipv6(),
            _ => true,
        }
    }
}

/// Timed TCP handshakes with one host.
#[derive(Debug)]
pub struct Handshakes {
    /// The host's addresses, once resolved (empty if that failed).
    addrs: Arc<OnceLock<Vec<SocketAddr>>>,
    round_trips: Arc<RoundTrips>,
    last: Mutex<Option<Instant>>,
    /// Handshakes under way; dropped (and so ended) with the copy's session.
    under_way: Mutex<JoinSet<()>>,
}

impl Handshakes {
    /// Starts resolving `at`'s name; handshakes come only when asked for.
    pub fn start(at: LoginAddress) -> Arc<Handshakes> {
        let addrs = Arc::new(OnceLock::new());
        let mut under_way = JoinSet::new();
        let resolved = addrs.clone();
        under_way.spawn(async move {
            let host = at.host.trim_start_matches('[').trim_end_matches(']').to_string();
            let found = tokio::net::lookup_host((host.as_str(), at.port))
                .await
                .map(|found| found.filter(|addr| at.admits(addr)).collect())
                .unwrap_or_default();
            let _ = resolved.set(found);
        });
        Arc::new(Handshakes {
            addrs,
            round_trips: Arc::new(RoundTrips::default()),
            last: Mutex::new(None),
            under_way: Mutex::new(under_way),
        })
    }

    /// The handshakes made and their round trips.
    pub fn round_trips(&self) -> &RoundTrips {
        &self.round_trips
    }

    /// QUIC has heard nothing for `silent`: makes a handshake if one is due.
    pub fn silent_for(&self, silent: Duration, now: Instant) {
        if silent < PROBE_AFTER {
            return;
        }
        let Some(addrs) = self.addrs.get().filter(|a| !a.is_empty()).cloned() else { return };
        {
            let mut last = lock(&self.last);
            if last.is_some_and(|at| now.saturating_duration_since(at) < PROBE_EVERY) {
                return;
            }
            *last = Some(now);
        }
        let seq = self.round_trips.sent(now);
        let round_trips = self.round_trips.clone();
        let mut under_way = lock(&self.under_way);
        // Reap the finished ones, so the set holds only what is under way.
        while under_way.try_join_next().is_some() {}
        under_way.spawn(async move {
            let connect = tokio::net::TcpStream::connect(addrs.as_slice());
            if let Ok(Ok(_stream)) = tokio::time::timeout(HANDSHAKE_LIMIT, connect).await {
                round_trips.answered(seq, Instant::now());
            }
        });
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere mid-update of plain values.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(port: u16, family: &str) -> LoginAddress {
        LoginAddress { host: "127.0.0.1".into(), port, family: family.into() }
    }

    async fn resolved(probe: &Handshakes) {
        for _ in 0..200 {
            if probe.addrs.get().is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the name was never resolved");
    }

    #[tokio::test]
    async fn handshakes_come_only_in_a_silence_and_at_most_one_a_second() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let probe = Handshakes::start(local(port, "any"));
        resolved(&probe).await;
        let t0 = Instant::now();
        probe.silent_for(Duration::from_millis(100), t0);
        probe.silent_for(PROBE_AFTER, t0);
        probe.silent_for(PROBE_AFTER * 2, t0 + Duration::from_millis(500));
        probe.silent_for(PROBE_AFTER * 3, t0 + PROBE_EVERY);
        // Two handshakes: at t0 (the first in the silence) and a second later.
        for _ in 0..2 {
            let accepted = tokio::time::timeout(Duration::from_secs(5), listener.accept()).await;
            accepted.expect("a handshake").expect("accept");
        }
        let third = tokio::time::timeout(Duration::from_millis(300), listener.accept()).await;
        assert!(third.is_err(), "a third handshake within the second");
        // Both answered, within the span they cover.
        for _ in 0..200 {
            if probe
                .round_trips()
                .answered_throughout(t0, t0 + PROBE_EVERY * 2, PROBE_EVERY)
                .is_some()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the handshakes were not recorded as answered");
    }

    #[tokio::test]
    async fn a_refused_handshake_is_no_answer() {
        // A port with nothing listening: the kernel refuses it at once.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let probe = Handshakes::start(local(port, "any"));
        resolved(&probe).await;
        let t0 = Instant::now();
        probe.silent_for(PROBE_AFTER, t0);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let later = Instant::now() + PROBE_EVERY;
        assert_eq!(probe.round_trips().answered_throughout(t0, later, PROBE_EVERY), None);
    }

    #[tokio::test]
    async fn the_address_family_filters_the_names_addresses() {
        let probe = Handshakes::start(local(22, "inet6"));
        resolved(&probe).await;
        assert_eq!(probe.addrs.get(), Some(&Vec::new()), "127.0.0.1 is no inet6 address");
        let probe = Handshakes::start(local(22, "inet"));
        resolved(&probe).await;
        assert_eq!(probe.addrs.get().map(Vec::len), Some(1));
    }
}
