//! Building quinn endpoints for each side, and the connect/accept helpers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use quinn::{Endpoint, EndpointConfig, TokioRuntime};
use quinn_proto::RandomConnectionIdGenerator;
use rustls::pki_types::CertificateDer;

use crate::config::{mtu_bound_toward, mtu_upper_bound, transport_config, CONNECTION_ID_LEN};
use crate::gso::EndpointSocket;
use crate::identity::SERVER_NAME;
use crate::socket::{bind_udp, SocketReport, REQUESTED_BUFFER};
use crate::tls::{client_crypto, server_crypto};
use crate::{ClientPin, Fingerprint, Identity, TransportError, TransportOptions};

/// Server side: binds `bind` (port 0 picks any free port), tunes the socket, and returns
/// an endpoint that completes handshakes only with a client presenting the certificate
/// whose fingerprint is `client` (a [`Fingerprint`], or a [`ClientPin`] set later).
///
/// Must be called inside a tokio runtime: quinn spawns its I/O driver there.
pub fn server_endpoint(
    bind: SocketAddr,
    identity: &Identity,
    client: impl Into<ClientPin>,
    opts: &TransportOptions,
) -> Result<(Endpoint, SocketReport), TransportError> {
    server_endpoint_toward(bind, None, identity, client, opts)
}

/// [`server_endpoint`] for a client expected from `client_ip` (as ssh saw it): the MTU
/// bound is the route's toward it, as a client's is toward its server.
///
/// The bound sizes quinn's receive buffer (bound x GRO segments x 32 datagrams): at
/// the jumbo-frame bound a server on a 1500-byte route kept 18 MB where 3 MB do, and
/// each 2 MiB of it the first datagrams touch is a page the kernel zeroes (4.3 % of a
/// receiver's samples at 100 Mbit/s x 50 ms, under `recvmmsg`). Sized by the route,
/// the receiver's peak RSS fell from 36-48 to 30 MiB and its CPU by 5 %
/// (`lab/2026-11-27-receiver-rest`). The bound is also the
/// `max_udp_payload_size` we advertise; the client's discovery already stops at its
/// own route's bound.
pub fn server_endpoint_toward(
    bind: SocketAddr,
    client_ip: Option<IpAddr>,
    identity: &Identity,
    client: impl Into<ClientPin>,
    opts: &TransportOptions,
) -> Result<(Endpoint, SocketReport), TransportError> {
    let mtu_bound = server_mtu_bound(bind.ip(), client_ip);
    let server = server_config(identity, client, opts, mtu_bound)?;
    let (socket, report) = bind_udp(bind, REQUESTED_BUFFER, true)?;
    let endpoint = new_endpoint(Some(server), socket, &report, mtu_bound)?;
    Ok((endpoint, report))
}

/// What a server endpoint takes its clients with: our `identity`, the client pinned by
/// `client`, `opts` and the MTU bound. [`server_endpoint_toward`] makes its endpoint's
/// from it; a server that takes more connections after refusing others for a while
/// sets it again (`quinn::Endpoint::set_server_config`).
pub fn server_config(
    identity: &Identity,
    client: impl Into<ClientPin>,
    opts: &TransportOptions,
    mtu_bound: u16,
) -> Result<quinn::ServerConfig, TransportError> {
    let crypto = server_crypto(identity, client.into(), opts.cipher)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(Arc::new(transport_config(opts, mtu_bound)));
    Ok(server)
}

/// The MTU bound a server endpoint bound to `bind` uses toward a client at `client_ip`
/// (see [`server_endpoint_toward`]).
pub fn server_mtu_bound(bind: IpAddr, client_ip: Option<IpAddr>) -> u16 {
    client_ip.map_or_else(|| mtu_upper_bound(bind), mtu_bound_toward)
}

/// Client side: an endpoint on an ephemeral port of `family_of`'s address family, whose
/// connections present `identity` and accept only the server pinned by `server`.
///
/// Must be called inside a tokio runtime: quinn spawns its I/O driver there.
pub fn client_endpoint(
    family_of: SocketAddr,
    identity: &Identity,
    server: Fingerprint,
    opts: &TransportOptions,
) -> Result<(Endpoint, SocketReport), TransportError> {
    let crypto = client_crypto(identity, server, opts.cipher)?;
    let mut client = quinn::ClientConfig::new(Arc::new(crypto));
    let mtu_bound = mtu_bound_toward(family_of.ip());
    client.transport_config(Arc::new(transport_config(opts, mtu_bound)));
    let bind = match family_of {
        SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    };
    let (socket, report) = bind_udp(bind, REQUESTED_BUFFER, true)?;
    let mut endpoint = new_endpoint(None, socket, &report, mtu_bound)?;
    endpoint.set_default_client_config(client);
    Ok((endpoint, report))
}

