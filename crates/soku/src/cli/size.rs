//! Sizes as the user writes them, on the command line and in config files.

/// `16384`, `64K`, `64KiB`, `4M`, `4MiB`, `1G` (case-insensitive) into bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("16384"), Some(16384));
        assert_eq!(parse_size("64K"), Some(64 << 10));
        assert_eq!(parse_size("4MiB"), Some(4 << 20));
        assert_eq!(parse_size("4 mib"), Some(4 << 20));
        assert_eq!(parse_size("4GB"), None);
        assert_eq!(parse_size("M"), None);
    }
}
