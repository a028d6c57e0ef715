//! The ports `soku serve` listens on for the data: QUIC (UDP) and TLS over TCP, any
//! free ones, or within a range a firewall opens (`soku --remote-ports LO-HI`, passed
//! on as `soku serve --ports LO-HI`). Both take the same number where one is free for
//! both, so a rule for one port number covers both protocols.

use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;

use soku_transport::{ClientPin, Identity, TcpServer, TransportOptions};

/// Parses `LO-HI` (or a single port) for clap.
pub fn parse_range(s: &str) -> Result<RangeInclusive<u16>, String> {
    let (lo, hi) = s.split_once('-').unwrap_or((s, s));
    let port = |p: &str| {
        p.trim().parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
            format!("bad port {p:?} in {s:?}: expected LO-HI with ports 1-65535, e.g. 40000-40100")
        })
    };
    let (lo, hi) = (port(lo)?, port(hi)?);
    if lo > hi {
        return Err(format!("bad port range {s:?}: the first port is above the last"));
    }
    Ok(lo..=hi)
}

/// What was bound, and what the client should hear about what was not.
pub struct Bound {
    pub quic: Option<quinn::Endpoint>,
    pub tcp: Option<TcpServer>,
    pub warnings: Vec<String>,
}

/// Binds the QUIC endpoint and the TCP listener on `ip`, within `range` if given, for
/// a client expected from `client_ip` (the QUIC endpoint is sized for the route toward it).
pub fn bind(
    ip: IpAddr,
    client_ip: Option<IpAddr>,
    range: Option<RangeInclusive<u16>>,
    identity: &Identity,
    pin: &ClientPin,
    opts: &TransportOptions,
) -> Bound {
    let mut warnings = Vec::new();
    // Port 0 alone: the kernel picks.
    let candidates: Vec<u16> = range.clone().map_or_else(|| vec![0], |r| r.collect());
    let mut quic = None;
    let mut quic_error = None;
    for &port in &candidates {
        match soku_transport::server_endpoint_toward(
            SocketAddr::new(ip, port),
            client_ip,
            identity,
            pin.clone(),
            opts,
        ) {
            Ok((endpoint, report)) => {
                warnings.extend(report.warning);
                quic = Some(endpoint);
                break;
            }
            Err(e) => quic_error = Some(e),
        }
    }
    // TCP: the UDP port's number first, then the rest of the range (or any port).
    let udp_port = quic.as_ref().and_then(|e| e.local_addr().ok()).map(|a| a.port());
    let tcp_candidates = udp_port.into_iter().chain(candidates.iter().copied());
    let mut tcp = None;
    let mut tcp_error = None;
    for port in tcp_candidates {
        match TcpServer::bind(SocketAddr::new(ip, port), identity, pin.clone(), opts) {
            Ok(server) => {
                tcp = Some(server);
                break;
            }
            Err(e) => tcp_error = Some(e),
        }
    }
    let within = range.map(|r| format!(" in ports {}-{}", r.start(), r.end())).unwrap_or_default();
    // No QUIC or no TCP here: port 0 in the hello tells the client.
    if let (None, Some(e)) = (&quic, quic_error) {
        warnings.push(format!("cannot open a QUIC endpoint{within}: {e}"));
    }
    if let (None, Some(e)) = (&tcp, tcp_error) {
        warnings.push(format!("cannot listen for TLS over TCP{within}: {e}"));
    }
    Bound { quic, tcp, warnings }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_and_nonsense_is_refused() {
        assert_eq!(parse_range("40000-40100"), Ok(40000..=40100));
        assert_eq!(parse_range("5000"), Ok(5000..=5000));
        for bad in ["0-10", "10-5", "a-b", "1-70000", ""] {
            assert!(parse_range(bad).is_err(), "{bad}");
        }
    }

    /// With a range, QUIC and TCP land in it, on the same number when it is free for
    /// both; a port taken for TCP moves TCP to the next one in the range.
    #[tokio::test]
    async fn both_ports_land_in_the_range() {
        let identity = Identity::generate().unwrap();
        let pin = ClientPin::unset();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        // A free pair of adjacent ports, found by binding port 0 and trying the next.
        let base = (0..20)
            .find_map(|_| {
                let probe = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
                let p = probe.local_addr().ok()?.port();
                (p < 65000).then_some(p)
            })
            .unwrap();
        let range = base..=base + 20;
        let bound =
            bind(ip, None, Some(range.clone()), &identity, &pin, &TransportOptions::default());
        let quic = bound.quic.expect("quic").local_addr().unwrap().port();
        let tcp = bound.tcp.expect("tcp").local_addr().unwrap().port();
        assert!(range.contains(&quic) && range.contains(&tcp), "{quic} {tcp} in {range:?}");
        assert_eq!(quic, tcp, "one number for both where it is free");
        assert!(bound.warnings.is_empty(), "{:?}", bound.warnings);
    }
}
