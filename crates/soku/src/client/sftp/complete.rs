//! Tab completion at the prompt: command names, and local or remote paths as the
//! command takes them (`put`'s sources and `get`'s target are local, and so on). A
//! remote directory is listed through the session once and kept until something
//! changes the remote side (`Shell::forget_listings`).
//!
//! Only names a terminal can show and a user can type are offered: a remote name that
//! is not UTF-8 or holds a control character is left out rather than written into the
//! line raw.

use std::sync::{Arc, Mutex};

use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};
use soku_proto::name::Name;

use super::browse::Browse;
use super::command::COMMANDS;
use super::dirs::RemoteDirs;
use super::shell::Listings;

/// The prompt's helper: completion only.
pub struct Completion {
    pub rt: tokio::runtime::Handle,
    pub browse: Arc<tokio::sync::Mutex<Browse>>,
    pub dirs: Arc<Mutex<RemoteDirs>>,
    pub listings: Listings,
    pub local: FilenameCompleter,
}

/// Which side a word's path is on.
#[derive(Debug, PartialEq, Eq)]
enum Side {
    Local,
    Remote,
    Neither,
}

impl Completer for Completion {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let start = word_start(before);
        let words_before = before[..start].split_whitespace().collect::<Vec<_>>();
        let Some((command, args)) = words_before.split_first() else {
            let typed = &before[start..];
            let names = COMMANDS
                .iter()
                .filter(|(name, _)| name.starts_with(typed) && *name != "!")
                .map(|(name, _)| Pair {
                    display: name.to_string(),
                    replacement: format!("{name} "),
                })
                .collect();
            return Ok((start, names));
        };
        let positional = args.iter().filter(|a| !a.starts_with('-')).count();
        match side(command, positional) {
            Side::Local => self.local.complete(line, pos, ctx),
            Side::Remote => Ok(self.remote(before, start)),
            Side::Neither => Ok((pos, Vec::new())),
        }
    }
}

impl Completion {
    /// Candidates for the remote path that starts at `start` in `before`.
    fn remote(&self, before: &str, start: usize) -> (usize, Vec<Pair>) {
        let typed = unescape(&before[start..]);
        // The name being completed starts after the word's last slash.
        let name_start = match before[start..].rfind('/') {
            Some(i) => start + i + 1,
            None => start,
        };
        let (dir_typed, prefix) = match typed.rfind('/') {
            Some(i) => (&typed[..=i], &typed[i + 1..]),
            None => ("", typed.as_str()),
        };
        let dir =
            self.dirs.lock().map(|d| d.resolve(dir_typed)).unwrap_or_else(|_| Name::from("."));
        let Some(entries) = self.entries(&dir) else { return (name_start, Vec::new()) };
        let mut found: Vec<Pair> = entries
            .iter()
            .filter_map(|(name, is_dir)| Some((name.to_str()?, is_dir)))
            .filter(|(name, _)| *name != "." && *name != "..")
            .filter(|(name, _)| name.starts_with(prefix))
            .filter(|(name, _)| prefix.starts_with('.') || !name.starts_with('.'))
            .filter(|(name, _)| !name.chars().any(char::is_control))
            .map(|(name, is_dir)| {
                let end = if *is_dir { "/" } else { " " };
                Pair {
                    display: format!("{name}{}", if *is_dir { "/" } else { "" }),
                    replacement: format!("{}{end}", escape(name)),
                }
            })
            .collect();
        found.sort_by(|a, b| a.display.cmp(&b.display));
        (name_start, found)
    }

    /// The names in `dir` and whether each is a directory: kept, or listed now.
    fn entries(&self, dir: &Name) -> Option<Vec<(Name, bool)>> {
        if let Some(kept) = self.listings.lock().ok()?.get(dir.as_bytes()) {
            return Some(kept.clone());
        }
        let listed = self.rt.block_on(async { self.browse.lock().await.list(dir).await }).ok()?;
        let names: Vec<(Name, bool)> = listed
            .into_iter()
            .map(|e| {
                let is_dir = e.is_dir();
                (e.name, is_dir)
            })
            .collect();
        self.listings.lock().ok()?.insert(dir.as_bytes().to_vec(), names.clone());
        Some(names)
    }
}

/// Where the word under the cursor starts: after the last space not escaped by a
/// backslash.
fn word_start(before: &str) -> usize {
    let bytes = before.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b' ' | b'\t' => start = i + 1,
            _ => {}
        }
        i += 1;
    }
    start.min(before.len())
}

/// Which side the `positional`-th path (from 0) of `command` is on.
fn side(command: &str, positional: usize) -> Side {
    match command {
        "lcd" | "lchdir" | "lls" | "ldir" | "lmkdir" | "mput" => Side::Local,
        "put" if positional == 0 => Side::Local,
        "put" => Side::Remote,
        "get" if positional == 1 => Side::Local,
        "cd" | "chdir" | "ls" | "dir" | "get" | "mget" | "rm" | "rmdir" | "mkdir" | "rename"
        | "df" => Side::Remote,
        "chmod" if positional >= 1 => Side::Remote,
        _ => Side::Neither,
    }
}

/// A name as typed on the line: spaces, quotes and backslashes escaped.
fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(
            c,
            ' ' | '\t'
                | '\\'
                | '\''
                | '"'
                | '$'
                | '`'
                | '#'
                | '*'
                | '?'
                | '['
                | '&'
                | ';'
                | '|'
                | '('
                | ')'
                | '<'
                | '>'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A word as typed, its backslashes taken off.
fn unescape(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut chars = word.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

impl Hinter for Completion {
    type Hint = String;
}

impl Highlighter for Completion {}

impl Validator for Completion {}

impl Helper for Completion {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_command_completes_on_its_side() {
        assert_eq!(side("put", 0), Side::Local);
        assert_eq!(side("put", 1), Side::Remote);
        assert_eq!(side("get", 0), Side::Remote);
        assert_eq!(side("get", 1), Side::Local);
        assert_eq!(side("lcd", 0), Side::Local);
        assert_eq!(side("chmod", 0), Side::Neither);
        assert_eq!(side("chmod", 1), Side::Remote);
        assert_eq!(side("bye", 0), Side::Neither);
    }

    #[test]
    fn words_with_escaped_spaces_stay_one() {
        let line = "get my\\ dir/fi";
        let start = word_start(line);
        assert_eq!(&line[start..], "my\\ dir/fi");
        assert_eq!(unescape(&line[start..]), "my dir/fi");
        assert_eq!(escape("a b*"), "a\\ b\\*");
        assert_eq!(word_start("ls "), 3);
    }
}
