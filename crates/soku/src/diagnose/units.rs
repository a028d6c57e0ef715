//! Rates and sizes written for people, as the report and the verdict show them.

/// Bits per second for people: "95.2 Mbit/s".
pub fn rate(bps: u64) -> String {
    let bps = bps as f64;
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.1} Mbit/s", bps / 1e6)
    } else {
        format!("{:.0} kbit/s", bps / 1e3)
    }
}

/// Bytes per second for people: "40 MB/s".
pub fn bytes_rate(bytes_per_sec: u64) -> String {
    let b = bytes_per_sec as f64;
    if b >= 1e9 {
        format!("{:.2} GB/s", b / 1e9)
    } else {
        format!("{:.1} MB/s", b / 1e6)
    }
}

/// Sizes for people: "208 KiB", "12 MiB".
pub fn bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
    } else {
        format!("{} KiB", n >> 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(rate(95_000_000), "95.0 Mbit/s");
        assert_eq!(rate(2_500_000_000), "2.50 Gbit/s");
        assert_eq!(rate(64_000), "64 kbit/s");
        assert_eq!(bytes_rate(40_000_000), "40.0 MB/s");
        assert_eq!(bytes(212_992), "208 KiB");
        assert_eq!(bytes(12 << 20), "12.0 MiB");
    }
}
