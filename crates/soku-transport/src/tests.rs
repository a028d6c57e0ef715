//! End-to-end tests over loopback: real sockets, real handshakes, port 0 everywhere.

use std::net::SocketAddr;
use std::time::Duration;

use crate::*;

const LOOPBACK: &str = "127.0.0.1:0";
/// Bound on every await, so a regression hangs for seconds, not forever.
const LIMIT: Duration = Duration::from_secs(10);

fn loopback() -> SocketAddr {
    LOOPBACK.parse().unwrap()
}

fn opts(cipher: Option<Cipher>) -> TransportOptions {
    TransportOptions { cipher, ..TransportOptions::default() }
}

struct Pair {
    server: quinn::Endpoint,
    pin: ClientPin,
    client: quinn::Endpoint,
    addr: SocketAddr,
}

/// Server presents `server_cert` and pins `client_pin`; client presents `client_cert`
/// and pins `server_pin`.
fn pair(
    server_cert: &Identity,
    client_pin: Fingerprint,
    client_cert: &Identity,
    server_pin: Fingerprint,
    server_opts: &TransportOptions,
    client_opts: &TransportOptions,
) -> Pair {
    let pin = ClientPin::from(client_pin);
    let (server, _) = server_endpoint(loopback(), server_cert, pin.clone(), server_opts).unwrap();
    let addr = server.local_addr().unwrap();
    let (client, _) = client_endpoint(addr, client_cert, server_pin, client_opts).unwrap();
    Pair { server, pin, client, addr }
}

async fn timed<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f).await.expect("timed out")
}

/// Runs connect and accept concurrently, returning both results.
async fn handshake(
    p: &Pair,
) -> (Result<quinn::Connection, TransportError>, Result<quinn::Connection, TransportError>) {
    timed(async { tokio::join!(connect(&p.client, p.addr), accept(&p.server, &p.pin)) }).await
}

/// Echo: the client sends bytes on a bidi stream, the server returns them reversed.
async fn exchange(client: &quinn::Connection, server: &quinn::Connection, payload: &[u8]) {
    let server_side = async {
        let (mut send, mut recv) = server.accept_bi().await.unwrap();
        let mut got = recv.read_to_end(usize::MAX).await.unwrap();
        got.reverse();
        send.write_all(&got).await.unwrap();
        send.finish().unwrap();
        // Keep the connection until the client has read everything.
        let _ = send.stopped().await;
    };
    let client_side = async {
        let (mut send, mut recv) = client.open_bi().await.unwrap();
        send.write_all(payload).await.unwrap();
        send.finish().unwrap();
        recv.read_to_end(usize::MAX).await.unwrap()
    };
    let ((), back) = timed(async { tokio::join!(server_side, client_side) }).await;
    let mut expected = payload.to_vec();
    expected.reverse();
    assert_eq!(back, expected);
}

fn assert_handshake_error(err: &TransportError, side: &str) {
    assert!(
        matches!(err, TransportError::Handshake(_)),
        "{side}: expected a TLS handshake error, got {err:?}"
    );
}

#[tokio::test]
async fn pinned_peers_connect_and_exchange_bytes() {
    let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let o = opts(None);
    let p = pair(&s, c.fingerprint(), &c, s.fingerprint(), &o, &o);
    let (client, server) = handshake(&p).await;
    let (client, server) = (client.unwrap(), server.unwrap());

    // Each side sees exactly the certificate it pinned, and ALPN agreed on soku/1.
    let peer_cert = |conn: &quinn::Connection| {
        let certs = conn
            .peer_identity()
            .unwrap()
            .downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
            .unwrap();
        Fingerprint::of_der(&certs[0])
    };
    assert_eq!(peer_cert(&client), s.fingerprint());
    assert_eq!(peer_cert(&server), c.fingerprint());
    let alpn = server
        .handshake_data()
        .unwrap()
        .downcast::<quinn::crypto::rustls::HandshakeData>()
        .unwrap()
        .protocol;
    assert_eq!(alpn.as_deref(), Some(ALPN));

    exchange(&client, &server, b"hello over pinned quic").await;
}

