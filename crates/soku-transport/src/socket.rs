//! The UDP socket: made by us so we can size its kernel buffers and report what we got.
//!
//! At 1 Gbit/s a 208 KiB receive buffer (many distros' `net.core.rmem_max`) holds under
//! 2 ms of traffic; any scheduling hiccup longer than that drops packets, which the
//! congestion controller then mistakes for loss on the path. So we ask for a lot, read
//! back what the kernel granted, and tell the user when it is too little.

use std::net::{SocketAddr, UdpSocket};

use socket2::{Domain, Protocol, Socket, Type};

use crate::TransportError;

/// Buffer size we ask for in each direction: ~130 ms at 1 Gbit/s (Linux counts per-packet
/// overhead, so somewhat less payload). With 8 MiB, a loopback copy at 60 000-byte packets
/// overflowed the receiver's buffer (UdpRcvbufErrors) and lost 5.6 % of its packets while
/// the receiving process was busy; with 32 MiB, none (three runs).
pub const REQUESTED_BUFFER: usize = 32 << 20;

/// Below this (as reported by the kernel) we warn: drops become likely at high rates.
pub const WARN_BELOW: usize = 2 << 20;

/// What the socket got versus what we asked, for the UI to show or warn about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketReport {
    /// Bytes asked for with SO_RCVBUF and SO_SNDBUF.
    pub requested: usize,
    /// SO_RCVBUF read back. Linux reports twice the usable size (it counts its own
    /// bookkeeping), so 8 MiB here means 4 MiB of payload.
    pub recv_buffer: usize,
    /// SO_SNDBUF read back, doubled the same way.
    pub send_buffer: usize,
    /// Set when a buffer came out below [`WARN_BELOW`]: says which sysctl to raise.
    pub warning: Option<String>,
}

/// Binds a UDP socket on `addr` with large buffers, ready for quinn.
///
/// `force`: first try SO_RCVBUFFORCE/SO_SNDBUFFORCE, which ignore `rmem_max`/`wmem_max`
/// but need CAP_NET_ADMIN (root); without it they fail and we fall back to the capped
/// options. Trying is cheaper and more accurate than guessing capabilities from the uid.
pub(crate) fn bind_udp(
    addr: SocketAddr,
    requested: usize,
    force: bool,
) -> Result<(UdpSocket, SocketReport), TransportError> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        // A wildcard v6 server socket also takes v4 clients (dual stack), so one port
        // serves whichever family ssh connected over; a specific address needs no mapping.
        socket.set_only_v6(!addr.ip().is_unspecified())?;
    }
    set_buffers(&socket, requested, force);
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    let report = read_report(&socket, requested)?;
    Ok((socket.into(), report))
}

/// The buffers a soku UDP socket gets on this host for this user, as the endpoints
/// ask for them ([`REQUESTED_BUFFER`], forced when allowed): `soku diagnose` reports
/// this beside `rmem_max`, since root's forced buffers ignore the cap.
pub fn udp_buffers() -> Result<SocketReport, TransportError> {
    let any = SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0));
    bind_udp(any, REQUESTED_BUFFER, true).map(|(_, report)| report)
}

/// `net.core.NAME` (`rmem_max`, `wmem_max`), bytes, if `/proc` tells it.
pub fn net_core_sysctl(name: &str) -> Option<u64> {
    let values = sysctl_values(&format!("net/core/{name}"))?;
    values.first().map(|&v| v as u64)
}

/// Best effort: a refused size is not fatal, the read-back report tells the truth.
fn set_buffers(socket: &Socket, size: usize, force: bool) {
    if !(force && set_forced(socket, size)) {
        let _ = socket.set_recv_buffer_size(size);
        let _ = socket.set_send_buffer_size(size);
    }
}

