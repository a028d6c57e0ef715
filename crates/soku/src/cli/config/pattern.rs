//! ssh_config's host patterns (ssh_config(5), PATTERNS): `*` matches any run of
//! characters, `?` exactly one, a leading `!` negates. A list of patterns matches a host
//! when one pattern matches it and no negated pattern does. Host names compare without
//! regard to case, as ssh lowercases the name it matches.
//!
//! Hand-written rather than a glob crate's: ssh patterns have no `[...]` classes and no
//! path separators, and a glob library would give `[` (as in `[::1]`) a meaning ssh does
//! not.

/// A `[host."..."]` section's pattern list, whitespace or comma separated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPatterns {
    patterns: Vec<(bool, String)>,
}

impl HostPatterns {
    /// Splits a pattern list; `None` when it holds no positive pattern (a list of
    /// negations alone matches nothing, as in ssh).
    pub fn parse(list: &str) -> Option<HostPatterns> {
        let patterns: Vec<(bool, String)> = list
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|p| !p.is_empty())
            .map(|p| match p.strip_prefix('!') {
                Some(rest) => (true, rest.to_ascii_lowercase()),
                None => (false, p.to_ascii_lowercase()),
            })
            .collect();
        patterns.iter().any(|(negated, _)| !negated).then_some(HostPatterns { patterns })
    }

    /// Whether `host` (as written on the command line) is matched.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        let mut positive = false;
        for (negated, pattern) in &self.patterns {
            if wildcard_match(pattern.as_bytes(), host.as_bytes()) {
                if *negated {
                    return false;
                }
                positive = true;
            }
        }
        positive
    }
}

/// `*` and `?` wildcard matching with one remembered star: linear in practice, and never
/// worse than quadratic, whatever the pattern.
fn wildcard_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(list: &str, host: &str) -> bool {
        HostPatterns::parse(list).is_some_and(|p| p.matches(host))
    }

    #[test]
    fn wildcards_match_as_in_ssh() {
        assert!(matches("*", "anything.example.org"));
        assert!(matches("*.example.org", "db.example.org"));
        assert!(!matches("*.example.org", "example.org"));
        assert!(matches("db?", "db1"));
        assert!(!matches("db?", "db12"));
        assert!(matches("a*b*c", "aXXbYYbc"));
        assert!(!matches("a*b*c", "aXXbYYb"));
        assert!(matches("exact", "exact"));
        assert!(!matches("exact", "exactly"));
    }

    #[test]
    fn case_does_not_matter() {
        assert!(matches("*.Example.ORG", "DB.example.org"));
    }

    #[test]
    fn lists_match_any_and_negations_veto() {
        assert!(matches("alpha beta,gamma", "gamma"));
        assert!(matches("*.lab !bad.lab", "good.lab"));
        assert!(!matches("*.lab !bad.lab", "bad.lab"));
        assert!(!matches("!bad.lab *.lab", "bad.lab"), "a negation vetoes wherever it stands");
    }

    #[test]
    fn negations_alone_match_nothing() {
        assert!(HostPatterns::parse("!a !b").is_none());
        assert!(HostPatterns::parse("  ").is_none());
    }

    #[test]
    fn brackets_are_literal() {
        assert!(matches("[::1]", "[::1]"));
        assert!(!matches("[ab]", "a"));
    }
}