fn new_endpoint(
    server: Option<quinn::ServerConfig>,
    socket: std::net::UdpSocket,
    report: &SocketReport,
    mtu_bound: u16,
) -> Result<Endpoint, TransportError> {
    // tokio panics when a socket is registered outside a runtime; turn that into an error.
    tokio::runtime::Handle::try_current().map_err(|_| TransportError::NoRuntime)?;
    let mut config = EndpointConfig::default();
    config.cid_generator(|| Box::new(RandomConnectionIdGenerator::new(CONNECTION_ID_LEN)));
    // We advertise this as our `max_udp_payload_size`, and the peer's MTU discovery never
    // probes above it. quinn's default (1472) silently held every path, loopback
    // included, at 1472-byte packets whatever our discovery bound said; raising it took
    // loopback from ~330 to 500-620 MB/s (at a 6000 bound).
    config.max_udp_payload_size(mtu_bound).map_err(|e| {
        TransportError::Socket(std::io::Error::other(format!("MTU bound {mtu_bound}: {e}")))
    })?;
    let socket = Arc::new(EndpointSocket::new(quinn_socket(socket, report)?, server.is_none()));
    Ok(Endpoint::new_with_abstract_socket(config, server, socket, runtime())?)
}

/// The runtime quinn's connections run on: tokio, with timers that fire within tens
/// of microseconds of their deadline on Linux (`precise_timer.rs`): pacing needs them.
/// `SOKU_TOKIO_TIMERS=1` keeps tokio's millisecond timers: a switch for A/B runs.
#[cfg(target_os = "linux")]
fn runtime() -> Arc<dyn quinn::Runtime> {
    if std::env::var_os("SOKU_TOKIO_TIMERS").is_some_and(|v| v == "1") {
        Arc::new(TokioRuntime)
    } else {
        Arc::new(crate::precise_timer::PreciseRuntime)
    }
}

#[cfg(not(target_os = "linux"))]
fn runtime() -> Arc<dyn quinn::Runtime> {
    Arc::new(TokioRuntime)
}

/// The socket quinn reads and writes: one that rests between batches while datagrams
/// stream in (`batched_udp.rs`, Linux: it rests on a timerfd); elsewhere quinn's tokio
/// socket, or where the system refuses what that one asks for, a plain one
/// (`plain_udp.rs`).
#[cfg(target_os = "linux")]
fn quinn_socket(
    socket: std::net::UdpSocket,
    report: &SocketReport,
) -> std::io::Result<Arc<dyn quinn::AsyncUdpSocket>> {
    match crate::batched_udp::BatchedUdp::new(socket.try_clone()?, report.recv_buffer) {
        Ok(batched) => Ok(Arc::new(batched)),
        Err(_) => Ok(Arc::new(crate::plain_udp::PlainUdp::new(socket)?)),
    }
}

#[cfg(not(target_os = "linux"))]
fn quinn_socket(
    socket: std::net::UdpSocket,
    _report: &SocketReport,
) -> std::io::Result<Arc<dyn quinn::AsyncUdpSocket>> {
    use quinn::Runtime as _;
    match TokioRuntime.wrap_udp_socket(socket.try_clone()?) {
        Ok(quinns) => Ok(quinns),
        Err(_) => Ok(Arc::new(crate::plain_udp::PlainUdp::new(socket)?)),
    }
}

/// Connects to the server at `server_addr` and waits for the handshake.
///
/// A wrong server certificate fails here with [`TransportError::Handshake`]. The server
/// judges *our* certificate after our side of the handshake is done, so a refusal by the
/// server shows up on the returned connection's first use (or `closed()`), also as a
/// TLS-coded close.
pub async fn connect(
    endpoint: &Endpoint,
    server_addr: SocketAddr,
) -> Result<quinn::Connection, TransportError> {
    Ok(endpoint.connect(server_addr, SERVER_NAME)?.await?)
}

/// Waits for the next client and its handshake, and keeps the connection only if the
/// client's certificate is the one `pin` names. A client with the wrong certificate
/// fails with [`TransportError::Handshake`], or with [`TransportError::NotPinned`] if
/// it came before the pin; the caller may simply wait again.
pub async fn accept(
    endpoint: &Endpoint,
    pin: &ClientPin,
) -> Result<quinn::Connection, TransportError> {
    accept_with(endpoint, pin, |_| {}).await
}

/// [`accept`], telling `peer_seen` the client's address before the connection (and so
/// its congestion controller) is made: the controller's board
/// ([`TransportOptions::board`](crate::TransportOptions::board)) is named after it.
///
/// The handshake goes ahead before the pin is set (see [`ClientPin`]); the connection
/// is returned only once the pin is, and matches: this waits for the pin as long as
/// the caller does.
pub async fn accept_with(
    endpoint: &Endpoint,
    pin: &ClientPin,
    peer_seen: impl FnOnce(SocketAddr),
) -> Result<quinn::Connection, TransportError> {
    let incoming = endpoint.accept().await.ok_or(TransportError::EndpointClosed)?;
    peer_seen(incoming.remote_address());
    let conn = incoming.await?;
    let expected = pin.pinned().await;
    let presented = end_entity(&conn).map(|der| Fingerprint::of_der(&der));
    if presented.is_some_and(|got| got.ct_eq(&expected)) {
        Ok(conn)
    } else {
        // Just after the handshake nothing fills the window that the close must pass.
        conn.close(NOT_PINNED.into(), b"client certificate not the one announced over ssh");
        Err(TransportError::NotPinned)
    }
}

/// The QUIC application close code of a connection whose client certificate turned out
/// not to be the pinned one (soku's other codes, 0-6, are the application's).
pub const NOT_PINNED: u32 = 7;

/// The certificate the peer of `conn` presented (DER).
fn end_entity(conn: &quinn::Connection) -> Option<Vec<u8>> {
    let chain = conn.peer_identity()?.downcast::<Vec<CertificateDer<'static>>>().ok()?;
    chain.first().map(|cert| cert.to_vec())
}
