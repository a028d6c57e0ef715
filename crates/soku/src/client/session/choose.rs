//! Choosing the data path (`--transport`). `auto`: QUIC and TLS over TCP are tried at
//! once; QUIC wins if its handshake completes, TCP once QUIC has had [`QUIC_GRACE`]
//! beyond the time TCP took (UDP blocked or lost), and the ssh channel when neither
//! gets through. `quic` and `tcp` try only that and fail with the reason; `ssh` asks
//! for the ssh channel.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use soku_transport::{
    Fingerprint, Identity, SocketReport, TcpConnector, TcpReport, TransportOptions,
};
use tokio::time::Instant;

use super::options::SessionOptions;
use super::race::{race, Goal};
use crate::carrier::tcp_path::{self, TcpConnections};
use crate::cli::transport_mode::TransportMode;
use crate::client::path_board;

/// How long QUIC may still take once TCP has connected, beyond the time TCP took. A
/// QUIC client resends a lost Initial after 1 s (three times the 333 ms initial RTT,
/// RFC 9002 §6.2.2) and its handshake takes one round trip where TCP's and TLS's take
/// two: so a path that lost one Initial still gets QUIC, and a path that drops UDP
/// moves to TCP 1.2 s after TCP was up (about 1.5 s in all at 100 ms).
pub const QUIC_GRACE: Duration = Duration::from_millis(1200);

/// What the server offered, and what we need to take it up.
pub struct Offer<'a> {
    pub identity: &'a Identity,
    pub server: Fingerprint,
    pub server_addr: Option<IpAddr>,
    pub udp_port: u16,
    pub tcp_port: u16,
}

/// A finished QUIC handshake and the endpoint that made it.
pub struct QuicWon {
    pub endpoint: quinn::Endpoint,
    pub report: SocketReport,
    pub conn: quinn::Connection,
    pub addr: SocketAddr,
}

/// A session's TCP connections, all up.
pub struct TcpWon {
    pub conns: TcpConnections<soku_transport::TlsClientStream>,
    pub report: TcpReport,
    pub addr: SocketAddr,
    /// How long connecting took.
    pub took: Duration,
}

/// The data path chosen, and why when it is not the first choice.
pub enum Chosen {
    /// QUIC; in auto mode with the TCP attempt that raced it (see [`TcpCheck`]).
    Quic(QuicWon, Option<TcpCheck>),
    Tcp(Box<TcpWon>, Option<String>),
    Ssh(String),
}

/// Whether TCP got through too, found out after QUIC won: a copy over QUIC moves to TCP
/// only if it does (see `carrier/policing.rs`).
pub type TcpCheck = tokio::task::JoinHandle<bool>;

/// Chooses the data path; an error only when a forced transport does not get through.
pub async fn choose(offer: &Offer<'_>, opts: &SessionOptions) -> Result<Chosen, String> {
    let deadline = Instant::now() + opts.quic_timeout;
    match opts.mode {
        TransportMode::Ssh => {
            Ok(Chosen::Ssh("the data was asked to move over the ssh channel".into()))
        }
        TransportMode::Quic => {
            try_quic(offer, opts, deadline).await.map(|won| Chosen::Quic(won, None))
        }
        TransportMode::Tcp => {
            try_tcp(offer, opts, deadline).await.map(|won| Chosen::Tcp(Box::new(won), None))
        }
        TransportMode::Auto => Ok(auto(offer, opts, deadline).await),
    }
}