/// `soku serve` opens its endpoint before it has read the client's hello, and a QUIC
/// client's handshake may come before the hello: it completes, the connection is held
/// back until the pin is set, and kept only if the pin names the client's certificate.
#[tokio::test]
async fn a_client_before_its_pin_is_kept_only_if_the_pin_names_it() {
    let (s, c, rogue) = (
        Identity::generate().unwrap(),
        Identity::generate().unwrap(),
        Identity::generate().unwrap(),
    );
    for (presented, served) in [(&c, true), (&rogue, false)] {
        let pin = ClientPin::unset();
        let (server, _) = server_endpoint(loopback(), &s, pin.clone(), &opts(None)).unwrap();
        let addr = server.local_addr().unwrap();
        let (client, _) = client_endpoint(addr, presented, s.fingerprint(), &opts(None)).unwrap();
        let accepting = tokio::spawn({
            let (server, pin) = (server.clone(), pin.clone());
            async move { accept(&server, &pin).await }
        });
        let conn = timed(connect(&client, addr)).await.expect("the handshake waits for no pin");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!accepting.is_finished(), "a connection was handed over before its pin");

        assert!(pin.set(c.fingerprint()));
        assert!(!pin.set(s.fingerprint()), "a pin never changes");
        let accepted = timed(accepting).await.unwrap();
        if served {
            exchange(&conn, &accepted.unwrap(), b"pinned after the handshake").await;
            continue;
        }
        assert!(matches!(accepted, Err(TransportError::NotPinned)), "{accepted:?}");
        let closed = timed(conn.closed()).await;
        let quinn::ConnectionError::ApplicationClosed(close) = &closed else {
            panic!("the rogue's connection ended otherwise: {closed}");
        };
        assert_eq!(close.error_code, NOT_PINNED.into());
    }
}

/// Security suite: a server pinned to client A refuses client B, even though B's
/// certificate is otherwise perfectly valid and B pins the right server.
#[tokio::test]
async fn rogue_client_certificate_is_refused() {
    let (s, a, b) = (
        Identity::generate().unwrap(),
        Identity::generate().unwrap(),
        Identity::generate().unwrap(),
    );
    let o = opts(None);
    let p = pair(&s, a.fingerprint(), &b, s.fingerprint(), &o, &o);
    let (client, server) = handshake(&p).await;

    let server_err = server.unwrap_err();
    assert_handshake_error(&server_err, "server");
    assert!(server_err.to_string().contains("does not match the pinned"), "{server_err}");

    // The client finished its half before the server judged it; the refusal arrives as
    // a TLS-coded close, on connect or on the connection.
    let client_err = match client {
        Err(e) => e,
        Ok(conn) => TransportError::from(timed(conn.closed()).await),
    };
    assert_handshake_error(&client_err, "client");
}

/// Security suite: a client pinned to server X refuses server Y.
#[tokio::test]
async fn rogue_server_certificate_is_refused() {
    let (x, y, c) = (
        Identity::generate().unwrap(),
        Identity::generate().unwrap(),
        Identity::generate().unwrap(),
    );
    let o = opts(None);
    // Server Y accepts our client, but the client expects X.
    let p = pair(&y, c.fingerprint(), &c, x.fingerprint(), &o, &o);
    let (client, server) = handshake(&p).await;

    let client_err = client.unwrap_err();
    assert_handshake_error(&client_err, "client");
    assert!(client_err.to_string().contains("does not match the pinned"), "{client_err}");
    assert_handshake_error(&server.unwrap_err(), "server");
}

