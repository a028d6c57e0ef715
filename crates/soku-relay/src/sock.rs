//! Connecting and tuning relay sockets: large buffers and `TCP_NODELAY`.
//!
//! Socket buffers: an explicit size is passed to `setsockopt` as given (Linux doubles
//! it for bookkeeping and caps it at `net.core.{w,r}mem_max`). Without one, the relay
//! asks for `{w,r}mem_max` (at most 16 MiB) when that is at least the TCP autotuning
//! ceiling (`net.ipv4.tcp_{w,r}mem` max); otherwise setting a size would *lower* the
//! ceiling (distros often cap `rmem_max` at 208 KiB), so the kernel's autotuning is
//! left in charge.

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::{BufferOptions, RelayError};

/// The most the relay asks for on its own.
const AUTO_MAX: usize = 16 << 20;

/// A destination: host name (or address) and port, resolved at each connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Host name or address literal (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Target {
    /// Parses `HOST:PORT` or `[V6ADDR]:PORT`; `what` names the argument in errors.
    pub fn parse(value: &str, what: &'static str) -> Result<Target, RelayError> {
        let bad = || RelayError::BadAddress {
            what,
            value: value.to_string(),
            example: "example.org:22 or [::1]:2222",
        };
        let (host, port) = value.rsplit_once(':').ok_or_else(bad)?;
        let host = match host.strip_prefix('[') {
            Some(v6) => v6.strip_suffix(']').ok_or_else(bad)?,
            None if host.contains(':') => return Err(bad()),
            None => host,
        };
        let port: u16 = port.parse().map_err(|_| bad())?;
        if host.is_empty() {
            return Err(bad());
        }
        Ok(Target { host: host.to_string(), port })
    }

    /// All addresses the name resolves to.
    pub fn resolve(&self) -> Result<Vec<SocketAddr>, RelayError> {
        let addrs: Vec<SocketAddr> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|source| RelayError::Resolve { host: self.host.clone(), source })?
            .collect();
        if addrs.is_empty() {
            let source = std::io::Error::new(std::io::ErrorKind::NotFound, "no addresses");
            return Err(RelayError::Resolve { host: self.host.clone(), source });
        }
        Ok(addrs)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Connects to the first address of `target` that accepts, with tuned buffers
/// (set before connecting, so the window scale is chosen for them) and `TCP_NODELAY`.
pub fn connect(target: &Target, buffers: BufferOptions) -> Result<TcpStream, RelayError> {
    connect_first(target, target.resolve()?, None, |sock| tune(sock, buffers))
}

/// Connects to each of `addrs` (of `target`) in turn until one accepts, `prepare`d
/// before connecting and within `timeout` each (none: the kernel's own).
pub(crate) fn connect_first(
    target: &Target,
    addrs: Vec<SocketAddr>,
    timeout: Option<Duration>,
    prepare: impl Fn(&Socket) -> std::io::Result<()>,
) -> Result<TcpStream, RelayError> {
    let connect_one = |addr: SocketAddr| -> std::io::Result<TcpStream> {
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        prepare(&sock)?;
        match timeout {
            Some(limit) => sock.connect_timeout(&addr.into(), limit)?,
            None => sock.connect(&addr.into())?,
        }
        Ok(sock.into())
    };
    let mut last = None;
    for addr in addrs {
        match connect_one(addr) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    let source = last.unwrap_or_else(|| std::io::Error::other("no addresses"));
    Err(RelayError::Connect { target: target.to_string(), source })
}

/// Binds and listens on `addr` with tuned buffers (accepted sockets inherit them).
pub fn listen(addr: SocketAddr, buffers: BufferOptions) -> Result<TcpListener, RelayError> {
    let err = |source| RelayError::Listen { addr: addr.to_string(), source };
    let sock =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(err)?;
    sock.set_reuse_address(true).map_err(err)?;
    tune(&sock, buffers).map_err(err)?;
    sock.bind(&addr.into()).map_err(err)?;
    sock.listen(128).map_err(err)?;
    Ok(sock.into())
}

/// Sets the buffer sizes (see the module doc) and [`no_waits`].
pub fn tune(sock: &Socket, buffers: BufferOptions) -> std::io::Result<()> {
    no_waits(sock)?;
    if let Some(n) = buffers.sndbuf.or_else(|| auto_size("wmem_max", "tcp_wmem")) {
        sock.set_send_buffer_size(n)?;
    }
    if let Some(n) = buffers.rcvbuf.or_else(|| auto_size("rmem_max", "tcp_rmem")) {
        sock.set_recv_buffer_size(n)?;
    }
    Ok(())
}

/// No small write waits for an ACK (`TCP_NODELAY`), and our ACKs of the peer's are
/// not held back long (a short delayed-ACK timer where the kernel has one,
/// crate::delack): either end may be an sshd that keeps Nagle on.
pub(crate) fn no_waits(sock: &Socket) -> std::io::Result<()> {
    crate::delack::cap_delayed_acks(std::os::fd::AsFd::as_fd(sock));
    sock.set_nodelay(true)
}

/// The effective (kernel-reported) send and receive buffer sizes of a stream.
pub fn buffer_sizes(stream: &TcpStream) -> (usize, usize) {
    let sock = socket2::SockRef::from(stream);
    (sock.send_buffer_size().unwrap_or(0), sock.recv_buffer_size().unwrap_or(0))
}

/// `core_max` (capped at 16 MiB) if it is at least the autotuning ceiling, else `None`.
fn auto_size(core: &str, tcp: &str) -> Option<usize> {
    let read = |path: String| std::fs::read_to_string(path).ok();
    let core_max: usize = read(format!("/proc/sys/net/core/{core}"))?.trim().parse().ok()?;
    let tcp_max: usize =
        read(format!("/proc/sys/net/ipv4/{tcp}"))?.split_whitespace().nth(2)?.parse().ok()?;
    (core_max >= tcp_max).then_some(core_max.min(AUTO_MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets() {
        let t = Target::parse("example.org:22", "--to").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("example.org", 22));
        let t = Target::parse("[::1]:2222", "--to").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 2222));
        assert_eq!(t.to_string(), "[::1]:2222");
        for bad in ["example.org", ":22", "host:99999", "host:x", "::1:22", "[::1:22", ""] {
            let err = Target::parse(bad, "--to").unwrap_err().to_string();
            assert!(err.starts_with("bad --to"), "{bad}: {err}");
        }
    }
}