async fn auto(offer: &Offer<'_>, opts: &SessionOptions, deadline: Instant) -> Chosen {
    let quic = try_quic(offer, opts, deadline);
    tokio::pin!(quic);
    let mut tcp = Box::pin(try_tcp(offer, opts, deadline));
    let mut quic_failed: Option<String> = None;
    let mut tcp_failed: Option<String> = None;
    let mut tcp_up: Option<TcpWon> = None;
    let mut grace_until = deadline;
    loop {
        tokio::select! {
            done = &mut quic, if quic_failed.is_none() => match done {
                Ok(won) => {
                    // QUIC's one round trip usually beats TCP's and TLS's two: let TCP
                    // finish in the background, only to know whether it gets through.
                    let check = if tcp_up.is_some() {
                        Some(tokio::spawn(async { true }))
                    } else if tcp_failed.is_some() || offer.tcp_port == 0 {
                        None
                    } else {
                        Some(tokio::spawn(async move { tcp.await.is_ok() }))
                    };
                    return Chosen::Quic(won, check);
                }
                Err(why) => {
                    if let Some(won) = tcp_up.take() {
                        return Chosen::Tcp(Box::new(won), Some(why));
                    }
                    if let Some(tcp_why) = &tcp_failed {
                        return Chosen::Ssh(format!("{why}; {tcp_why}"));
                    }
                    quic_failed = Some(why);
                }
            },
            done = &mut tcp, if tcp_up.is_none() && tcp_failed.is_none() => match done {
                Ok(won) => {
                    if let Some(why) = quic_failed.take() {
                        return Chosen::Tcp(Box::new(won), Some(why));
                    }
                    grace_until = (Instant::now() + QUIC_GRACE + won.took).min(deadline);
                    tcp_up = Some(won);
                }
                Err(why) => {
                    if let Some(quic_why) = &quic_failed {
                        return Chosen::Ssh(format!("{quic_why}; {why}"));
                    }
                    tcp_failed = Some(why);
                }
            },
            () = tokio::time::sleep_until(grace_until), if tcp_up.is_some() => {
                let Some(won) = tcp_up.take() else { continue };
                let why = format!(
                    "no QUIC handshake {:.1} s after TCP connected in {:.1} s (UDP blocked?)",
                    QUIC_GRACE.as_secs_f64() + won.took.as_secs_f64(),
                    won.took.as_secs_f64()
                );
                return Chosen::Tcp(Box::new(won), Some(why));
            }
        }
    }
}

async fn try_quic(
    offer: &Offer<'_>,
    opts: &SessionOptions,
    deadline: Instant,
) -> Result<QuicWon, String> {
    if offer.udp_port == 0 {
        return Err("the remote soku has no QUIC endpoint".into());
    }
    let goal = Goal { what: "QUIC handshake", hint: " (UDP blocked?)" };
    let attempt = |addr: SocketAddr| {
        // The controller shares its min RTT with the other copies to this address.
        let transport =
            TransportOptions { board: path_board::slot_for(addr.ip()), ..opts.transport.clone() };
        let made = soku_transport::client_endpoint(addr, offer.identity, offer.server, &transport)
            .map_err(|e| e.to_string());
        async move {
            let (endpoint, report) = made?;
            let conn = soku_transport::connect(&endpoint, addr)
                .await
                .map_err(|e| format!("QUIC to {addr} failed: {e}"))?;
            Ok((endpoint, report, conn))
        }
    };
    let ((endpoint, report, conn), addr) =
        race(goal, offer.server_addr, &opts.host, offer.udp_port, deadline, attempt).await?;
    Ok(QuicWon { endpoint, report, conn, addr })
}

/// Connects the session's TCP connections; owns what it needs, so that it can finish in
/// the background after QUIC won.
fn try_tcp(
    offer: &Offer<'_>,
    opts: &SessionOptions,
    deadline: Instant,
) -> impl std::future::Future<Output = Result<TcpWon, String>> + Send + 'static {
    let started = Instant::now();
    let connector =
        TcpConnector::new(offer.identity, offer.server, &opts.transport).map_err(|e| e.to_string());
    let (server_addr, port, host) = (offer.server_addr, offer.tcp_port, opts.host.clone());
    async move {
        if port == 0 {
            return Err("the remote soku has no TCP port".to_string());
        }
        let connector = connector?;
        let goal = Goal { what: "TCP connection", hint: " (TCP blocked?)" };
        let attempt = |addr: SocketAddr| {
            let connector = connector.clone();
            async move { tcp_path::connect(&connector, addr, tcp_path::lanes()).await }
        };
        let ((conns, report), addr) =
            race(goal, server_addr, &host, port, deadline, attempt).await?;
        Ok(TcpWon { conns, report, addr, took: started.elapsed() })
    }
}

