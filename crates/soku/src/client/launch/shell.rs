//! Words for a POSIX shell: the remote command ssh hands to the login shell, and a
//! `-e` command line split as a shell would.

/// Quotes words for the remote shell, which ssh hands the command line to.
pub fn shell_quote_all(words: &[String]) -> String {
    words.iter().map(|w| shell_quote(w)).collect::<Vec<_>>().join(" ")
}

/// Quotes one word for a POSIX shell; plain words stay as they are. `=` is not plain:
/// a first word like `A=b` would be an assignment, not the command.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:@%+,".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Splits a `-e` command line into words as a POSIX shell does, with [`shlex::split`]:
/// whitespace separates, single and double quotes group, backslash escapes (outside
/// quotes, and inside double quotes before `$`, `` ` ``, `"`, `\` and a newline), and a
/// word starting with `#` begins a comment. Nothing is expanded.
pub fn shell_words(line: &str) -> anyhow::Result<Vec<String>> {
    if let Some(words) = shlex::split(line) {
        return Ok(words);
    }
    // shlex only says that the line is cut short; find out how by closing it.
    let closes = |end: &str| shlex::split(&format!("{line}{end}")).is_some();
    if closes("x") {
        anyhow::bail!("trailing \\ in {line:?}")
    } else if closes("'") {
        anyhow::bail!("unterminated ' in {line:?}")
    } else if closes("\"") {
        anyhow::bail!("unterminated \" in {line:?}")
    } else {
        anyhow::bail!("unterminated \" (ending in \\) in {line:?}")
    }
}
