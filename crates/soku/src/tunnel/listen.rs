//! The tunnel's command-line addresses, checked before anything connects: the local
//! `[ADDR:]PORT` to listen on, the remote `HOST:PORT` to reach, and the `[user@]host`.

use crate::cli::spec::{self, Location, Remote};

/// Where the client listens, as typed: bound with the system resolver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenAddr {
    /// Address or host name, without brackets; `127.0.0.1` when only a port is given.
    pub host: String,
    /// The port; 0 lets the system choose.
    pub port: u16,
}

/// Parses `-L [ADDR:]PORT`: `8022`, `127.0.0.1:8022`, `[::1]:8022`, `localhost:0`, or
/// `*:8022` for every interface (as ssh writes it).
pub fn parse_listen(arg: &str) -> Result<ListenAddr, String> {
    let (host, port) = match arg.rsplit_once(':') {
        None => ("127.0.0.1", arg),
        Some((host, port)) => (host, port),
    };
    let port = parse_port(port, arg)?;
    let bad = || format!("-L {arg}: expected [ADDR:]PORT, e.g. 2222 or 127.0.0.1:2222");
    let host = match host.strip_prefix('[') {
        Some(rest) => rest.strip_suffix(']').filter(|h| is_ipv6(h)).ok_or_else(bad)?,
        None if host.contains(':') => return Err(bad()),
        None if host == "*" => "0.0.0.0",
        None => host,
    };
    if host.is_empty() || host.contains(['[', ']']) {
        return Err(bad());
    }
    Ok(ListenAddr { host: host.to_string(), port })
}

/// Checks `--to HOST:PORT` (or `[v6addr]:PORT`); the remote end resolves the host.
pub fn check_destination(arg: &str) -> Result<(), String> {
    let bad = || format!("--to {arg}: expected HOST:PORT, e.g. 127.0.0.1:22");
    let (host, port) = arg.rsplit_once(':').ok_or_else(bad)?;
    let host = match host.strip_prefix('[') {
        Some(rest) => rest.strip_suffix(']').filter(|h| is_ipv6(h)).ok_or_else(bad)?,
        None => host,
    };
    if host.is_empty() || host.starts_with('-') || host.contains(['[', ']', '/', ' ']) {
        return Err(bad());
    }
    if host.contains(':') && !arg.starts_with('[') {
        return Err(format!("--to {arg}: write an IPv6 address in brackets, e.g. [::1]:22"));
    }
    match parse_port(port, arg)? {
        0 => Err(format!("--to {arg}: port 0 cannot be connected to")),
        _ => Ok(()),
    }
}

/// Parses the remote host, `[user@]host` or `[user@][v6addr]`, with scp's rules.
pub fn parse_remote(arg: &str) -> Result<Remote, String> {
    if arg.contains(':') && !arg.ends_with(']') {
        return Err(format!("{arg}: name the remote host as [user@]host, without a path or port (use -P for the port)"));
    }
    match spec::parse(format!("{arg}:").as_ref())? {
        Location::Remote(remote) => Ok(remote),
        Location::Local(_) => Err(format!("{arg}: not a host name")),
    }
}

fn parse_port(port: &str, arg: &str) -> Result<u16, String> {
    port.parse::<u16>().map_err(|_| format!("{arg}: {port:?} is not a port number (0-65535)"))
}

fn is_ipv6(host: &str) -> bool {
    host.parse::<std::net::Ipv6Addr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(host: &str, port: u16) -> ListenAddr {
        ListenAddr { host: host.into(), port }
    }

    #[test]
    fn listen_forms() {
        assert_eq!(parse_listen("8022").expect("ok"), at("127.0.0.1", 8022));
        assert_eq!(parse_listen("0").expect("ok"), at("127.0.0.1", 0));
        assert_eq!(parse_listen("0.0.0.0:1").expect("ok"), at("0.0.0.0", 1));
        assert_eq!(parse_listen("*:2222").expect("ok"), at("0.0.0.0", 2222));
        assert_eq!(parse_listen("[::1]:2222").expect("ok"), at("::1", 2222));
        assert_eq!(parse_listen("localhost:0").expect("ok"), at("localhost", 0));
        for bad in ["", "x", "65536", ":22", "::1:22", "[::1", "[x]:1", "host:-1"] {
            assert!(parse_listen(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn destination_forms() {
        for good in ["127.0.0.1:22", "db.internal:5432", "[::1]:22", "localhost:1"] {
            assert!(check_destination(good).is_ok(), "{good}");
        }
        for bad in ["22", "host", "host:", ":22", "host:0", "::1:22", "[::1:22", "-oX:1", "h:99999"]
        {
            assert!(check_destination(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn remote_forms() {
        let r = parse_remote("me@example.org").expect("ok");
        assert_eq!((r.user.as_deref(), r.host.as_str()), (Some("me"), "example.org"));
        assert_eq!(parse_remote("[::1]").expect("ok").host, "::1");
        assert_eq!(parse_remote("u@[fe80::1]").expect("ok").host, "fe80::1");
        for bad in ["", "host:path", "host:22", "-oProxyCommand=x", "a/b", "@host"] {
            assert!(parse_remote(bad).is_err(), "{bad}");
        }
    }
}
