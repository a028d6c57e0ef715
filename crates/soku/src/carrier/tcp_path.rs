//! TLS over TCP for one session: the client opens a control connection and
//! [`DEFAULT_LANES`] chunk connections to the server's TCP port, each starting with a
//! [`TcpPreface`]; the server gathers them. The copy then runs over a striped link
//! (`soku_engine::link::striped`). Only the client whose certificate fingerprint came
//! over ssh gets past TLS, so strangers connecting to the port are dropped unheard.

use std::net::SocketAddr;
use std::time::Duration;

use soku_engine::link::{self, Link};
use soku_proto::hello::TcpPreface;
use soku_transport::{
    Chronographs, Gauged, TcpConnector, TcpReport, TcpServer, TlsClientStream, TlsServerStream,
    HANDSHAKE_TIMEOUT,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::task::JoinSet;

/// Chunk connections beside the control connection, at most: under BBR the striped link
/// starts on one and opens the others as their buffers need them. Four is the knee of
/// `lab/2026-11-24-transport`, where these figures come from (unprivileged, default sysctls,
/// 1 Gbit/s x 100 ms: 1 lane 36 % of the link, 2 lanes 60 %, 4 lanes 69 %, 8 lanes 70 %;
/// as root, with forced buffers, the count made no difference).
pub const DEFAULT_LANES: u8 = 4;

/// The chunk connections a client opens: [`DEFAULT_LANES`], unless `SOKU_TCP_LANES`
/// (1-16) says otherwise. That variable is a measurement switch for the benchmarks that
/// chose the default, like `SOKU_CC`; not a tuning knob.
pub fn lanes() -> u8 {
    std::env::var("SOKU_TCP_LANES")
        .ok()
        .and_then(|v| v.parse::<u8>().ok())
        .filter(|n| (1..=16).contains(n))
        .unwrap_or(DEFAULT_LANES)
}

/// Connections whose TLS handshake may be under way at once on the server: a session
/// needs `lanes + 1`; strangers beyond this wait in the listen backlog.
const MAX_PENDING_HANDSHAKES: usize = 32;

/// A session's connections, in their roles.
pub struct TcpConnections<S> {
    /// The control connection.
    pub control: S,
    /// The chunk connections.
    pub lanes: Vec<S>,
}

impl<S: AsyncRead + AsyncWrite + Chronographs + Send + Unpin + 'static> TcpConnections<S> {
    /// The striped link over these connections. Under BBR the chunk connections are
    /// used as their buffers call for them (`soku_engine::link::striped`); under a
    /// controller that halves its window at a loss (CUBIC), all of them from the start,
    /// so a loss slows only a share of the data.
    pub fn into_link(self, report: &TcpReport) -> Link {
        // The control connection is wrapped too only to have the lanes' type.
        let control = tokio::io::split(Gauged::new(self.control).0);
        let (lanes, gauges): (Vec<_>, Vec<_>) = self
            .lanes
            .into_iter()
            .map(|lane| {
                let (lane, times) = Gauged::new(lane);
                (tokio::io::split(lane), times)
            })
            .unzip();
        let gauges = if report.has_bbr() { gauges } else { Vec::new() };
        link::striped::link(control, lanes, gauges)
    }
}

/// Opens the control connection and `lanes` chunk connections to `addr` at once, each
/// with its preface; the report is the control connection's.
pub async fn connect(
    connector: &TcpConnector,
    addr: SocketAddr,
    lanes: u8,
) -> Result<(TcpConnections<TlsClientStream>, TcpReport), String> {
    let mut opening = JoinSet::new();
    for index in 0..=lanes {
        let connector = connector.clone();
        opening.spawn(async move {
            let (mut tls, report) =
                connector.connect(addr).await.map_err(|e| format!("TCP to {addr}: {e}"))?;
            let preface = TcpPreface { index, lanes }.to_bytes();
            let sent = async {
                tls.write_all(&preface).await?;
                tls.flush().await
            };
            sent.await.map_err(|e| format!("TCP to {addr}: {e}"))?;
            Ok::<_, String>((index, tls, report))
        });
    }
    let mut slots: Vec<Option<TlsClientStream>> = (0..=lanes).map(|_| None).collect();
    let mut control_report = None;
    while let Some(done) = opening.join_next().await {
        let (index, tls, report) = done.map_err(|e| format!("TCP attempt ended: {e}"))??;
        if index == 0 {
            control_report = Some(report);
        }
        slots[usize::from(index)] = Some(tls);
    }
    let mut slots = slots.into_iter().map(|slot| slot.ok_or("a TCP connection is missing"));
    let control = slots.next().ok_or("no TCP control connection")??;
    let lanes = slots.collect::<Result<Vec<_>, _>>()?;
    let report = control_report.ok_or("no TCP control connection")?;
    Ok((TcpConnections { control, lanes }, report))
}

