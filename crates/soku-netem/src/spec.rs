//! What a path looks like: per-direction link specs, and the unit parsers the CLI uses.

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::error::{NetemError, Result};

/// Bursty loss after Gilbert-Elliott: a two-state Markov chain evaluated per packet.
///
/// In the good state no packet is lost by this model; in the bad state each packet is
/// lost with probability `bad_loss`. With `bad_loss = 1` the mean burst length is `1/r`
/// and the long-run loss rate is `p / (p + r)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gilbert {
    /// Probability of moving from good to bad, per packet.
    pub p: f64,
    /// Probability of moving from bad to good, per packet.
    pub r: f64,
    /// Loss probability while in the bad state.
    pub bad_loss: f64,
}

impl Gilbert {
    /// Long-run fraction of packets this model drops.
    pub fn mean_loss(&self) -> f64 {
        if self.p + self.r <= 0.0 {
            return 0.0;
        }
        self.p / (self.p + self.r) * self.bad_loss
    }
}

/// One direction of the emulated path.
///
/// Order of effects for each packet read from the sending TUN device: drop-tail queue
/// check and serialization at `rate_bps` (on IP bytes: header included, no link-layer
/// framing), then random loss and Gilbert-Elliott loss (lost packets did use link time,
/// as on a real lossy wire), then propagation `delay` plus `jitter`, then optional
/// reordering.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSpec {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Each packet's delay is drawn uniformly from `delay ± jitter`; packets are never
    /// delivered before an earlier one (no reordering from jitter), so the mean delay
    /// rises a little above `delay` under load.
    pub jitter: Duration,
    /// Independent random loss probability per packet, 0.0..=1.0.
    pub loss: f64,
    /// Optional bursty loss on top of `loss`.
    pub gilbert: Option<Gilbert>,
    /// Probability that a packet is held back by `reorder_delay` and so overtaken.
    pub reorder: f64,
    /// Extra delay of a reordered packet.
    pub reorder_delay: Duration,
    /// Link rate in bit/s of IP packets; `None` for no limit.
    pub rate_bps: Option<u64>,
    /// Drop-tail queue limit in bytes in front of the rate limiter; `None` for one
    /// bandwidth-delay product of the whole path (at least 32 MTU-sized packets).
    pub queue_bytes: Option<usize>,
    /// MTU of the sending TUN device (bytes of IP packet).
    pub mtu: u16,
    /// PRNG seed for loss/jitter/reorder decisions; 0 picks one from the clock.
    pub seed: u64,
}

impl Default for LinkSpec {
    fn default() -> LinkSpec {
        LinkSpec {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            gilbert: None,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(1),
            rate_bps: None,
            queue_bytes: None,
            mtu: 1500,
            seed: 0,
        }
    }
}

impl LinkSpec {
    /// Checks ranges; every entry point calls this before using a spec.
    pub fn validate(&self) -> Result<()> {
        let prob = |name: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(NetemError::InvalidSpec(format!("{name} {v} not in 0..=1")))
            }
        };
        prob("loss", self.loss)?;
        prob("reorder", self.reorder)?;
        if let Some(g) = &self.gilbert {
            prob("gilbert p", g.p)?;
            prob("gilbert r", g.r)?;
            prob("gilbert bad_loss", g.bad_loss)?;
        }
        if self.rate_bps == Some(0) {
            return Err(NetemError::InvalidSpec("rate must be > 0".into()));
        }
        if self.mtu < 576 {
            return Err(NetemError::InvalidSpec(format!(
                "mtu {} below 576 (IPv4 minimum reassembly size)",
                self.mtu
            )));
        }
        let limit = Duration::from_secs(3600);
        if self.delay > limit || self.jitter > limit || self.reorder_delay > limit {
            return Err(NetemError::InvalidSpec("delays above one hour".into()));
        }
        Ok(())
    }

    /// The queue limit actually used, given the path's round-trip propagation delay.
    pub fn effective_queue_bytes(&self, rtt: Duration) -> usize {
        if let Some(q) = self.queue_bytes {
            return q;
        }
        let floor = 32 * self.mtu as usize;
        match self.rate_bps {
            Some(rate) => {
                let bdp = (rate as u128 * rtt.as_nanos() / 8_000_000_000) as usize;
                bdp.max(floor)
            }
            None => usize::MAX,
        }
    }
}

/// Both directions of a path plus the addresses of its two ends.
#[derive(Debug, Clone, PartialEq)]
pub struct PathSpec {
    /// Packets sent by namespace A towards B.
    pub a_to_b: LinkSpec,
    /// Packets sent by namespace B towards A.
    pub b_to_a: LinkSpec,
    /// Address of A's TUN device.
    pub addr_a: Ipv4Addr,
    /// Address of B's TUN device.
    pub addr_b: Ipv4Addr,
    /// Prefix length of both addresses (they must share the subnet).
    pub prefix_len: u8,
    /// Run the forwarding threads under SCHED_FIFO (falls back to nice -10 if
    /// refused). On a small machine this keeps the endpoints from delaying the
    /// "network"; turn off to leave scheduling alone.
    pub realtime: bool,
}

impl Default for PathSpec {
    fn default() -> PathSpec {
        PathSpec {
            a_to_b: LinkSpec::default(),
            b_to_a: LinkSpec::default(),
            addr_a: Ipv4Addr::new(10, 77, 0, 1),
            addr_b: Ipv4Addr::new(10, 77, 0, 2),
            prefix_len: 24,
            realtime: true,
        }
    }
}

