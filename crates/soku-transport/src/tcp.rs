//! TLS 1.3 over TCP: the data path for networks that block or throttle UDP.
//!
//! The same ephemeral certificates as QUIC, pinned the same way (`pinning.rs`), so
//! nobody but the two ends of this session can connect or listen in. What soku runs
//! over the streams (how many, which carries what) is the caller's business; this
//! module makes each one as fast as the kernel allows:
//!
//! - **Congestion control**: BBR where the kernel has it, asked for per socket
//!   (`TCP_CONGESTION`, tcp(7)); CUBIC halves its window at every loss and so gets a
//!   fraction of a long lossy path (Mathis et al., 1997), BBR does not.
//! - **Buffers**: a TCP window is bounded by the socket buffers. Linux autotunes them up
//!   to `net.ipv4.tcp_rmem`/`tcp_wmem`'s third value, and setting `SO_RCVBUF` or
//!   `SO_SNDBUF` turns autotuning off (tcp(7), socket(7)), capped by
//!   `net.core.rmem_max`/`wmem_max`, often far below. So: with CAP_NET_ADMIN the
//!   `*BUFFORCE` options give [`TCP_BUFFER`] outright; without, a size is set only
//!   where the capped size beats the autotuning ceiling, and autotuning is left alone
//!   elsewhere. The [`TcpReport`] says what each socket can reach, and
//!   [`TcpReport::warning`] what to raise when it is too little.
//! - `TCP_NODELAY`: soku batches its own writes; a control frame should not wait for
//!   the previous segment's ACK (RFC 896).

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use socket2::SockRef;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::identity::SERVER_NAME;
use crate::pinning::Early;
use crate::socket::{human, set_forced, sysctl_values};
use crate::sys;
use crate::tls::{client_tls, server_tls, TCP_ALPN};
use crate::{ClientPin, Fingerprint, Identity, TransportError, TransportOptions};

/// Socket buffer asked for in each direction: a 16 MiB window (Linux keeps half of a
/// buffer for its own bookkeeping), 1 Gbit/s x 128 ms on one connection.
pub const TCP_BUFFER: usize = 32 << 20;
/// The congestion controller asked for on every socket.
const PREFERRED_CONGESTION: &str = "bbr";
/// Below this much buffer summed over a session's connections the report warns: a
/// window of half of it carries 1 Gbit/s only up to ~64 ms, 100 Mbit/s up to ~640 ms.
const WARN_BELOW_TOTAL: usize = 16 << 20;
/// How long a TLS handshake over an accepted connection may take before it is dropped
/// (a stranger connecting and saying nothing must not hold a slot).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A client TLS stream over TCP.
pub type TlsClientStream = tokio_rustls::client::TlsStream<TcpStream>;
/// A server TLS stream over TCP.
pub type TlsServerStream = tokio_rustls::server::TlsStream<TcpStream>;

/// What a TCP socket got: its congestion controller and how far its buffers can grow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpReport {
    /// The congestion controller the kernel runs for the socket (`bbr`, `cubic`, ...).
    pub congestion: String,
    /// Most the send buffer can hold, in the kernel's accounting (about twice the data).
    pub send_ceiling: usize,
    /// Most the receive buffer can hold, in the kernel's accounting.
    pub recv_ceiling: usize,
    /// Whether the buffers were set (forced or capped) rather than left to autotuning.
    pub fixed_buffers: bool,
}

impl TcpReport {
    /// One line for `-v`: "bbr, buffers up to 64 MiB".
    pub fn describe(&self) -> String {
        format!(
            "{}, buffers up to {} ({})",
            self.congestion,
            human(self.send_ceiling.min(self.recv_ceiling)),
            if self.fixed_buffers { "set" } else { "autotuned" }
        )
    }

    /// Whether the kernel runs BBR for the socket, which a random loss does not slow.
    pub fn has_bbr(&self) -> bool {
        self.congestion == PREFERRED_CONGESTION
    }