/// A client presenting no certificate at all is refused: client auth is mandatory.
#[tokio::test]
async fn client_without_certificate_is_refused() {
    let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let pin = ClientPin::from(c.fingerprint());
    let (server, _) = server_endpoint(loopback(), &s, pin.clone(), &opts(None)).unwrap();
    let addr = server.local_addr().unwrap();

    // A client built by hand: right server pin, but no client certificate.
    let provider = std::sync::Arc::new(crate::cipher::provider(None));
    let verifier = crate::pinning::PinnedServerVerifier::new(
        s.fingerprint(),
        provider.signature_verification_algorithms,
    );
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(std::sync::Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut client = quinn::Endpoint::client(loopback()).unwrap();
    client.set_default_client_config(quinn::ClientConfig::new(std::sync::Arc::new(crypto)));

    let (client, server) =
        timed(async { tokio::join!(connect(&client, addr), accept(&server, &pin)) }).await;
    assert_handshake_error(&server.unwrap_err(), "server");
    let client_err = match client {
        Err(e) => e,
        Ok(conn) => TransportError::from(timed(conn.closed()).await),
    };
    assert_handshake_error(&client_err, "client");
}

/// Each `-c` name connects when the server allows only that suite and the client offers
/// all three, so the negotiated suite must be the one asked for.
#[tokio::test]
async fn each_cipher_connects_and_is_the_one_negotiated() {
    for name in ["aes128-gcm", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com"] {
        let cipher: Cipher = name.parse().unwrap();
        let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        for (server_opts, client_opts) in [
            (opts(Some(cipher)), opts(None)),
            (opts(None), opts(Some(cipher))),
            (opts(Some(cipher)), opts(Some(cipher))),
        ] {
            let p = pair(&s, c.fingerprint(), &c, s.fingerprint(), &server_opts, &client_opts);
            let (client, server) = handshake(&p).await;
            let (client, server) = (client.unwrap(), server.unwrap());
            exchange(&client, &server, name.as_bytes()).await;
        }
    }
}

/// The restriction is real: two sides restricted to different suites cannot agree.
#[tokio::test]
async fn disjoint_ciphers_do_not_connect() {
    let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let p = pair(
        &s,
        c.fingerprint(),
        &c,
        s.fingerprint(),
        &opts(Some(Cipher::Aes256Gcm)),
        &opts(Some(Cipher::Chacha20Poly1305)),
    );
    let (client, server) = handshake(&p).await;
    assert_handshake_error(&client.unwrap_err(), "client");
    assert_handshake_error(&server.unwrap_err(), "server");
}

#[tokio::test]
async fn endpoints_report_their_socket_buffers() {
    let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let (server, report) = server_endpoint(loopback(), &s, c.fingerprint(), &opts(None)).unwrap();
    assert_eq!(report.requested, REQUESTED_BUFFER);
    assert!(report.recv_buffer > 0 && report.send_buffer > 0);
    assert_eq!(
        report.warning.is_some(),
        report.recv_buffer < WARN_BELOW || report.send_buffer < WARN_BELOW
    );
    assert_ne!(server.local_addr().unwrap().port(), 0);
}

#[test]
fn endpoint_outside_a_runtime_is_an_error_not_a_panic() {
    let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let err = server_endpoint(loopback(), &s, c.fingerprint(), &opts(None)).unwrap_err();
    assert!(matches!(err, TransportError::NoRuntime), "{err:?}");
}

/// Many chunk-sized uni streams at once arrive intact (correctness only, not speed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_uni_streams_arrive_intact() {
    const STREAMS: usize = 64;
    const CHUNK: usize = 256 << 10;
    let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let o = opts(None);
    let p = pair(&s, c.fingerprint(), &c, s.fingerprint(), &o, &o);
    let (client, server) = handshake(&p).await;
    let (client, server) = (client.unwrap(), server.unwrap());

    let chunk = |i: usize| -> Vec<u8> { (0..CHUNK).map(|j| (i * 31 + j * 7) as u8).collect() };
    let send = async {
        let mut tasks = Vec::new();
        for i in 0..STREAMS {
            let conn = client.clone();
            let data = chunk(i);
            tasks.push(tokio::spawn(async move {
                let mut s = conn.open_uni().await.unwrap();
                s.write_all(&(i as u32).to_be_bytes()).await.unwrap();
                s.write_all(&data).await.unwrap();
                s.finish().unwrap();
                s.stopped().await.unwrap();
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    };
    let recv = async {
        let mut seen = [false; STREAMS];
        for _ in 0..STREAMS {
            let mut r = server.accept_uni().await.unwrap();
            let body = r.read_to_end(CHUNK + 4).await.unwrap();
            let i = u32::from_be_bytes(body[..4].try_into().unwrap()) as usize;
            assert_eq!(&body[4..], &chunk(i)[..], "stream {i}");
            assert!(!std::mem::replace(&mut seen[i], true));
        }
    };
    timed(async { tokio::join!(send, recv) }).await;
}

/// Path MTU discovery climbs past Ethernet's 1472 bytes where the path allows it
/// (loopback: 65536). Regression: quinn's default endpoint config advertised 1472 as our
/// maximum UDP payload, so discovery stopped there and every loopback/jumbo transfer paid
/// four times the per-packet cost while `MTU_UPPER_BOUND` claimed otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtu_discovery_rises_above_ethernet_on_loopback() {
    let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let o = opts(None);
    let p = pair(&s, c.fingerprint(), &c, s.fingerprint(), &o, &o);
    let (client, server) = handshake(&p).await;
    let (client, server) = (client.unwrap(), server.unwrap());
    // Discovery runs in the background once the handshake is confirmed; traffic lets
    // the probes out. Then full-sized batches must keep flowing at that MTU: a batch
    // that one UDP send cannot carry fails, and quinn reads that as a black hole and
    // drops to 1200 bytes (the GSO splitting in `gso.rs` prevents it). Bounded: 60
    // exchanges of 256 KiB.
    let mut mtu = client.stats().path.current_mtu;
    for _ in 0..60 {
        exchange(&client, &server, &[7u8; 256 << 10]).await;
        mtu = client.stats().path.current_mtu;
        if mtu <= 1472 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let stats = client.stats().path;
    assert_eq!(stats.black_holes_detected, 0, "{stats:?}");
    assert!(mtu > 1472, "path MTU stayed at {mtu} on loopback");
    assert!(mtu <= crate::config::LOOPBACK_MTU_UPPER_BOUND, "path MTU {mtu} above our bound");
    // Above 6 550 bytes, a batch of 10 exceeds one UDP send: this exercises `gso.rs`.
    assert!(mtu > 6550, "path MTU {mtu}: loopback should reach the loopback bound");
}

/// NAT rebinding: the client's address changes under a running transfer (its NAT
/// gives it a new port, or it moves to another network). The server takes the new
/// address after validating it (RFC 9000 §9) and the transfer completes intact.
#[tokio::test]
async fn a_transfer_survives_the_client_address_changing() {
    let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let o = opts(None);
    let p = pair(&s, c.fingerprint(), &c, s.fingerprint(), &o, &o);
    let (client, server) = handshake(&p).await;
    let (client, server) = (client.unwrap(), server.unwrap());
    let before = server.remote_address();
    let payload: Vec<u8> = (0..16u32 << 20).map(|i| (i % 251) as u8).collect();
    let expected = payload.clone();
    let sending = tokio::spawn({
        let client = client.clone();
        async move {
            let mut send = client.open_uni().await.unwrap();
            send.write_all(&payload).await.unwrap();
            send.finish().unwrap();
            let _ = send.stopped().await;
        }
    });
    let mut recv = timed(server.accept_uni()).await.unwrap();
    let mut got = vec![0u8; 4 << 20];
    timed(recv.read_exact(&mut got)).await.unwrap();
    // A quarter through: the client's packets now come from a new port.
    let socket = std::net::UdpSocket::bind(loopback()).unwrap();
    let moved_to = socket.local_addr().unwrap();
    p.client.rebind(socket).unwrap();
    let rest = timed(recv.read_to_end(usize::MAX)).await.unwrap();
    got.extend_from_slice(&rest);
    timed(sending).await.unwrap();
    assert!(got == expected, "the bytes arrived intact");
    assert_ne!(before.port(), moved_to.port());
    assert_eq!(server.remote_address(), moved_to, "the server follows the new address");
}

/// Datagrams from anyone at the server's port (garbage, truncated headers, a flood) are
/// dropped without disturbing it: the pinned client still connects and exchanges bytes.
#[tokio::test]
async fn random_datagrams_at_the_server_port_change_nothing() {
    let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let o = opts(None);
    let p = pair(&s, c.fingerprint(), &c, s.fingerprint(), &o, &o);
    let noise = std::net::UdpSocket::bind(loopback()).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut datagram = vec![0u8; 1500];
    for n in 0..5000usize {
        for b in datagram.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        // Some look like QUIC long headers (first bit set), of every length.
        datagram[0] |= (n % 2 == 0) as u8 * 0xc0;
        let _ = noise.send_to(&datagram[..1 + n % 1500], p.addr);
    }
    let (client, server) = handshake(&p).await;
    exchange(&client.unwrap(), &server.unwrap(), b"still here").await;
}

/// A client that remembers the path's RTT resends a lost first Initial after three of
/// it, not after quinn's default of three times 333 ms. The first Initial is lost by
/// arriving before the server's endpoint is up: a plain socket on the port takes it.
#[tokio::test]
async fn a_remembered_rtt_resends_a_lost_first_initial_sooner() {
    let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    for (expected_rtt, at_least, under) in [
        (None, Duration::from_millis(900), LIMIT),
        (Some(Duration::from_millis(20)), Duration::ZERO, Duration::from_millis(600)),
    ] {
        let hole = tokio::net::UdpSocket::bind(loopback()).await.unwrap();
        let addr = hole.local_addr().unwrap();
        let client_opts = TransportOptions { expected_rtt, ..opts(None) };
        let (client, _) = client_endpoint(addr, &c, s.fingerprint(), &client_opts).unwrap();
        let started = std::time::Instant::now();
        let connecting =
            tokio::spawn(async move { connect(&client, addr).await.map(|conn| (client, conn)) });
        let mut first = [0u8; 2048];
        timed(hole.recv_from(&mut first)).await.unwrap();
        drop(hole);
        let pin = ClientPin::from(c.fingerprint());
        let (server, _) = server_endpoint(addr, &s, pin.clone(), &opts(None)).unwrap();
        let accepted = timed(accept(&server, &pin)).await.unwrap();
        let (_client, conn) = timed(connecting).await.unwrap().unwrap();
        let took = started.elapsed();
        exchange(&conn, &accepted, b"after a lost Initial").await;
        assert!(took >= at_least && took < under, "{expected_rtt:?}: connected in {took:?}");
    }
}

/// Forwards datagrams between a client and `server` on loopback, losing the client's
/// first; returns the address the client connects to. The handshake's datagrams only:
/// GSO batches after it would arrive as one oversized datagram.
async fn losing_the_first_datagram(
    server: SocketAddr,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let facing_client = tokio::net::UdpSocket::bind(loopback()).await.unwrap();
    let facing_server = tokio::net::UdpSocket::bind(loopback()).await.unwrap();
    let addr = facing_client.local_addr().unwrap();
    let relay = tokio::spawn(async move {
        let (mut up, mut down) = (vec![0u8; 65_536], vec![0u8; 65_536]);
        let (mut client, mut lost_one) = (None, false);
        loop {
            tokio::select! {
                Ok((len, from)) = facing_client.recv_from(&mut up) => {
                    client = Some(from);
                    if lost_one {
                        let _ = facing_server.send_to(&up[..len], server).await;
                    }
                    lost_one = true;
                }
                Ok((len, _)) = facing_server.recv_from(&mut down) => {
                    if let Some(client) = client {
                        let _ = facing_client.send_to(&down[..len], client).await;
                    }
                }
            }
        }
    });
    (addr, relay)
}

/// A client's first Initial leaves twice: losing one copy costs no probe timeout
/// (quinn's first is three times 333 ms).
#[tokio::test]
async fn a_lost_first_initial_is_made_good_by_its_copy() {
    let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let pin = ClientPin::from(c.fingerprint());
    let (server, _) = server_endpoint(loopback(), &s, pin.clone(), &opts(None)).unwrap();
    let (relay_addr, relay) = losing_the_first_datagram(server.local_addr().unwrap()).await;
    let (client, _) = client_endpoint(relay_addr, &c, s.fingerprint(), &opts(None)).unwrap();
    let started = std::time::Instant::now();
    let (conn, accepted) =
        timed(async { tokio::join!(connect(&client, relay_addr), accept(&server, &pin)) }).await;
    let took = started.elapsed();
    relay.abort();
    assert!(conn.is_ok() && accepted.is_ok(), "{conn:?} {accepted:?}");
    assert!(took < Duration::from_millis(600), "connected in {took:?}");
}
