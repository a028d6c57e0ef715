//! A real `quinn_proto::RttEstimator` for the simulator.
//!
//! quinn-proto exposes no constructor for `RttEstimator`, yet `Controller::on_ack`
//! takes one. We run one in-memory QUIC handshake on a virtual clock whose one-way
//! delay is half the wanted RTT, with a client controller that copies the estimator
//! it is handed. Its smoothed RTT is then the path's RTT, which is what quinn's CUBIC
//! reads (`rtt.get()`); soku's controller ignores it and measures `now - sent`.

use std::net::{Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::congestion::{Controller, ControllerFactory, NewRenoConfig};
use quinn_proto::{
    ClientConfig, ConnectionHandle, DatagramEvent, Endpoint, EndpointConfig, RttEstimator,
    ServerConfig, TransportConfig,
};

type Slot = Arc<Mutex<Option<RttEstimator>>>;

struct Capture {
    slot: Slot,
}

impl ControllerFactory for Capture {
    fn build(self: Arc<Self>, now: Instant, mtu: u16) -> Box<dyn Controller> {
        let inner = Arc::new(NewRenoConfig::default()).build(now, mtu);
        Box::new(Capturing { slot: self.slot.clone(), inner })
    }
}

struct Capturing {
    slot: Slot,
    inner: Box<dyn Controller>,
}

impl Controller for Capturing {
    fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, al: bool, rtt: &RttEstimator) {
        *self.slot.lock().unwrap() = Some(*rtt);
        self.inner.on_ack(now, sent, bytes, al, rtt);
    }
    fn on_congestion_event(&mut self, now: Instant, sent: Instant, p: bool, lost: u64) {
        self.inner.on_congestion_event(now, sent, p, lost);
    }
    fn on_mtu_update(&mut self, mtu: u16) {
        self.inner.on_mtu_update(mtu);
    }
    fn window(&self) -> u64 {
        self.inner.window()
    }
    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(Capturing { slot: self.slot.clone(), inner: self.inner.clone_box() })
    }
    fn initial_window(&self) -> u64 {
        self.inner.initial_window()
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

/// An estimator whose smoothed RTT is about `rtt`, from a handshake over a virtual path.
pub fn estimator(rtt: Duration) -> RttEstimator {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let key = rustls_key(&cert);
    let cert_der = cert.cert.der().clone();
    let server_config = ServerConfig::with_single_cert(vec![cert_der.clone()], key).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der).unwrap();
    let mut client_config = ClientConfig::with_root_certificates(Arc::new(roots)).unwrap();
    let slot: Slot = Arc::new(Mutex::new(None));
    let mut transport = TransportConfig::default();
    transport.congestion_controller_factory(Arc::new(Capture { slot: slot.clone() }));
    client_config.transport_config(Arc::new(transport));

    let server_addr = SocketAddr::from((Ipv6Addr::LOCALHOST, 4433));
    let client_addr = SocketAddr::from((Ipv6Addr::LOCALHOST, 5544));
    let ep_config = Arc::new(EndpointConfig::default());
    let mut server =
        Endpoint::new(ep_config.clone(), Some(Arc::new(server_config)), false, Some([1; 32]));
    let mut client = Endpoint::new(ep_config, None, false, Some([2; 32]));

    let one_way = rtt / 2;
    let mut now = Instant::now();
    let (cch, mut cconn) = client.connect(now, client_config, server_addr, "localhost").unwrap();
    let mut sconn: Option<(ConnectionHandle, quinn_proto::Connection)> = None;
    let mut buf = Vec::new();
    for _ in 0..20 {
        // Client -> server.
        let mut to_server = Vec::new();
        while let Some(t) = cconn.poll_transmit(now, 1, &mut buf) {
            to_server.push(BytesMut::from(&buf[..t.size]));
            buf.clear();
        }
        while let Some(ev) = cconn.poll_endpoint_events() {
            if let Some(ce) = client.handle_event(cch, ev) {
                cconn.handle_event(ce);
            }
        }
        now += one_way;
        for d in to_server {
            let mut resp = Vec::new();
            match server.handle(now, client_addr, None, None, d, &mut resp) {
                Some(DatagramEvent::NewConnection(incoming)) => {
                    let mut b = Vec::new();
                    sconn = Some(server.accept(incoming, now, &mut b, None).unwrap());
                }
                Some(DatagramEvent::ConnectionEvent(_, ev)) => {
                    if let Some((_, c)) = sconn.as_mut() {
                        c.handle_event(ev);
                    }
                }
                _ => {}
            }
        }
        // Server -> client.
        let mut to_client = Vec::new();
        if let Some((sch, c)) = sconn.as_mut() {
            while let Some(t) = c.poll_transmit(now, 1, &mut buf) {
                to_client.push(BytesMut::from(&buf[..t.size]));
                buf.clear();
            }
            while let Some(ev) = c.poll_endpoint_events() {
                if let Some(ce) = server.handle_event(*sch, ev) {
                    c.handle_event(ce);
                }
            }
        }
        now += one_way;
        for d in to_client {
            let mut resp = Vec::new();
            if let Some(DatagramEvent::ConnectionEvent(_, ev)) =
                client.handle(now, server_addr, None, None, d, &mut resp)
            {
                cconn.handle_event(ev);
            }
        }
        if let Some(e) = *slot.lock().unwrap() {
            if !cconn.is_handshaking() {
                return e;
            }
        }
    }
    let captured = *slot.lock().unwrap();
    captured.expect("handshake produced an RTT sample")
}

fn rustls_key(
    cert: &rcgen::CertifiedKey<rcgen::KeyPair>,
) -> rustls::pki_types::PrivateKeyDer<'static> {
    rustls::pki_types::PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()).into()
}