    /// What to raise when `connections` such sockets cannot hold a long fat path's
    /// window, or that the kernel gave no BBR.
    pub fn warning(&self, connections: usize) -> Option<String> {
        if !sys::TCP_ADVICE_APPLIES {
            return None;
        }
        let mut problems = Vec::new();
        for (dir, ceiling, sysctl) in [
            ("send", self.send_ceiling, "net.ipv4.tcp_wmem"),
            ("receive", self.recv_ceiling, "net.ipv4.tcp_rmem"),
        ] {
            let total = ceiling.saturating_mul(connections);
            if total < WARN_BELOW_TOTAL {
                problems.push(format!(
                    "tcp {dir} buffers reach {} over {connections} connections: raise {sysctl} \
                     (e.g. sysctl -w {sysctl}='4096 131072 {TCP_BUFFER}')",
                    human(total)
                ));
            }
        }
        if self.congestion != PREFERRED_CONGESTION {
            problems.push(format!(
                "tcp runs {} here, not bbr, and slows down on loss: modprobe tcp_bbr",
                self.congestion
            ));
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }
}

/// The listening side: one TCP port, TLS pinned to the client's certificate.
pub struct TcpServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    report: TcpReport,
}

impl TcpServer {
    /// Listens on `bind` (port 0: any free port).
    pub fn bind(
        bind: SocketAddr,
        identity: &Identity,
        client: impl Into<ClientPin>,
        opts: &TransportOptions,
    ) -> Result<TcpServer, TransportError> {
        tokio::runtime::Handle::try_current().map_err(|_| TransportError::NoRuntime)?;
        let tls = server_tls(identity, client.into(), Early::Refused, opts.cipher, TCP_ALPN)?;
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let (listener, report) = listen(bind).map_err(TransportError::Tcp)?;
        Ok(TcpServer { listener, acceptor, report })
    }

    /// The address and port it listens on.
    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        Ok(self.listener.local_addr()?)
    }

    /// What the listener's sockets get (accepted sockets inherit it).
    pub fn report(&self) -> &TcpReport {
        &self.report
    }

    /// The next TCP connection, not yet authenticated: pass it to [`TcpServer::handshaker`]'s
    /// [`Handshaker::handshake`], in a task of its own, so a slow stranger holds up nobody.
    pub async fn accept(&self) -> Result<(TcpStream, SocketAddr), TransportError> {
        let (stream, from) = self.listener.accept().await.map_err(TransportError::Tcp)?;
        // The listener's controller is inherited on Linux; asking again costs nothing.
        let _ = sys::set_congestion(&SockRef::from(&stream), PREFERRED_CONGESTION);
        let _ = stream.set_nodelay(true);
        Ok((stream, from))
    }

    /// Runs TLS handshakes for connections this server accepted.
    pub fn handshaker(&self) -> Handshaker {
        Handshaker(self.acceptor.clone())
    }
}

/// Completes the server's side of TLS on an accepted connection.
#[derive(Clone)]
pub struct Handshaker(TlsAcceptor);

impl Handshaker {
    /// The TLS stream once the client proved it holds the pinned certificate, within
    /// [`HANDSHAKE_TIMEOUT`].
    pub async fn handshake(&self, tcp: TcpStream) -> Result<TlsServerStream, TransportError> {
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.0.accept(tcp)).await {
            Ok(Ok(tls)) => Ok(tls),
            Ok(Err(e)) => Err(TransportError::TcpHandshake(e.to_string())),
            Err(_) => Err(TransportError::TcpHandshake(format!(
                "no handshake within {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            ))),
        }
    }
}

/// The connecting side: TLS pinned to the server's certificate.
#[derive(Clone)]
pub struct TcpConnector(TlsConnector);

impl TcpConnector {
    /// A connector presenting `identity` that accepts only the server pinned by `server`.
    pub fn new(
        identity: &Identity,
        server: Fingerprint,
        opts: &TransportOptions,
    ) -> Result<TcpConnector, TransportError> {
        let tls = client_tls(identity, server, opts.cipher, TCP_ALPN)?;
        Ok(TcpConnector(TlsConnector::from(Arc::new(tls))))
    }

    /// Connects to `addr` with tuned buffers and congestion control, and completes TLS.
    pub async fn connect(
        &self,
        addr: SocketAddr,
    ) -> Result<(TlsClientStream, TcpReport), TransportError> {
        let socket = if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }
            .map_err(TransportError::Tcp)?;
        // Before connect: the window scale is chosen from the receive buffer at SYN time.
        let report = tune(&SockRef::from(&socket));
        let tcp = socket.connect(addr).await.map_err(TransportError::Tcp)?;
        let _ = tcp.set_nodelay(true);
        let name = rustls::pki_types::ServerName::try_from(SERVER_NAME)
            .map_err(|e| TransportError::TcpHandshake(e.to_string()))?;
        let tls = self
            .0
            .connect(name.to_owned(), tcp)
            .await
            .map_err(|e| TransportError::TcpHandshake(e.to_string()))?;
        Ok((tls, report))
    }
}

/// A tuned listening socket on `bind`.
fn listen(bind: SocketAddr) -> std::io::Result<(TcpListener, TcpReport)> {
    let socket = if bind.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }?;
    if bind.is_ipv6() && bind.ip().is_unspecified() {
        // Dual stack, as the UDP socket: one port for whichever family ssh used.
        let _ = SockRef::from(&socket).set_only_v6(false);
    }
    let report = tune(&SockRef::from(&socket));
    // A port that served the copy before still has its connections in TIME-WAIT (the
    // server closes first); without this the next copy cannot listen on it for a
    // minute, which breaks back-to-back copies through a one-port firewall opening.
    // It never lets two listeners share a port.
    socket.set_reuseaddr(true)?;
    socket.bind(bind)?;
    // A session opens a handful of connections; strangers beyond the backlog wait.
    let listener = socket.listen(64)?;
    Ok((listener, report))
}

