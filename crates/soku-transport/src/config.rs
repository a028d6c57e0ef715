//! quinn's transport parameters, sized for a long fat path without any flags.
//!
//! Target: 1 Gbit/s at 300 ms RTT, whose bandwidth-delay product is
//! 1e9 / 8 * 0.3 = 37.5 MB. Flow-control windows must exceed the BDP or they, not the
//! congestion controller, cap the rate; they are also the memory each side may have to
//! buffer, so they are bounded rather than unlimited.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use quinn::congestion::ControllerFactory;
use quinn::{AckFrequencyConfig, MtuDiscoveryConfig, TransportConfig, VarInt};
use soku_cc::{BoardSlot, HintSlot, SokuCcConfig};

use crate::Cipher;

/// What the user chose on the command line that the transport must honour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransportOptions {
    /// `-c`: restrict TLS to this suite; `None` offers all, AES-128-GCM first.
    pub cipher: Option<Cipher>,
    /// `-l`: hard cap on the send rate, in bits per second.
    pub rate_limit_bps: Option<u64>,
    /// What the congestion controller learns late: the path memory for careful resume
    /// (`soku_cc::resume`) and background mode; may be filled after the endpoint is up.
    pub hint: HintSlot,
    /// Where the controller shares its min RTT with the other copies on the same path
    /// (`soku_cc::shared`); filled once the peer's address is known, empty: no sharing.
    pub board: BoardSlot,
    /// The path's min RTT as an earlier copy to the same host measured it (the path
    /// memory): the handshake's probe timeouts start from it where it is below quinn's
    /// 333 ms (see `initial_rtt`).
    pub expected_rtt: Option<Duration>,
}

/// Connection-level receive window: 64 MiB, the next power of two above the 37.5 MB BDP.
pub const RECEIVE_WINDOW: u32 = 64 << 20;
/// Bytes we keep in flight unacknowledged across all streams; matches the peer's window.
const SEND_WINDOW: u64 = 64 << 20;
/// Bytes of bulk data (chunks) a sender may keep unacknowledged: three quarters of
/// [`SEND_WINDOW`] (and of the peer's receive window, the same size), so control
/// frames always find room in quinn's send buffer and flow-control credit. When
/// chunks filled the whole window, a file's entry queued behind them never left and
/// the copy stalled for good at a file boundary.
pub const BULK_BUDGET: u64 = SEND_WINDOW / 4 * 3;
/// Per-stream window: one chunk (at most 1 MiB) fits many times over, and 8 streams at
/// full window already fill the connection window, so no single stream stalls the rest.
pub const STREAM_RECEIVE_WINDOW: u32 = 8 << 20;
/// Chunks travel one per uni stream; 64-256 are in flight at once, so 512 leaves slack
/// for the credit (MAX_STREAMS) to arrive before it runs out.
pub(crate) const MAX_UNI_STREAMS: u32 = 512;
/// Bytes of unreliable datagrams held for the application: a diagnose probe's tags are
/// 8 bytes each, one per millisecond, read as they come.
const DATAGRAM_RECEIVE_BUFFER: usize = 64 << 10;
/// Bidi streams carry control (one) and `soku tunnel` connections (up to 256 each side).
const MAX_BIDI_STREAMS: u32 = 272;
/// Keep-alives keep NAT bindings open through long pauses (disk stalls, big files
/// being hashed) and detect a dead path well before the idle timeout.
const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// Give up after a minute without hearing from the peer (ssh still tells us sooner if
/// the session itself dies). In milliseconds, as QUIC encodes it.
const IDLE_TIMEOUT_MS: u32 = 60_000;
/// The same idle timeout, for what tells the user how long a silent path is waited for.
pub const IDLE_TIMEOUT: Duration = Duration::from_millis(IDLE_TIMEOUT_MS as u64);
/// RFC 9002 §6.2.2: 333 ms before any sample; errs long so 300 ms paths do not resend
/// their Initial packets spuriously.
const INITIAL_RTT: Duration = Duration::from_millis(333);

/// The RTT the handshake assumes before its first sample: the path's remembered min RTT
/// where that is shorter than [`INITIAL_RTT`], as RFC 9002 §6.2.2 allows for a path a
/// previous connection measured. A lost first Initial is resent after three of these
/// (quinn's probe timeout before any sample): 1 s with the default, which a 100 ms
/// path with 10 % loss paid in 4 of 16 connections on the emulator
/// (`lab/2026-12-01-handshake-before-hello`). Never longer than the default: on a
/// longer path the default's early resend is a spare copy of the Initial, which a lost
/// first one needs anyway.
pub(crate) fn initial_rtt(expected: Option<Duration>) -> Duration {
    expected.map_or(INITIAL_RTT, |rtt| rtt.clamp(MIN_INITIAL_RTT, INITIAL_RTT))
}