impl PathSpec {
    /// A path with the same link both ways: `rtt/2` delay per direction, `loss`
    /// (0.0..=1.0) applied independently in each direction, `rate_bps` per direction.
    pub fn symmetric(rtt: Duration, loss: f64, rate_bps: Option<u64>) -> PathSpec {
        let link = LinkSpec { delay: rtt / 2, loss, rate_bps, ..LinkSpec::default() };
        PathSpec { a_to_b: link.clone(), b_to_a: link, ..PathSpec::default() }
    }

    /// Round-trip propagation delay (sum of both one-way delays).
    pub fn rtt(&self) -> Duration {
        self.a_to_b.delay + self.b_to_a.delay
    }

    /// Checks both links and the addresses.
    pub fn validate(&self) -> Result<()> {
        self.a_to_b.validate()?;
        self.b_to_a.validate()?;
        if !(1..=30).contains(&self.prefix_len) {
            return Err(NetemError::InvalidSpec(format!(
                "prefix length {} not in 1..=30",
                self.prefix_len
            )));
        }
        if self.addr_a == self.addr_b {
            return Err(NetemError::InvalidSpec("both ends have the same address".into()));
        }
        let mask = u32::MAX << (32 - self.prefix_len);
        if u32::from(self.addr_a) & mask != u32::from(self.addr_b) & mask {
            return Err(NetemError::InvalidSpec("addresses are not in one subnet".into()));
        }
        Ok(())
    }
}

fn split_num(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let v: f64 = s[..end].parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    Some((v, s[end..].trim()))
}

/// Parses `50ms`, `1.5s`, `200us`, `0` (bare numbers are milliseconds).
pub fn parse_duration(s: &str) -> Result<Duration> {
    let err = || NetemError::Parse { what: "duration", input: s.to_string() };
    let (v, unit) = split_num(s).ok_or_else(err)?;
    let secs = match unit.to_ascii_lowercase().as_str() {
        "" | "ms" => v / 1e3,
        "s" | "sec" => v,
        "us" | "µs" => v / 1e6,
        "ns" => v / 1e9,
        _ => return Err(err()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| err())
}

/// Parses `1%`, `0.5%` or a bare fraction `0.01` into a probability 0.0..=1.0.
pub fn parse_percent(s: &str) -> Result<f64> {
    let err = || NetemError::Parse { what: "percentage", input: s.to_string() };
    let (v, unit) = split_num(s).ok_or_else(err)?;
    let p = match unit {
        "%" => v / 100.0,
        "" => v,
        _ => return Err(err()),
    };
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(err())
    }
}

/// Parses `100mbit`, `1gbit`, `500kbit`, `2.5gbps`, `1000000` (bit/s).
pub fn parse_rate(s: &str) -> Result<u64> {
    let err = || NetemError::Parse { what: "rate", input: s.to_string() };
    let (v, unit) = split_num(s).ok_or_else(err)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" | "bps" => 1.0,
        "k" | "kbit" | "kbps" => 1e3,
        "m" | "mbit" | "mbps" => 1e6,
        "g" | "gbit" | "gbps" => 1e9,
        _ => return Err(err()),
    };
    let r = v * mult;
    if !(1.0..=1e12).contains(&r) {
        return Err(err());
    }
    Ok(r as u64)
}

/// Parses byte sizes: `64k`, `1.5m`, `300000`, `4kib` (k = 1000, kib = 1024).
pub fn parse_size(s: &str) -> Result<usize> {
    let err = || NetemError::Parse { what: "size", input: s.to_string() };
    let (v, unit) = split_num(s).ok_or_else(err)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(err()),
    };
    let b = v * mult;
    if b > 1e12 {
        return Err(err());
    }
    Ok(b as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("50ms").unwrap(), Duration::from_millis(50));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("200us").unwrap(), Duration::from_micros(200));
        assert_eq!(parse_duration("7").unwrap(), Duration::from_millis(7));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-3ms").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(parse_percent("1%").unwrap(), 0.01);
        assert_eq!(parse_percent("0.25").unwrap(), 0.25);
        assert!(parse_percent("150%").is_err());
        assert_eq!(parse_rate("100mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate("1gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("2.5Gbps").unwrap(), 2_500_000_000);
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("fast").is_err());
        assert_eq!(parse_size("64k").unwrap(), 64_000);
        assert_eq!(parse_size("4kib").unwrap(), 4096);
        assert!(parse_size("1..2").is_err());
    }

    #[test]
    fn validates_specs() {
        let mut s = PathSpec::symmetric(Duration::from_millis(50), 0.01, Some(100_000_000));
        assert!(s.validate().is_ok());
        assert_eq!(s.rtt(), Duration::from_millis(50));
        s.a_to_b.loss = 1.5;
        assert!(s.validate().is_err());
        let s = PathSpec { addr_b: "10.78.0.2".parse().unwrap(), ..PathSpec::default() };
        assert!(s.validate().is_err());
        let mut s = PathSpec::default();
        s.b_to_a.mtu = 100;
        assert!(s.validate().is_err());
    }

    #[test]
    fn default_queue_is_one_bdp() {
        let l = LinkSpec { rate_bps: Some(100_000_000), ..LinkSpec::default() };
        // 100 Mbit/s * 50 ms = 625 000 bytes.
        assert_eq!(l.effective_queue_bytes(Duration::from_millis(50)), 625_000);
        // Tiny RTT: floor of 32 packets.
        assert_eq!(l.effective_queue_bytes(Duration::ZERO), 48_000);
    }
}
