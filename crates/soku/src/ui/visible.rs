//! Text for a terminal that the terminal shows and never acts on.
//!
//! File names and the peer's messages reach the user's terminal inside soku's own
//! lines. A name holding `ESC [ 2 J` would clear the screen, an OSC sequence would set
//! the window title, a newline followed by `soku: ...` would forge a line of ours
//! (the CVE-2019-6109 class, which OpenSSH's scp answers with `vis(3)` since 8.0).
//! Every line soku prints for people goes through [`visible`] (or [`say`]): what a
//! terminal would act on is written out as text instead.
//!
//! - C0 controls and DEL: `\n`, `\r`, `\t`, otherwise octal as scp shows them (`\033`).
//! - C1 controls (U+0080 to U+009F; U+009B alone is a CSI on some terminals) and the
//!   invisible characters that reorder or hide text (bidi overrides and isolates,
//!   zero-width characters, line and paragraph separators, tag characters): `\u{202e}`.
//! - Bytes that are not UTF-8 ([`visible_bytes`], for another program's output): `\x9b`.
//!
//! A backslash is left as it is, as scp leaves it: a name that spells `\033` itself
//! looks the same as one holding ESC, but neither acts on the terminal.
//! `--json` (serde_json escapes every control character) and `--report` (HTML-escaped)
//! have their own escaping.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` is shown as an escape rather than as itself.
fn hidden(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        // Arabic letter mark; left-to-right and right-to-left marks; zero-width space,
        // non-joiner and joiner.
        | '\u{61c}' | '\u{200b}'..='\u{200f}'
        // Line and paragraph separators; bidi embeddings and overrides.
        | '\u{2028}'..='\u{202e}'
        // Word joiner, invisible operators, bidi isolates, deprecated format controls.
        | '\u{2060}'..='\u{206f}'
        // Byte-order mark; interlinear annotation controls.
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}'
        // Tag characters.
        | '\u{e0000}'..='\u{e007f}')
}

fn push_escaped(out: &mut String, c: char) {
    let _ = match c {
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        '\u{0}'..='\u{1f}' | '\u{7f}' => write!(out, "\\{:03o}", c as u32),
        _ => write!(out, "\\u{{{:x}}}", c as u32),
    };
}

/// `text` with everything a terminal would act on written out as visible text.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`visible`] for bytes that may not be UTF-8: each byte of an invalid sequence as
/// `\xNN`.
pub fn visible_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&visible(chunk.valid()));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// Prints `line` on stderr, made [`visible`], and a newline.
pub fn say(line: &str) {
    eprintln!("{}", visible(line));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: a control character, a C1 CSI, a bidi override or a newline reaching
    /// the terminal raw from a file name or a peer's message.
    #[test]
    fn what_a_terminal_acts_on_is_written_out() {
        let name = "x\u{1b}[2J\u{1b}[HRED\nsoku: fake line";
        assert_eq!(visible(name), "x\\033[2J\\033[HRED\\nsoku: fake line");
        assert_eq!(visible("a\rb\tc\u{7}d\u{7f}e\u{0}"), "a\\rb\\tc\\007d\\177e\\000");
        assert_eq!(visible("\u{9b}31m \u{85}"), "\\u{9b}31m \\u{85}");
        assert_eq!(
            visible("evil\u{202e}txt.exe \u{2066}x\u{2069} a\u{200b}b \u{2028} \u{feff}"),
            "evil\\u{202e}txt.exe \\u{2066}x\\u{2069} a\\u{200b}b \\u{2028} \\u{feff}"
        );
        assert_eq!(visible("tag\u{e0041}"), "tag\\u{e0041}");
        // The output holds nothing hidden: escaping twice changes nothing more.
        let once = visible(name).into_owned();
        assert_eq!(visible(&once), once);
    }

    /// Catches: ordinary text (accents, CJK, emoji, a backslash) changed or copied.
    #[test]
    fn printable_text_is_left_as_it_is() {
        for text in ["plain.txt", "ünïcödé 日本語 🦀", "C:\\dir\\033", "a b\u{a0}c", ""] {
            assert!(matches!(visible(text), Cow::Borrowed(t) if t == text), "{text:?}");
        }
    }

    /// Catches: bytes that are not UTF-8 dropped, replaced unseen, or passed raw.
    #[test]
    fn bytes_that_are_not_utf8_are_shown_in_hex() {
        assert_eq!(
            visible_bytes(b"ok \x9b31m \xff\xfe\x1b]0;t\x07"),
            "ok \\x9b31m \\xff\\xfe\\033]0;t\\007"
        );
        assert_eq!(visible_bytes("日本".as_bytes()), "日本");
    }
}