/// The least initial RTT taken from a memory: a LAN path's sub-millisecond min RTT
/// would resend the Initial while the peer is still making its keys.
const MIN_INITIAL_RTT: Duration = Duration::from_millis(10);
/// QUIC's minimum datagram size (RFC 9000 §14): every path must carry it.
const INITIAL_MTU: u16 = 1200;
/// Upper bound for path MTU discovery on a network path: jumbo frames (9000-byte MTU),
/// lowered to the route's own MTU where the system tells it (`route_mtu.rs`): most
/// routes stop at 1500, and probes beyond that never left this host. Discovery starts with a probe halfway between 1200 and
/// the bound, and a probe holds its bytes in the congestion window until it is declared
/// lost: with a 60 000 bound that first probe (30 600 bytes) outgrew the 14.7 kB initial
/// window and held back the first data for ~4 RTT on a 1500-byte path (50 and 200 ms
/// emulated); at this bound it is 5 100 bytes and the first data leaves at once.
pub(crate) const MTU_UPPER_BOUND: u16 = 9000;
/// Upper bound when both ends are on this host (loopback, 64 KiB MTU): per-packet CPU
/// (QUIC encrypts and tracks every packet in user space) is what limits a local copy.
/// Loopback, 1 GiB, median of 3-4 alternated runs: bound 6000 -> 485 MB/s at 3.91 CPU
/// s/GB (both sides), 16000 -> 556-570 MB/s at 3.3-3.4, 60000 -> 628 MB/s at 3.05.
/// Batches above one UDP send's 64 KiB are split by `gso.rs`. It also sizes quinn's
/// receive buffer (bound x 64 GRO segments x 32 datagrams, ~120 MB of address space, of
/// which only what arrives is touched).
pub(crate) const LOOPBACK_MTU_UPPER_BOUND: u16 = 60_000;

/// How long after quinn judges the path an MTU black hole (and drops to 1200-byte
/// packets) it searches again; its default is 60 s. Drop-tail queue overflow can look
/// like a black hole: on the 1 Gbit/s x 100 ms emulated path (MTU 1500) one of eight
/// copies fell from 1442 back to 1200 bytes at 2 s and sent its remaining 10 s with 22 %
/// more packets, and so more per-packet CPU, than its neighbours. Data is only ever sent
/// at a size a probe got through, so searching sooner costs a few probe packets on a
/// path that really lost its MTU, nothing more.
const BLACK_HOLE_COOLDOWN: Duration = Duration::from_secs(5);

/// The MTU discovery bound for a path to (or a socket bound on) `ip`.
pub(crate) fn mtu_upper_bound(ip: IpAddr) -> u16 {
    if ip.is_loopback() {
        LOOPBACK_MTU_UPPER_BOUND
    } else {
        MTU_UPPER_BOUND
    }
}

/// The MTU discovery bound for a path to `peer`: the bound above, lowered to what the
/// route toward it carries (`route_mtu.rs`).
pub(crate) fn mtu_bound_toward(peer: IpAddr) -> u16 {
    within_route(mtu_upper_bound(peer), crate::route_mtu::udp_payload_toward(peer))
}

/// `bound`, no larger than the route's UDP payload where known, and never below QUIC's
/// minimum (a route that small cannot carry QUIC at all; the handshake will say so).
fn within_route(bound: u16, route_payload: Option<u32>) -> u16 {
    match route_payload {
        Some(payload) => bound.min(u16::try_from(payload).unwrap_or(u16::MAX)).max(INITIAL_MTU),
        None => bound,
    }
}

/// The length of the connection IDs an endpoint issues, which every packet sent to it
/// carries (RFC 9000 §5.1). quinn's default is 8 bytes, sized for load balancers that
/// route on the ID across many servers. A soku endpoint holds a handful of connections
/// (one copy, its reconnects), and 32 random bits tell them apart: quinn draws again
/// when an ID is already in use. The 4 bytes saved are 0.28 % of every full-size data
/// packet on a 1500-byte path, line rate the file gets instead of the header: 0.25 %
/// fewer packets for the same copy on the emulator, and a 30 s copy at 100 Mbit/s x
/// 200 ms went from 89.8 to 90.6 % of the link (medians of 3,
/// from `lab/2026-11-26-next-copy-200ms`).
pub(crate) const CONNECTION_ID_LEN: usize = 4;

/// ACK every tenth ack-eliciting packet instead of every second (the QUIC ACK frequency
/// extension, which the data sender requests of the receiver; gaps and the peer's
/// `max_ack_delay` still trigger an ACK at once). On a paced 100 Mbit/s emulated path
/// every ACK is its own wakeup and syscall on both sides: this halved the sender's CPU
/// (2.3-2.7 -> 1.1-1.4 s per 125 MB) and cut the receiver's by a third, at the same
/// throughput, RTT 10-200 ms, loss 0-1 % (measured with the change alone). 24 saved little more.
const ACK_ELICITING_THRESHOLD: u32 = 9;

