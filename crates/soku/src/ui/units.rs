//! Bytes and rates for people: binary units for sizes, MB/s and Mbit/s for rates.

/// Formats bytes with binary units: `1.5 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Formats a rate in bytes per second as MB/s and Mbit/s, the units of the seeds' tables;
/// below 1 MB/s (a few small files) as kB/s and kbit/s, so it never reads "0.0 MB/s".
pub fn human_rate(bytes_per_sec: f64) -> String {
    if bytes_per_sec < 1e6 {
        format!("{:.1} kB/s ({:.0} kbit/s)", bytes_per_sec / 1e3, bytes_per_sec * 8.0 / 1e3)
    } else {
        format!("{:.1} MB/s ({:.0} Mbit/s)", bytes_per_sec / 1e6, bytes_per_sec * 8.0 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(5 << 30), "5.0 GiB");
        assert_eq!(human_rate(125e6), "125.0 MB/s (1000 Mbit/s)");
        assert_eq!(human_rate(6_800.0), "6.8 kB/s (54 kbit/s)", "tiny files are not 0.0 MB/s");
    }
}