/// True when both forced options were accepted.
#[cfg(target_os = "linux")]
pub(crate) fn set_forced(socket: &Socket, size: usize) -> bool {
    use rustix::net::sockopt;
    sockopt::set_socket_recv_buffer_size_force(socket, size).is_ok()
        && sockopt::set_socket_send_buffer_size_force(socket, size).is_ok()
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn set_forced(_socket: &Socket, _size: usize) -> bool {
    false
}

fn read_report(socket: &Socket, requested: usize) -> Result<SocketReport, TransportError> {
    let recv_buffer = socket.recv_buffer_size()?;
    let send_buffer = socket.send_buffer_size()?;
    let mut problems = Vec::new();
    if recv_buffer < WARN_BELOW.min(requested) {
        problems.push(format!(
            "udp receive buffer is {} (asked {}): raise net.core.rmem_max{}",
            human(recv_buffer),
            human(requested),
            sysctl_hint("rmem_max", requested),
        ));
    }
    if send_buffer < WARN_BELOW.min(requested) {
        problems.push(format!(
            "udp send buffer is {} (asked {}): raise net.core.wmem_max{}",
            human(send_buffer),
            human(requested),
            sysctl_hint("wmem_max", requested),
        ));
    }
    Ok(SocketReport {
        requested,
        recv_buffer,
        send_buffer,
        warning: (!problems.is_empty()).then(|| problems.join("; ")),
    })
}

/// " (now 208 KiB; sysctl -w net.core.rmem_max=8388608)" where /proc tells us the cap.
fn sysctl_hint(name: &str, requested: usize) -> String {
    sysctl_values(&format!("net/core/{name}"))
        .and_then(|values| values.first().copied())
        .map(|now| format!(" (now {}; e.g. sysctl -w net.core.{name}={requested})", human(now)))
        .unwrap_or_default()
}

/// The numbers of `/proc/sys/NAME` (`net/core/rmem_max`: one; `net/ipv4/tcp_rmem`:
/// three), if it can be read.
pub(crate) fn sysctl_values(name: &str) -> Option<Vec<usize>> {
    let text = std::fs::read_to_string(format!("/proc/sys/{name}")).ok()?;
    text.split_whitespace().map(|v| v.parse().ok()).collect()
}

pub(crate) fn human(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
    } else {
        format!("{} KiB", bytes.div_ceil(1 << 10))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::SockRef;

    fn loopback() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    /// The report must be what getsockopt says about the very socket we hand to quinn.
    #[test]
    fn report_matches_getsockopt() {
        for force in [false, true] {
            let (sock, report) = bind_udp(loopback(), REQUESTED_BUFFER, force).unwrap();
            let r = SockRef::from(&sock);
            assert_eq!(report.requested, REQUESTED_BUFFER);
            assert_eq!(report.recv_buffer, r.recv_buffer_size().unwrap());
            assert_eq!(report.send_buffer, r.send_buffer_size().unwrap());
            assert_ne!(sock.local_addr().unwrap().port(), 0);
        }
    }

    /// Without FORCE the kernel caps us at rmem_max (reported doubled on Linux).
    #[cfg(target_os = "linux")]
    #[test]
    fn unforced_request_is_capped_by_rmem_max() {
        let rmem_max: usize =
            std::fs::read_to_string("/proc/sys/net/core/rmem_max").unwrap().trim().parse().unwrap();
        let (_sock, report) = bind_udp(loopback(), REQUESTED_BUFFER, false).unwrap();
        assert_eq!(report.recv_buffer, 2 * REQUESTED_BUFFER.min(rmem_max));
    }

    #[test]
    fn small_buffers_produce_a_warning() {
        let (sock, report) = bind_udp(loopback(), 64 << 10, false).unwrap();
        // Asking for little is not the kernel's fault: no warning.
        assert_eq!(report.warning, None);
        let report = read_report(&Socket::from(sock), REQUESTED_BUFFER).unwrap();
        let warning = report.warning.expect("64 KiB buffers must warn");
        assert!(warning.contains("net.core.rmem_max"), "{warning}");
        assert!(warning.contains("net.core.wmem_max"), "{warning}");
    }

    #[test]
    fn ipv6_wildcard_binds_when_available() {
        let addr: SocketAddr = "[::]:0".parse().unwrap();
        match bind_udp(addr, REQUESTED_BUFFER, false) {
            Ok((sock, _)) => assert!(!SockRef::from(&sock).only_v6().unwrap()),
            // Hosts without IPv6 cannot make the socket at all; nothing to check then.
            Err(TransportError::Socket(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(208 << 10), "208 KiB");
        assert_eq!(human(8 << 20), "8 MiB");
        assert_eq!(human(3 << 19), "1.5 MiB");
    }
}