#[cfg(test)]
mod tests {
    use soku_transport::TransportOptions;

    use super::*;

    fn options(mode: TransportMode, quic_timeout: Duration) -> SessionOptions {
        SessionOptions::for_command(mode, "127.0.0.1".into(), quic_timeout)
    }

    /// The server's reported address does not answer (as behind NAT: it reports its
    /// private address); the host name's address does, and wins the race.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn host_name_wins_when_the_reported_address_is_silent() {
        let (server_id, client_id) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let (server, _) = soku_transport::server_endpoint(
            "127.0.0.1:0".parse().unwrap(),
            &server_id,
            client_id.fingerprint(),
            &TransportOptions::default(),
        )
        .unwrap();
        let port = server.local_addr().unwrap().port();
        let pin = client_id.fingerprint().into();
        let accepting = tokio::spawn(async move { soku_transport::accept(&server, &pin).await });
        // 127.0.0.2 is local on Linux but nothing listens there on this port.
        let offer = Offer {
            identity: &client_id,
            server: server_id.fingerprint(),
            server_addr: Some("127.0.0.2".parse().unwrap()),
            udp_port: port,
            tcp_port: 0,
        };
        let opts = options(TransportMode::Quic, Duration::from_secs(4));
        let Ok(Chosen::Quic(won, _)) = choose(&offer, &opts).await else {
            panic!("no QUIC through the host name");
        };
        assert_eq!(won.addr, SocketAddr::from(([127, 0, 0, 1], port)));
        assert!(accepting.await.unwrap().is_ok());
        soku_transport::close(&won.conn, 0, b"");
    }

    /// Nothing answers anywhere: the error names what was tried, within the timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn silence_everywhere_is_a_timeout_naming_the_addresses() {
        let (server_id, client_id) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let silent_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = silent_socket.local_addr().unwrap().port();
        let offer = Offer {
            identity: &client_id,
            server: server_id.fingerprint(),
            server_addr: None,
            udp_port: port,
            tcp_port: 0,
        };
        let opts = options(TransportMode::Quic, Duration::from_millis(800));
        let started = std::time::Instant::now();
        let Err(err) = choose(&offer, &opts).await.map(|_| ()) else { panic!("connected") };
        assert!(err.contains("no QUIC handshake with 127.0.0.1:"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    }

    /// UDP goes nowhere but TCP connects: auto moves to TCP once QUIC has had its
    /// grace, and says why.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn auto_takes_tcp_when_quic_is_silent() {
        let (server_id, client_id) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let silent_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tcp = soku_transport::TcpServer::bind(
            "127.0.0.1:0".parse().unwrap(),
            &server_id,
            client_id.fingerprint(),
            &TransportOptions::default(),
        )
        .unwrap();
        let tcp_port = tcp.local_addr().unwrap().port();
        let gathering = tokio::spawn(crate::carrier::tcp_path::gather(tcp));
        let offer = Offer {
            identity: &client_id,
            server: server_id.fingerprint(),
            server_addr: Some("127.0.0.1".parse().unwrap()),
            udp_port: silent_socket.local_addr().unwrap().port(),
            tcp_port,
        };
        let opts = options(TransportMode::Auto, Duration::from_secs(6));
        let started = std::time::Instant::now();
        let Ok(Chosen::Tcp(won, Some(why))) = choose(&offer, &opts).await else {
            panic!("auto did not take TCP with a reason");
        };
        let took = started.elapsed();
        assert!(why.contains("no QUIC handshake"), "{why}");
        assert_eq!(won.conns.lanes.len(), usize::from(tcp_path::lanes()));
        // TCP on loopback is up at once; the switch comes after the grace, well before
        // the QUIC timeout.
        assert!(took >= QUIC_GRACE && took < Duration::from_secs(4), "took {took:?}");
        let gathered = gathering.await.unwrap();
        assert_eq!(gathered.lanes.len(), usize::from(tcp_path::lanes()));
    }
}