/// Asks for BBR and large buffers (see the module docs) and reports the outcome.
fn tune(socket: &SockRef<'_>) -> TcpReport {
    let _ = sys::set_congestion(socket, PREFERRED_CONGESTION);
    let congestion = sys::congestion(socket).unwrap_or_else(|_| "unknown".to_string());
    let forced = set_forced(socket, TCP_BUFFER);
    let limits = BufferLimits::get();
    let mut fixed_buffers = forced;
    let mut ceiling = |send: bool| -> usize {
        let (core_max, autotuned) = if send {
            (limits.core_wmem, limits.autotune_send)
        } else {
            (limits.core_rmem, limits.autotune_recv)
        };
        if !forced {
            let capped = 2 * TCP_BUFFER.min(core_max.unwrap_or(0));
            if let Some(auto) = autotuned.filter(|auto| capped <= *auto) {
                return auto;
            }
            let _ = if send {
                socket.set_send_buffer_size(TCP_BUFFER)
            } else {
                socket.set_recv_buffer_size(TCP_BUFFER)
            };
            fixed_buffers = true;
        }
        if send { socket.send_buffer_size() } else { socket.recv_buffer_size() }.unwrap_or(0)
    };
    let send_ceiling = ceiling(true);
    let recv_ceiling = ceiling(false);
    TcpReport { congestion, send_ceiling, recv_ceiling, fixed_buffers }
}

/// The host's buffer limits, read from `/proc/sys` once per process (a session opens
/// five sockets, all under the same limits).
#[derive(Clone, Copy)]
struct BufferLimits {
    /// `net.core.wmem_max` / `rmem_max`: the cap on a buffer set without privileges.
    core_wmem: Option<usize>,
    core_rmem: Option<usize>,
    /// The third value of `net.ipv4.tcp_wmem` / `tcp_rmem`: how far autotuning grows one.
    autotune_send: Option<usize>,
    autotune_recv: Option<usize>,
}

