//! `SOKU_PRELOAD`: which connections get a relay.
//!
//! Comma-separated patterns; a connection matches if any pattern does:
//! - `22`: any host, port 22;
//! - `HOST` or `HOST:PORT` or `[V6ADDR]:PORT`: that host (an address, or a name
//!   resolved once when the first connection is checked), any port or that port;
//! - `*`: every TCP connection.
//!
//! Unset or empty: nothing is hooked. Optional `SOKU_PRELOAD_SNDBUF` /
//! `SOKU_PRELOAD_RCVBUF` set the relay's TCP buffers (bytes; default: as large as the
//! kernel allows, as in `soku relay`); `SOKU_PRELOAD_DEBUG=1` prints one line per
//! hooked connection and its statistics on stderr.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// One pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Any,
    Port(u16),
    Host { ips: Vec<IpAddr>, port: Option<u16> },
}

/// The parsed environment.
#[derive(Debug, Default)]
pub(crate) struct Config {
    patterns: Vec<Pattern>,
    /// SO_SNDBUF for the relay's TCP socket.
    pub sndbuf: Option<usize>,
    /// SO_RCVBUF for the relay's TCP socket.
    pub rcvbuf: Option<usize>,
    /// Print what is hooked.
    pub debug: bool,
}

impl Config {
    /// Reads `SOKU_PRELOAD*` from the environment.
    pub(crate) fn from_env() -> Config {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let size = |name: &str| var(name).and_then(|v| v.trim().parse().ok());
        Config {
            patterns: var("SOKU_PRELOAD").map(|v| parse(&v)).unwrap_or_default(),
            sndbuf: size("SOKU_PRELOAD_SNDBUF"),
            rcvbuf: size("SOKU_PRELOAD_RCVBUF"),
            debug: var("SOKU_PRELOAD_DEBUG").is_some_and(|v| v != "0"),
        }
    }

    /// Whether any pattern is set at all.
    pub(crate) fn enabled(&self) -> bool {
        !self.patterns.is_empty()
    }

    /// Whether a connection to `dest` gets a relay.
    pub(crate) fn matches(&self, dest: &SocketAddr) -> bool {
        let ip = canonical(dest.ip());
        self.patterns.iter().any(|p| match p {
            Pattern::Any => true,
            Pattern::Port(port) => *port == dest.port(),
            Pattern::Host { ips, port } => {
                port.is_none_or(|p| p == dest.port()) && ips.iter().any(|i| canonical(*i) == ip)
            }
        })
    }
}

/// IPv4-mapped IPv6 addresses compare as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Parses the pattern list; patterns that do not parse or resolve are skipped.
fn parse(list: &str) -> Vec<Pattern> {
    list.split(',').map(str::trim).filter(|p| !p.is_empty()).filter_map(parse_one).collect()
}

fn parse_one(p: &str) -> Option<Pattern> {
    if p == "*" {
        return Some(Pattern::Any);
    }
    if let Ok(port) = p.parse::<u16>() {
        return Some(Pattern::Port(port));
    }
    if let Ok(ip) = p.parse::<IpAddr>() {
        return Some(Pattern::Host { ips: vec![ip], port: None });
    }
    if let Ok(sa) = p.parse::<SocketAddr>() {
        return Some(Pattern::Host { ips: vec![sa.ip()], port: Some(sa.port()) });
    }
    let (host, port) = match p.rsplit_once(':') {
        Some((h, port)) => (h.trim_matches(['[', ']']), Some(port.parse::<u16>().ok()?)),
        None => (p, None),
    };
    let ips: Vec<IpAddr> = (host, 0).to_socket_addrs().ok()?.map(|a| a.ip()).collect();
    (!ips.is_empty()).then_some(Pattern::Host { ips, port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(s: &str) -> Config {
        Config { patterns: parse(s), ..Config::default() }
    }

    #[test]
    fn patterns_match() {
        let a: SocketAddr = "10.0.0.1:22".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:2222".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:10.0.0.2]:2222".parse().unwrap();
        assert!(!cfg("").enabled());
        assert!(cfg("22").matches(&a) && !cfg("22").matches(&b));
        assert!(cfg("10.0.0.2").matches(&b) && !cfg("10.0.0.2").matches(&a));
        assert!(cfg("10.0.0.2:2222").matches(&mapped));
        assert!(!cfg("10.0.0.2:22").matches(&b));
        assert!(cfg("localhost:22, 2222").matches(&b));
        assert!(cfg("*").matches(&a));
        assert!(cfg("[::1]:5").matches(&"[::1]:5".parse().unwrap()));
        assert!(cfg("localhost:7").matches(&"127.0.0.1:7".parse().unwrap()));
        assert!(!cfg("garbage:port").enabled());
    }
}
