//! The include and exclude rules in the order the user gave them. clap keeps each
//! option's values apart; the first rule that matches a path decides (as in rsync), so
//! their places on the command line are what orders them.

use std::path::PathBuf;

use clap::ArgMatches;
use soku_proto::sync::FilterRule;

/// The rules `matches` (the copy's or the sync's) hold, in command-line order, with
/// each `--exclude-from` file's lines in its place; an unreadable file is named.
pub fn ordered(matches: &ArgMatches) -> Result<Vec<FilterRule>, String> {
    let mut placed: Vec<(usize, Vec<FilterRule>)> = Vec::new();
    let mut take = |id: &str, rule: fn(String) -> FilterRule| {
        let values = matches.get_many::<String>(id).into_iter().flatten();
        let indices = matches.indices_of(id).into_iter().flatten();
        for (index, value) in indices.zip(values) {
            placed.push((index, vec![rule(value.clone())]));
        }
    };
    take("exclude", FilterRule::Exclude);
    take("include", FilterRule::Include);
    let files = matches.get_many::<PathBuf>("exclude_from").into_iter().flatten();
    let indices = matches.indices_of("exclude_from").into_iter().flatten();
    for (index, file) in indices.zip(files) {
        let text = std::fs::read(file).map_err(|e| {
            format!(
                "--exclude-from {}: cannot read it: {e}",
                crate::ui::visible(&file.to_string_lossy())
            )
        })?;
        placed.push((index, patterns(&text)));
    }
    placed.sort_by_key(|(index, _)| *index);
    Ok(placed.into_iter().flat_map(|(_, rules)| rules).collect())
}

/// An exclude file's patterns: one per line, blank lines and `#` comments skipped.
fn patterns(text: &[u8]) -> Vec<FilterRule> {
    String::from_utf8_lossy(text)
        .lines()
        .map(|line| line.trim_end_matches('\r'))
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|line| FilterRule::Exclude(line.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::cli::args::Cli;

    #[test]
    fn rules_keep_their_places_and_files_theirs() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let list = tmp.path().join("ex");
        std::fs::write(&list, "# build output\n*.o\n\ntarget/\n").expect("write");
        let args = [
            "soku".into(),
            "-r".into(),
            "--include".into(),
            "keep.o".into(),
            format!("--exclude-from={}", list.display()),
            "--exclude".into(),
            "*.log".into(),
            "a".into(),
            "h:b".into(),
        ];
        let matches = Cli::command().try_get_matches_from(args).expect("parses");
        Cli::from_arg_matches(&matches).expect("fits");
        let rules = ordered(&matches).expect("readable");
        assert_eq!(
            rules,
            [
                FilterRule::Include("keep.o".into()),
                FilterRule::Exclude("*.o".into()),
                FilterRule::Exclude("target/".into()),
                FilterRule::Exclude("*.log".into()),
            ]
        );
    }
}
