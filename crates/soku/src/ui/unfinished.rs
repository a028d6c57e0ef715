//! The summary of a copy stopped because the receiving side ran out of space, printed
//! after its error line: how many files arrived whole, which are partial and the space
//! their partial files take, and how to go on (the same command, once there is space)
//! or to get the space back (remove the partial files).

use soku_proto::message::{Unfinished, UNFINISHED_NAMES};

use super::units::human_bytes;
use super::visible;

/// The summary's lines (without `soku: `), about the receiving side named `side`
/// ("local" or "remote"). Names come from the receiving side (the peer's, on an
/// upload): each is made [`visible`].
pub fn summary(facts: &Unfinished, side: &str) -> Vec<String> {
    let whole = match facts.planned {
        0 => format!("{} file{} arrived whole", facts.whole, plural(facts.whole)),
        planned => format!("{} of {planned} files arrived whole", facts.whole),
    };
    if facts.partial == 0 {
        return vec![
            format!("the copy stopped: {whole}; no partial file is kept"),
            "run the same command again once there is space to copy the rest".into(),
        ];
    }
    // A peer's list is held to what it may send.
    let shown: Vec<String> = facts
        .names
        .iter()
        .take((facts.partial as usize).min(UNFINISHED_NAMES))
        .map(|n| visible(n).into_owned())
        .collect();
    let unlisted = (facts.partial as usize).saturating_sub(shown.len());
    let mut names = shown.join(", ");
    if unlisted > 0 {
        names.push_str(&format!(" and {unlisted} more"));
    }
    let (are, their) = if facts.partial == 1 { ("is", "its") } else { ("are", "their") };
    let target = if facts.target.is_empty() { "." } else { facts.target.as_str() };
    let dir = shlex::try_quote(target).map_or_else(|_| target.to_string(), |q| q.into_owned());
    let host = if side == "remote" { " on the remote host" } else { "" };
    vec![
        format!(
            "the copy stopped: {whole}; {} {are} partial, taking {} on the {side} side: {names}",
            facts.partial,
            human_bytes(facts.partial_bytes)
        ),
        format!(
            "run the same command again once there is space: it resumes {}; or, to free \
             that space, remove {their} partial file{} (.NAME.soku-part beside each \
             NAME){host}: find {} -name '.*.soku-part' -delete",
            if facts.partial == 1 { "it" } else { "them" },
            plural(facts.partial),
            visible(&dir)
        ),
    ]
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(partial: u32, names: &[&str]) -> Unfinished {
        Unfinished {
            target: "/mnt/small".into(),
            planned: 9,
            whole: 3,
            partial,
            partial_bytes: 5 << 20,
            names: names.iter().map(|n| n.to_string()).collect(),
        }
    }

    /// Catches: a summary that misses the counts, the space, the names, or the way to
    /// go on or to clean up.
    #[test]
    fn the_summary_counts_names_and_says_how_to_go_on() {
        let lines = summary(&facts(2, &["/mnt/small/a.bin", "/mnt/small/b.bin"]), "local");
        assert_eq!(
            lines,
            [
                "the copy stopped: 3 of 9 files arrived whole; 2 are partial, taking 5.0 MiB \
                 on the local side: /mnt/small/a.bin, /mnt/small/b.bin",
                "run the same command again once there is space: it resumes them; or, to \
                 free that space, remove their partial files (.NAME.soku-part beside each \
                 NAME): find /mnt/small -name '.*.soku-part' -delete",
            ]
        );
    }

    /// Catches: an unbounded list, a name that acts on the terminal, a directory the
    /// shell would split.
    #[test]
    fn long_lists_are_cut_and_names_are_made_visible() {
        let mut f = facts(25, &["x\u{1b}[2Jy", "b"]);
        f.target = "my dir".into();
        let lines = summary(&f, "remote");
        assert!(lines[0].ends_with(": x\\033[2Jy, b and 23 more"), "{}", lines[0]);
        assert!(lines[0].contains("on the remote side"), "{}", lines[0]);
        assert!(lines[1].contains("on the remote host: find 'my dir' -name"), "{}", lines[1]);
    }

    #[test]
    fn one_partial_file_and_none() {
        let one = summary(&facts(1, &["a"]), "local");
        assert!(one[0].contains("; 1 is partial, taking"), "{}", one[0]);
        assert!(one[1].contains("it resumes it; or, to free that space, remove its partial file ("));
        let mut none = facts(0, &[]);
        none.planned = 0;
        none.whole = 1;
        let none = summary(&none, "local");
        assert_eq!(none[0], "the copy stopped: 1 file arrived whole; no partial file is kept");
    }
}
