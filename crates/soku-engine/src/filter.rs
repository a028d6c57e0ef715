//! `soku sync`'s include and exclude rules: gitignore-style patterns, decided in
//! rsync's order.
//!
//! A pattern is matched against a path relative to the transfer's root (the wire path,
//! as both sides name it):
//! - one with a `/` at its start or in its middle is anchored there (`/build`,
//!   `docs/*.html`); one without matches a name at any depth (`*.o`, `target`);
//! - one ending in `/` matches directories only (`cache/`);
//! - `*` and `?` stay within a name, `**` spans names, `[...]` is a class.
//!
//! The first rule that matches decides, as in rsync (`--include '*.keep' --exclude
//! '*'`); a path no rule matches is included. A directory excluded is not entered, so
//! nothing below it is sent, and at the target it is not deleted either.

use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use soku_proto::path::WirePath;
use soku_proto::sync::FilterRule;

/// A pattern the rules could not compile.
#[derive(Debug, thiserror::Error)]
#[error("pattern {pattern:?}: {why}")]
pub struct BadPattern {
    /// The pattern as given.
    pub pattern: String,
    /// Why, one line.
    pub why: String,
}

/// One compiled rule.
#[derive(Debug)]
struct Rule {
    include: bool,
    dirs_only: bool,
    matcher: GlobMatcher,
}

/// Compiled rules.
#[derive(Debug, Default)]
pub struct Filter {
    rules: Vec<Rule>,
}

impl Filter {
    /// Compiles `rules`, in order.
    pub fn new(rules: &[FilterRule]) -> Result<Filter, BadPattern> {
        let rules = rules
            .iter()
            .map(|rule| {
                let (include, pattern) = match rule {
                    FilterRule::Include(p) => (true, p.as_str()),
                    FilterRule::Exclude(p) => (false, p.as_str()),
                };
                compile(pattern).map(|(dirs_only, matcher)| Rule { include, dirs_only, matcher })
            })
            .collect::<Result<_, _>>()?;
        Ok(Filter { rules })
    }

    /// Whether there are no rules: everything is included.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether `path` (a directory if `is_dir`) is included.
    pub fn includes(&self, path: &WirePath, is_dir: bool) -> bool {
        if self.rules.is_empty() {
            return true;
        }
        let joined: Vec<u8> = path.0.iter().map(|n| n.as_bytes()).collect::<Vec<_>>().join(&b'/');
        let joined = crate::sys::name_of(&joined);
        let path = Path::new(&*joined);
        self.rules
            .iter()
            .find(|rule| (is_dir || !rule.dirs_only) && rule.matcher.is_match(path))
            .is_none_or(|rule| rule.include)
    }
}

/// A pattern's matcher, and whether it matches directories only.
fn compile(pattern: &str) -> Result<(bool, GlobMatcher), BadPattern> {
    let bad = |why: String| BadPattern { pattern: pattern.to_string(), why };
    let dirs_only = pattern.ends_with('/');
    let body = pattern.trim_end_matches('/');
    if body.is_empty() || body == "/" {
        return Err(bad("matches nothing: give a name or a path".into()));
    }
    let anchored = body.starts_with('/') || body.contains('/');
    let body = body.trim_start_matches('/');
    let full = if anchored { body.to_string() } else { format!("**/{body}") };
    let glob = GlobBuilder::new(&full)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| bad(e.kind().to_string()))?;
    Ok((dirs_only, glob.compile_matcher()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wp(path: &str) -> WirePath {
        WirePath(path.split('/').map(soku_proto::name::Name::from).collect())
    }

    fn filter(rules: &[(&str, bool)]) -> Filter {
        let rules: Vec<FilterRule> = rules
            .iter()
            .map(|(p, include)| {
                if *include {
                    FilterRule::Include(p.to_string())
                } else {
                    FilterRule::Exclude(p.to_string())
                }
            })
            .collect();
        Filter::new(&rules).expect("compiles")
    }

    #[test]
    fn a_name_matches_at_any_depth_and_a_path_from_the_root() {
        let f = filter(&[("*.o", false), ("/build", false), ("docs/*.html", false)]);
        assert!(!f.includes(&wp("a.o"), false));
        assert!(!f.includes(&wp("src/deep/a.o"), false));
        assert!(f.includes(&wp("src/a.c"), false));
        assert!(!f.includes(&wp("build"), true));
        assert!(f.includes(&wp("src/build"), true), "anchored at the root only");
        assert!(!f.includes(&wp("docs/index.html"), false));
        assert!(f.includes(&wp("docs/api/index.html"), false), "* stays within a name");
    }

    #[test]
    fn a_trailing_slash_matches_directories_only() {
        let f = filter(&[("cache/", false)]);
        assert!(!f.includes(&wp("a/cache"), true));
        assert!(f.includes(&wp("a/cache"), false));
    }

    #[test]
    fn the_first_rule_that_matches_decides() {
        let f = filter(&[("keep.log", true), ("*.log", false)]);
        assert!(f.includes(&wp("x/keep.log"), false));
        assert!(!f.includes(&wp("x/other.log"), false));
        let everything = filter(&[("*/", true), ("*.rs", true), ("*", false)]);
        assert!(everything.includes(&wp("src/main.rs"), false));
        assert!(everything.includes(&wp("src"), true));
        assert!(!everything.includes(&wp("src/notes.txt"), false));
    }

    #[test]
    fn double_stars_span_names_and_bad_patterns_are_named() {
        let f = filter(&[("/a/**/z.txt", false)]);
        assert!(!f.includes(&wp("a/z.txt"), false));
        assert!(!f.includes(&wp("a/b/c/z.txt"), false));
        assert!(f.includes(&wp("b/z.txt"), false));
        let err = Filter::new(&[FilterRule::Exclude("[z-a".into())]).expect_err("bad class");
        assert!(err.to_string().starts_with("pattern \"[z-a\": "), "{err}");
        assert!(Filter::new(&[FilterRule::Exclude("/".into())]).is_err());
    }
}