impl BufferLimits {
    fn get() -> BufferLimits {
        static LIMITS: OnceLock<BufferLimits> = OnceLock::new();
        *LIMITS.get_or_init(|| {
            let first = |name| sysctl_values(name).and_then(|v| v.first().copied());
            let third = |name| sysctl_values(name).and_then(|v| v.get(2).copied());
            BufferLimits {
                core_wmem: first("net/core/wmem_max"),
                core_rmem: first("net/core/rmem_max"),
                autotune_send: third("net/ipv4/tcp_wmem"),
                autotune_recv: third("net/ipv4/tcp_rmem"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn loopback() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    /// A port whose last connection the server closed (so it sits in TIME-WAIT) can be
    /// listened on again at once: back-to-back copies through one open port.
    #[tokio::test]
    async fn a_port_in_time_wait_can_listen_again() {
        let (first, _) = listen(loopback()).unwrap();
        let addr = first.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (served, _) = first.accept().await.unwrap();
        drop(served);
        drop(first);
        let mut client = client;
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        drop(client);
        let again = listen(addr).map(|(l, _)| l.local_addr().unwrap());
        assert_eq!(again.ok(), Some(addr), "listening again on {addr}");
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken_addr = taken.local_addr().unwrap();
        assert!(listen(taken_addr).is_err(), "a port another socket listens on stays refused");
    }

    /// The pinned client gets through and bytes flow both ways over TLS.
    #[tokio::test]
    async fn the_pinned_client_connects_and_talks() {
        let (server_id, client_id) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let opts = TransportOptions::default();
        let server =
            TcpServer::bind(loopback(), &server_id, client_id.fingerprint(), &opts).unwrap();
        let addr = server.local_addr().unwrap();
        let handshaker = server.handshaker();
        let serving = tokio::spawn(async move {
            let (tcp, _) = server.accept().await.unwrap();
            let mut tls = handshaker.handshake(tcp).await.unwrap();
            let mut got = [0u8; 5];
            tls.read_exact(&mut got).await.unwrap();
            tls.write_all(b"world").await.unwrap();
            tls.flush().await.unwrap();
            got
        });
        let connector = TcpConnector::new(&client_id, server_id.fingerprint(), &opts).unwrap();
        let (mut tls, report) = connector.connect(addr).await.unwrap();
        tls.write_all(b"hello").await.unwrap();
        tls.flush().await.unwrap();
        let mut back = [0u8; 5];
        tls.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"world");
        assert_eq!(&serving.await.unwrap(), b"hello");
        assert!(report.send_ceiling > 0 && report.recv_ceiling > 0, "{report:?}");
    }

    /// A client with another certificate is refused by the server, and a server with
    /// another certificate is refused by the client.
    #[tokio::test]
    async fn a_wrong_certificate_is_refused_on_either_side() {
        let (server_id, client_id, stranger) = (
            Identity::generate().unwrap(),
            Identity::generate().unwrap(),
            Identity::generate().unwrap(),
        );
        let opts = TransportOptions::default();
        let server =
            TcpServer::bind(loopback(), &server_id, client_id.fingerprint(), &opts).unwrap();
        let addr = server.local_addr().unwrap();
        let handshaker = server.handshaker();
        let serving = tokio::spawn(async move {
            let (tcp, _) = server.accept().await.unwrap();
            handshaker.handshake(tcp).await.map(|_| ())
        });
        // The stranger's certificate: the server refuses it.
        let foreign = TcpConnector::new(&stranger, server_id.fingerprint(), &opts).unwrap();
        let attempt = foreign.connect(addr).await;
        let refused = serving.await.unwrap();
        assert!(refused.is_err(), "the server took a stranger's certificate");
        if let Ok((mut tls, _)) = attempt {
            // TLS 1.3: the client finishes before the server judges it; the refusal
            // arrives as an alert on the first read.
            let mut buf = [0u8; 1];
            assert!(!matches!(tls.read(&mut buf).await, Ok(1)), "read data after refusal");
        }
        // The client pinned another server: it refuses the real one.
        let server =
            TcpServer::bind(loopback(), &server_id, client_id.fingerprint(), &opts).unwrap();
        let addr = server.local_addr().unwrap();
        let handshaker = server.handshaker();
        tokio::spawn(async move {
            if let Ok((tcp, _)) = server.accept().await {
                let _ = handshaker.handshake(tcp).await;
            }
        });
        let misled = TcpConnector::new(&client_id, stranger.fingerprint(), &opts).unwrap();
        let err = misled.connect(addr).await.map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("does not match the pinned"), "{err}");
    }

    /// The advice is Linux's; elsewhere [`TcpReport::warning`] says nothing.
    #[test]
    #[cfg(target_os = "linux")]
    fn small_ceilings_and_another_controller_warn() {
        let report = TcpReport {
            congestion: "cubic".into(),
            send_ceiling: 4 << 20,
            recv_ceiling: 6 << 20,
            fixed_buffers: false,
        };
        let warning = report.warning(2).expect("8 MiB and 12 MiB over two connections");
        assert!(warning.contains("net.ipv4.tcp_wmem"), "{warning}");
        assert!(warning.contains("net.ipv4.tcp_rmem"), "{warning}");
        assert!(warning.contains("modprobe tcp_bbr"), "{warning}");
        let fine = TcpReport { congestion: "bbr".into(), ..report };
        assert_eq!(fine.warning(4), None);
    }
}