/// The transport configuration both endpoints use.
pub fn transport_config(opts: &TransportOptions, mtu_bound: u16) -> TransportConfig {
    let mut mtu = MtuDiscoveryConfig::default();
    mtu.upper_bound(mtu_bound).black_hole_cooldown(BLACK_HOLE_COOLDOWN);

    let mut cfg = TransportConfig::default();
    cfg.receive_window(VarInt::from_u32(RECEIVE_WINDOW))
        .send_window(SEND_WINDOW)
        .stream_receive_window(VarInt::from_u32(STREAM_RECEIVE_WINDOW))
        .max_concurrent_uni_streams(VarInt::from_u32(MAX_UNI_STREAMS))
        .max_concurrent_bidi_streams(VarInt::from_u32(MAX_BIDI_STREAMS))
        .keep_alive_interval(Some(KEEP_ALIVE))
        .max_idle_timeout(Some(VarInt::from_u32(IDLE_TIMEOUT_MS).into()))
        .initial_rtt(initial_rtt(opts.expected_rtt))
        .initial_mtu(INITIAL_MTU)
        .mtu_discovery_config(Some(mtu))
        // Copies send no unreliable datagrams; `soku diagnose` tags its probes with a
        // few small ones to count reordering (quinn reports none of its own). The
        // buffer is bounded, and quinn drops the oldest datagram when it is full.
        .datagram_receive_buffer_size(Some(DATAGRAM_RECEIVE_BUFFER))
        // Chunks are whole units of verification: sending streams one after another
        // (instead of round-robin) completes chunks early and steadily, so verified
        // progress flows and fewer half-sent chunks sit in memory.
        .send_fairness(false)
        // GSO: one syscall per batch of packets, the biggest CPU saving on send.
        .enable_segmentation_offload(true)
        .congestion_controller_factory(congestion_factory(opts));
    let mut ack = AckFrequencyConfig::default();
    ack.ack_eliciting_threshold(VarInt::from_u32(ACK_ELICITING_THRESHOLD));
    cfg.ack_frequency_config(Some(ack));
    cfg
}

/// The congestion controller for every connection: the one switch point between
/// soku-cc and quinn's stock controllers (`Arc::new(quinn::congestion::BbrConfig::default())`
/// is the drop-in fallback).
///
/// soku-cc steers by a path model, so random loss does not cut the rate; it also
/// enforces `-l` as a window cap of `rate x min_rtt`.
pub fn congestion_factory(opts: &TransportOptions) -> Arc<dyn ControllerFactory + Send + Sync> {
    // A diagnostic switch for side-by-side measurements against quinn's stock controllers
    // (the benchmarks use it); not a tuning knob: soku-cc is the only supported default.
    match std::env::var("SOKU_CC").as_deref() {
        Ok("cubic") => return Arc::new(quinn::congestion::CubicConfig::default()),
        Ok("bbr") => return Arc::new(quinn::congestion::BbrConfig::default()),
        Ok("newreno") => return Arc::new(quinn::congestion::NewRenoConfig::default()),
        _ => {}
    }
    let cc = SokuCcConfig {
        rate_cap_bps: opts.rate_limit_bps,
        hint: opts.hint.clone(),
        board: opts.board.clone(),
        // A stalled path is probed every half second, not on a doubling timeout, so a
        // copy goes on within about a second of a blackout's end (`soku_cc::stall`).
        stall_probes: true,
        // What `transport_config` asks of the peer: the controller must know that a
        // round of fewer packets is acknowledged on the peer's timer.
        ack_every_packets: ACK_ELICITING_THRESHOLD + 1,
        ..SokuCcConfig::default()
    };
    Arc::new(cc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_the_target_bdp() {
        let bdp = 1_000_000_000u64 / 8 * 300 / 1000;
        assert!(u64::from(RECEIVE_WINDOW) > bdp);
        assert!(SEND_WINDOW > bdp);
        assert!(u64::from(STREAM_RECEIVE_WINDOW) >= 1 << 20);
    }

    #[test]
    fn the_route_lowers_the_bound_and_never_below_quic_minimum() {
        assert_eq!(within_route(MTU_UPPER_BOUND, Some(1472)), 1472);
        assert_eq!(within_route(MTU_UPPER_BOUND, Some(8972)), 8972);
        assert_eq!(within_route(MTU_UPPER_BOUND, Some(65_508)), MTU_UPPER_BOUND);
        assert_eq!(within_route(LOOPBACK_MTU_UPPER_BOUND, Some(65_508)), LOOPBACK_MTU_UPPER_BOUND);
        assert_eq!(within_route(MTU_UPPER_BOUND, Some(1000)), INITIAL_MTU);
        assert_eq!(within_route(MTU_UPPER_BOUND, None), MTU_UPPER_BOUND);
    }

    #[test]
    fn config_builds_for_every_option() {
        for cipher in [None, Some(Cipher::Chacha20Poly1305)] {
            let opts = TransportOptions {
                cipher,
                rate_limit_bps: Some(10_000_000),
                ..TransportOptions::default()
            };
            let _ = transport_config(&opts, MTU_UPPER_BOUND);
        }
    }
}
