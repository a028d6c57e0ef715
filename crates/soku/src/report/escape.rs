//! Text from the peer or the file system made safe for the page's HTML and SVG.

/// `text` safe inside HTML and SVG text and attribute values: file names and messages
/// come from the peer or the file system and may hold markup.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters have no business in a page (and some are invalid in
            // XML, so in inline SVG): shown as the replacement character.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            escape("<script>alert(1)</script> & \"'\u{1}"),
            "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;&#39;\u{fffd}"
        );
    }
}
