//! Which names a Windows file system cannot hold, told from a name's bytes so that a
//! receiver on Windows refuses a peer's name with words of its own, before any file is
//! made, rather than letting Win32 turn it into another name or a device. The rules
//! are Microsoft's "Naming Files, Paths, and Namespaces" (Win32 file namespace).

/// Device names Win32 opens instead of a file of that name, whatever the extension
/// (`NUL.txt` is the null device too). `COM0` and `LPT0` are not devices, and the
/// superscript digits `¹²³` after `COM` and `LPT` are.
const DEVICES: [&str; 6] = ["CON", "PRN", "AUX", "NUL", "COM", "LPT"];

/// Why `name` cannot be a file or directory name on Windows, or `None` if it can. `/`,
/// `\` and NUL are refused for every system already (`crate::path::check_component`).
pub fn problem(name: &[u8]) -> Option<&'static str> {
    if let Some(&bad) = name.iter().find(|&&b| b < 0x20 || b"<>:\"|?*".contains(&b)) {
        return Some(if bad == b':' {
            "has a ':', which Windows reads as a drive or a data stream"
        } else if bad < 0x20 {
            "has a control character"
        } else {
            "has one of < > \" | ? *, which Windows does not allow in a name"
        });
    }
    if name.ends_with(b".") || name.ends_with(b" ") {
        return Some("ends in a dot or a space, which Windows drops from a name");
    }
    let text = String::from_utf8_lossy(name);
    let stem = text.split('.').next().unwrap_or_default().trim_end_matches(' ');
    let upper = stem.to_ascii_uppercase();
    let device = DEVICES.iter().any(|device| match upper.strip_prefix(device) {
        Some("") => !matches!(*device, "COM" | "LPT"),
        Some(rest) if matches!(*device, "COM" | "LPT") => {
            let mut digits = rest.chars();
            let digit = digits.next().is_some_and(|c| matches!(c, '1'..='9' | '¹' | '²' | '³'));
            digit && digits.next().is_none()
        }
        _ => false,
    });
    device.then_some("is a device name on Windows (CON, PRN, AUX, NUL, COM1-9, LPT1-9)")
}

#[cfg(test)]
mod tests {
    use super::problem;

    #[test]
    fn device_names_are_refused_with_any_extension_and_case() {
        for name in ["CON", "con", "Nul.txt", "aux.tar.gz", "COM1", "lpt9.log", "COM¹", "prn.x"] {
            assert!(problem(name.as_bytes()).is_some_and(|p| p.contains("device")), "{name}");
        }
        for name in ["CONSOLE", "COM0", "COM10", "LPT", "nullify.txt", "icon", "com1x"] {
            assert_eq!(problem(name.as_bytes()), None, "{name}");
        }
    }

    #[test]
    fn reserved_characters_and_trailing_dots_are_refused() {
        for name in ["a:b", "C:", "what?", "a*b", "a<b", "a>b", "a|b", "say\"hi\"", "tab\there"] {
            assert!(problem(name.as_bytes()).is_some(), "{name}");
        }
        for name in ["name.", "name ", "..."] {
            assert!(problem(name.as_bytes()).is_some_and(|p| p.contains("ends")), "{name}");
        }
        for name in ["report.pdf", ".hidden", "a b", "café", "日本語.txt", "x.y.z"] {
            assert_eq!(problem(name.as_bytes()), None, "{name}");
        }
    }
}
