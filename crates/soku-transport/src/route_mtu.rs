//! The largest UDP payload this host can send toward a peer in one IP packet: the MTU
//! of the route the kernel picks for it (the interface's, or less where the route or a
//! learned path MTU says so), minus the IP and UDP headers.
//!
//! Path MTU discovery (RFC 8899, quinn's binary search) never gets a probe larger than
//! this through: with the don't-fragment bit set, the local stack refuses it. quinn
//! takes a probe as lost only after it was sent three times, so every size above the
//! route's MTU cost three probe timeouts. From a 9000-byte bound on a 1500-byte route,
//! the search passed four such sizes before it settled: the copy ran its first
//! ~20 round trips (2 s at 100 ms) on 1200-byte packets, 17 % more packets (and
//! per-packet work) than at the path's size. Bounded by the route, every probe of the
//! search fits, and it settles in four round trips. A jumbo-frame route keeps its room.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

/// IPv4 (20 bytes, no options) and UDP (8) headers.
const IPV4_UDP_HEADERS: u32 = 28;
/// IPv6 (40 bytes, no extension headers) and UDP (8) headers.
const IPV6_UDP_HEADERS: u32 = 48;

/// The UDP payload that fits the route toward `peer` unfragmented, or `None` when the
/// system cannot tell (no route yet, or no `IP_MTU` on this platform).
pub(crate) fn udp_payload_toward(peer: IpAddr) -> Option<u32> {
    let (bind, headers) = match peer {
        IpAddr::V4(_) => (SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)), IPV4_UDP_HEADERS),
        IpAddr::V6(_) => (SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)), IPV6_UDP_HEADERS),
    };
    let socket = UdpSocket::bind(bind).ok()?;
    // A UDP connect sends nothing: it only looks up the route (port 9, discard, is
    // never contacted).
    socket.connect((peer, 9)).ok()?;
    route_mtu(&socket, peer)?.checked_sub(headers)
}

#[cfg(target_os = "linux")]
fn route_mtu(socket: &UdpSocket, peer: IpAddr) -> Option<u32> {
    use rustix::net::sockopt;
    match peer {
        IpAddr::V4(_) => sockopt::ip_mtu(socket).ok(),
        IpAddr::V6(_) => sockopt::ipv6_mtu(socket).ok(),
    }
}

#[cfg(not(target_os = "linux"))]
fn route_mtu(_socket: &UdpSocket, _peer: IpAddr) -> Option<u32> {
    None
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Loopback's MTU is 65536 on Linux, of which an IPv4 packet (16-bit length) can use
    /// 65535: the payload is that less the headers.
    #[test]
    fn loopback_route_carries_its_mtu_less_headers() {
        let v4 = udp_payload_toward(IpAddr::V4(Ipv4Addr::LOCALHOST)).expect("a route to 127.0.0.1");
        let lo_mtu: u32 = std::fs::read_to_string("/sys/class/net/lo/mtu")
            .expect("lo's MTU")
            .trim()
            .parse()
            .expect("a number");
        assert_eq!(v4, lo_mtu.min(65_535) - IPV4_UDP_HEADERS);
    }
}
