//! soku-transport: the data plane's endpoints, QUIC and (where UDP does not get through)
//! TLS 1.3 over TCP.
//!
//! Each session makes a fresh self-signed [`Identity`] per side; the two fingerprints
//! travel over the ssh channel, then QUIC runs mutual TLS 1.3 pinned to exactly those
//! two certificates (no CA, no trust on first use). This crate builds the endpoints for
//! that: the pinned verifiers, the cipher choice, a UDP socket with large kernel buffers,
//! and a transport configuration sized for long fat paths.
//!
//! ```no_run
//! # async fn demo() -> Result<(), soku_transport::TransportError> {
//! use soku_transport::*;
//! let (server_id, client_id) = (Identity::generate()?, Identity::generate()?);
//! let opts = TransportOptions::default();
//! let (server, _report) = server_endpoint(
//!     "0.0.0.0:0".parse().unwrap(), &server_id, client_id.fingerprint(), &opts)?;
//! let addr = server.local_addr()?;
//! let (client, _report) = client_endpoint(addr, &client_id, server_id.fingerprint(), &opts)?;
//! let conn = connect(&client, addr).await?;
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - `identity.rs`: [`Identity`] (ephemeral certificate) and [`Fingerprint`].
//! - `pinning.rs`: the rustls verifiers that accept one fingerprint and check signatures.
//! - `cipher.rs`: [`Cipher`] (`-c`) and the restricted ring crypto provider.
//! - `tls.rs`: rustls client/server configurations, wrapped for quinn or used over TCP.
//! - `tcp.rs`: [`TcpServer`] and [`TcpConnector`]: TLS over TCP with BBR and large
//!   buffers, and the [`TcpReport`] of what the kernel granted.
//! - `socket.rs`: the UDP socket, its buffers and the [`SocketReport`].
//! - `config.rs`: [`TransportOptions`], quinn's transport parameters and the congestion
//!   controller switch.
//! - `gso.rs`: the socket a quinn endpoint writes through: GSO batches kept within one
//!   UDP send, and a client's handshake datagrams sent twice (`handshake_twice.rs`).
//! - `batched_udp.rs` (Linux): quinn's UDP socket, resting between receive batches while
//!   datagrams stream in, so the receiver wakes once per batch, not per datagram.
//! - `reactor.rs` (Linux): descriptors registered with tokio's reactor, and the
//!   one-shot timerfds `batched_udp.rs` and `precise_timer.rs` wait on.
//! - `precise_timer.rs` (Linux): quinn's runtime with timers on a timerfd, so pacing
//!   waits microseconds, not whole milliseconds.
//! - `stall_wake.rs`: [`wake_when_silent`], which wakes a connection whose path went
//!   silent so that its congestion controller's stall probes leave on time.
//! - `tcp_gauge.rs`: [`Gauged`], the kernel's TCP chronographs ([`SendTimes`]) read
//!   from a stream as it writes.
//! - `endpoint.rs`: [`server_endpoint`] (and [`server_endpoint_toward`], for a known client), [`client_endpoint`], [`connect`], [`accept`], [`accept_with`].
//! - `error.rs`: [`TransportError`].
//! - `sys/`: what not every operating system has (per-socket congestion control, TCP
//!   chronographs), one file per system.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

#[cfg(target_os = "linux")]
mod batched_udp;
mod cipher;
mod config;
mod endpoint;
mod error;
mod gso;
mod handshake_twice;
mod identity;
mod pinning;
mod plain_udp;
#[cfg(target_os = "linux")]
mod precise_timer;
#[cfg(target_os = "linux")]
mod reactor;
mod route_mtu;
mod socket;
mod stall_wake;
mod sys;
mod tcp;
mod tcp_gauge;
mod tls;

pub use cipher::{seal_speed, Cipher};
pub use config::{
    congestion_factory, transport_config, TransportOptions, BULK_BUDGET, IDLE_TIMEOUT,
    RECEIVE_WINDOW, STREAM_RECEIVE_WINDOW,
};
pub use endpoint::{
    accept, accept_with, client_endpoint, connect, server_config, server_endpoint,
    server_endpoint_toward, server_mtu_bound, NOT_PINNED,
};
pub use error::TransportError;
pub use identity::{Fingerprint, Identity};
pub use pinning::ClientPin;
pub use socket::{net_core_sysctl, udp_buffers, SocketReport, REQUESTED_BUFFER, WARN_BELOW};
/// How loss in a shallow queue looks to the controller, as [`PathModel::queue`]
/// reports it.
pub use soku_cc::queue_loss::QueueView;
/// Careful resume's phases, as [`PathModel::resume`] reports them.
pub use soku_cc::resume::Phase as ResumePhase;
/// The congestion controller's phases, as [`PathModel::phase`] reports them.
pub use soku_cc::Mode as CcPhase;
pub use soku_cc::{
    BoardSlot, ConnectionHint, HintSlot, MinRttRecord, PathBoard, RememberedPath, ShareRecord,
};
pub use stall_wake::{wake_when_silent, SilenceWake, WAKE_EVERY};
pub use tcp::{
    Handshaker, TcpConnector, TcpReport, TcpServer, TlsClientStream, TlsServerStream,
    HANDSHAKE_TIMEOUT, TCP_BUFFER,
};
pub use tcp_gauge::{Chronographs, Gauged, SendTimes};
pub use tls::{ALPN, TCP_ALPN};