/// Accepts connections until one client has opened its control connection and all its
/// chunk connections. Connections that fail TLS (strangers) or send no valid preface
/// within [`HANDSHAKE_TIMEOUT`] are dropped and do not count. The caller bounds the
/// whole wait.
pub async fn gather(server: TcpServer) -> TcpConnections<TlsServerStream> {
    let handshaker = server.handshaker();
    let mut pending: JoinSet<Option<(TcpPreface, TlsServerStream)>> = JoinSet::new();
    let mut control = None;
    let mut lanes: Vec<Option<TlsServerStream>> = Vec::new();
    loop {
        tokio::select! {
            accepted = server.accept(), if pending.len() < MAX_PENDING_HANDSHAKES => {
                let Ok((tcp, _from)) = accepted else {
                    // A transient accept error (EMFILE, ECONNABORTED): wait a little.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let handshaker = handshaker.clone();
                pending.spawn(async move {
                    let mut tls = handshaker.handshake(tcp).await.ok()?;
                    let preface = tokio::time::timeout(HANDSHAKE_TIMEOUT, read_preface(&mut tls));
                    let preface = preface.await.ok()??;
                    Some((preface, tls))
                });
            }
            Some(done) = pending.join_next() => {
                let Ok(Some((preface, tls))) = done else { continue };
                if lanes.is_empty() {
                    lanes = (0..preface.lanes).map(|_| None).collect();
                } else if lanes.len() != usize::from(preface.lanes) {
                    // The pinned client never mixes counts; ignore what does not fit.
                    continue;
                }
                match preface.index {
                    0 => control = Some(tls),
                    n => lanes[usize::from(n) - 1] = Some(tls),
                }
                if control.is_some() && lanes.iter().all(Option::is_some) {
                    let (Some(control), lanes) = (control.take(), lanes.drain(..).flatten().collect())
                    else {
                        continue;
                    };
                    return TcpConnections { control, lanes };
                }
            }
        }
    }
}

async fn read_preface<R: AsyncRead + Unpin>(input: &mut R) -> Option<TcpPreface> {
    let mut bytes = [0u8; 2];
    input.read_exact(&mut bytes).await.ok()?;
    TcpPreface::from_bytes(bytes).ok()
}

#[cfg(test)]
mod tests {
    use soku_transport::{Identity, TransportOptions};

    use super::*;

    /// A stranger's connection (wrong certificate) and one that says nothing do not
    /// disturb the session's own connections, which are gathered in their roles.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sessions_connections_are_gathered_past_strangers() {
        let (server_id, client_id, stranger) = (
            Identity::generate().unwrap(),
            Identity::generate().unwrap(),
            Identity::generate().unwrap(),
        );
        let opts = TransportOptions::default();
        let server = TcpServer::bind(
            "127.0.0.1:0".parse().unwrap(),
            &server_id,
            client_id.fingerprint(),
            &opts,
        )
        .unwrap();
        let addr = server.local_addr().unwrap();
        let gathering = tokio::spawn(gather(server));
        let _silent = tokio::net::TcpStream::connect(addr).await.unwrap();
        let foreign = TcpConnector::new(&stranger, server_id.fingerprint(), &opts).unwrap();
        // TLS 1.3: the stranger finishes its side before the server refuses it, so its
        // connect may look fine from here; what matters is that nothing was gathered.
        let _ = connect(&foreign, addr, 2).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!gathering.is_finished(), "a stranger's connections were gathered");
        let ours = TcpConnector::new(&client_id, server_id.fingerprint(), &opts).unwrap();
        let (mut client, _report) = connect(&ours, addr, 2).await.expect("connects");
        let mut server = tokio::time::timeout(Duration::from_secs(10), gathering)
            .await
            .expect("gathered in time")
            .unwrap();
        assert_eq!(server.lanes.len(), 2);
        // Each connection is the one in the same role at the other end.
        for (n, (c, s)) in std::iter::once((&mut client.control, &mut server.control))
            .chain(client.lanes.iter_mut().zip(server.lanes.iter_mut()))
            .enumerate()
        {
            c.write_all(&[n as u8]).await.unwrap();
            c.flush().await.unwrap();
            let mut got = [0u8; 1];
            let read = tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut got));
            read.await.expect("the bytes arrive at the same role").unwrap();
            assert_eq!(got[0], n as u8);
        }
    }
}