#[cfg(test)]
mod tests;

/// What soku's congestion controller believes about the path: its bottleneck
/// bandwidth and propagation-delay estimates. quinn's own `min_rtt` is built from the
/// same receive stamps but without our guard against stale ones, so the two can differ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathModel {
    /// Estimated bottleneck bandwidth, bits per second.
    pub bandwidth_bps: u64,
    /// Estimated round-trip propagation time.
    pub min_rtt: std::time::Duration,
    /// The controller's phase (see [`CcPhase`]).
    pub phase: CcPhase,
    /// Where careful resume stands, and the window it jumped to (0: no jump).
    pub resume: ResumePhase,
    /// See `resume`.
    pub resume_jump: u64,
    /// Whether the jump was lost with no queue (see
    /// `soku_cc::resume::CarefulResume::lost_without_queue`).
    pub resume_lost_without_queue: bool,
    /// Whether every packet sent before the retreat is acknowledged or declared lost
    /// (`soku_cc::resume::CarefulResume::retreat_settled`).
    pub resume_retreat_settled: bool,
    /// Whether the controller yields to other traffic (`--background`).
    pub background: bool,
    /// Round trips closed so far, and how many of them the sender had less to send
    /// than its window allowed (`soku_cc::SokuCc::rounds`).
    pub rounds: u64,
    /// See `rounds`.
    pub app_limited_rounds: u64,
    /// The share of packets the path loses at every rate (`soku_cc::SokuCc::loss_floor`),
    /// once known.
    pub loss_floor: Option<f64>,
    /// The rate a policer on the path passes, bits per second, while the controller
    /// holds to it (`soku_cc::SokuCc::policed_bps`).
    pub policed_bps: Option<u64>,
    /// How loss in a shallow queue looks to the controller (`soku_cc::SokuCc::queue_view`).
    pub queue: QueueView,
}

/// The path's round-trip propagation time: soku-cc's estimate when the connection runs
/// it, else quinn's. quinn's own minimum takes every sample, and a sample is too small
/// when its datagram was stamped before it arrived (quinn stamps a receive loop's start,
/// and an endpoint task descheduled meanwhile stamps early): with eight copies on two
/// cores over a 20 ms emulated path it read 0.0-0.6 ms, and once 167.6 ms on a 200 ms
/// path. soku-cc keeps only samples that cannot be too small (see `soku_cc::SokuCc`).
pub fn min_rtt(conn: &quinn::Connection) -> std::time::Duration {
    path_model(conn).map_or_else(|| conn.stats().path.min_rtt, |model| model.min_rtt)
}

/// Closes `conn` with `code` and `reason`, making sure the CONNECTION_CLOSE can leave
/// under a full congestion window (see `soku_cc::SokuCc::open_for_close`): a copy
/// closed for a UDP rate limit, a stop or an abort is closed with its window full, and
/// a peer with no ssh channel to tell it otherwise (a kept server) heard nothing.
pub fn close(conn: &quinn::Connection, code: u32, reason: &[u8]) {
    if let Ok(cc) = conn.congestion_state().into_any().downcast::<soku_cc::SokuCc>() {
        cc.open_for_close();
    }
    conn.close(code.into(), reason);
}

/// The controller's path model, if the connection runs soku-cc and has estimates.
pub fn path_model(conn: &quinn::Connection) -> Option<PathModel> {
    let cc = conn.congestion_state().into_any().downcast::<soku_cc::SokuCc>().ok()?;
    let (rounds, app_limited_rounds) = cc.rounds();
    Some(PathModel {
        bandwidth_bps: cc.bandwidth_bps()?,
        min_rtt: cc.min_rtt()?,
        phase: cc.mode(),
        resume: cc.resume_phase(),
        resume_jump: cc.resume_jump(),
        resume_lost_without_queue: cc.resume_lost_without_queue(),
        resume_retreat_settled: cc.resume_retreat_settled(),
        background: cc.is_background(),
        rounds,
        app_limited_rounds,
        loss_floor: cc.loss_floor(),
        policed_bps: cc.policed_bps(),
        queue: cc.queue_view(),
    })
}
