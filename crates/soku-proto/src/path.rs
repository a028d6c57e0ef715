//! Paths on the wire and where they land.
//!
//! A wire path is a list of components relative to the target; the first component is
//! the name of a top-level source. Every component from a peer is checked: not empty,
//! not `.` or `..`, no `/`, no NUL. A receiver that asked for named sources also checks
//! that each top-level name is one it asked for (the scp CVE-2019-6111 class: a hostile
//! server sending names the user never requested).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ProtoError;

/// Most components a wire path may have (bounds recursion and memory).
pub const MAX_DEPTH: usize = 256;
/// Longest component we accept (Linux NAME_MAX).
pub const MAX_COMPONENT: usize = 255;

/// A relative path as a list of components.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WirePath(pub Vec<String>);

impl WirePath {
    /// Checks every component; returns the path if all are safe.
    pub fn validate(&self) -> Result<&Self, ProtoError> {
        if self.0.is_empty() {
            return Err(ProtoError::UnsafePath("empty path".into()));
        }
        if self.0.len() > MAX_DEPTH {
            return Err(ProtoError::UnsafePath(format!("deeper than {MAX_DEPTH} levels")));
        }
        for part in &self.0 {
            check_component(part)?;
        }
        Ok(self)
    }

    /// The top-level name.
    pub fn top(&self) -> Option<&str> {
        self.0.first().map(String::as_str)
    }

    /// The components below the top-level name.
    pub fn below_top(&self) -> &[String] {
        self.0.get(1..).unwrap_or(&[])
    }
}

impl std::fmt::Display for WirePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.join("/"))
    }
}

/// Checks one component of a peer's path.
pub fn check_component(part: &str) -> Result<(), ProtoError> {
    let bad = |why: &str| Err(ProtoError::UnsafePath(format!("{part:?}: {why}")));
    if part.is_empty() {
        return bad("empty component");
    }
    if part == "." || part == ".." {
        return bad("relative component");
    }
    if part.contains('/') || part.contains('\\') {
        return bad("contains a path separator");
    }
    if part.contains('\0') {
        return bad("contains a NUL byte");
    }
    if part.len() > MAX_COMPONENT {
        return bad("component too long");
    }
    Ok(())
}

/// Where received entries land, decided as scp decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The target is an existing directory: each source lands inside it under its own name.
    IntoDir(PathBuf),
    /// A single source lands under the target name itself (new name or existing file).
    AsName(PathBuf),
    /// The directory `dir` that an unfinished copy of a single source named `name` made
    /// as its [`Target::AsName`] (it holds the receiver's mark): a source of that name
    /// lands in it as before, so that running the same command again resumes the copy
    /// rather than starting it over in `dir/name`; any other name lands inside it, as
    /// in [`Target::IntoDir`].
    Resumed {
        /// The directory the copy made.
        dir: PathBuf,
        /// The top-level name of the source it was made for.
        name: String,
    },
}

impl Target {
    /// Decides from the target path, whether it is an existing directory, and how many
    /// sources come. Several sources need an existing directory.
    pub fn resolve(target: &Path, is_dir: bool, sources: u32) -> Result<Self, TargetError> {
        if is_dir {
            Ok(Target::IntoDir(target.to_path_buf()))
        } else if target.as_os_str().as_encoded_bytes().ends_with(b"/") {
            // `dir/` names a directory: never a file called `dir`.
            Err(TargetError::NoSuchDirectory(target.to_path_buf()))
        } else if sources > 1 {
            Err(TargetError::NotADirectory(target.to_path_buf()))
        } else {
            Ok(Target::AsName(target.to_path_buf()))
        }
    }

    /// The local path for a checked wire path.
    pub fn local_path(&self, wire: &WirePath) -> Result<PathBuf, ProtoError> {
        wire.validate()?;
        let mut out = match self {
            Target::IntoDir(dir) => dir.join(wire.top().unwrap_or_default()),
            Target::AsName(name) => name.clone(),
            Target::Resumed { dir, name } if wire.top() == Some(name.as_str()) => dir.clone(),
            Target::Resumed { dir, .. } => dir.join(wire.top().unwrap_or_default()),
        };
        for part in wire.below_top() {
            out.push(part);
        }
        Ok(out)
    }

    /// [`Target::root`] when it does not exist (or is not a directory): nothing can land.
    pub fn missing_root(&self) -> Option<PathBuf> {
        let root = self.root();
        // A bare name's root is the empty path: the working directory.
        let dir = if root.as_os_str().is_empty() { Path::new(".") } else { root };
        (!dir.is_dir()).then(|| root.to_path_buf())
    }

    /// The directory that must already exist for this target (the parent of a new name;
    /// the parent of a resumed directory, where both of its layouts lie).
    pub fn root(&self) -> &Path {
        match self {
            Target::IntoDir(dir) => dir,
            Target::AsName(name) | Target::Resumed { dir: name, .. } => {
                name.parent().unwrap_or(Path::new("."))
            }
        }
    }

    /// Whether the top-level name `top` lands under the target's own name (a single
    /// source under [`Target::AsName`], or the one a [`Target::Resumed`] was made for):
    /// such a target takes no second top-level name.
    pub fn takes_name(&self, top: &str) -> bool {
        match self {
            Target::IntoDir(_) => false,
            Target::AsName(_) => true,
            Target::Resumed { name, .. } => name == top,
        }
    }
}

/// Why a target cannot take the sources.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    /// Several sources, but the target is not a directory.
    #[error("{0}: not a directory (several sources need an existing target directory)")]
    NotADirectory(PathBuf),
    /// The target names a directory (by a final `/`, or as the parent of a new name)
    /// that does not exist.
    #[error("{0}: no such directory: create it first, or name an existing one")]
    NoSuchDirectory(PathBuf),
}

/// The top-level name, or the glob of names, that a requested source's entries carry:
/// its last component. `None` when that is empty, `.`, `..` or `~`: a directory named
/// by its real name, which only the sender knows.
pub fn requested_name(source: &str) -> Option<&str> {
    let base = source.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    (!matches!(base, "" | "." | ".." | "~")).then_some(base)
}

/// How a requested source's glob matches a name that arrives: as the shell and glob(3) do
/// for scp, a `*` or `?` never matches a leading dot or a `/` (the sending side expands
/// by the same rule).
pub const GLOB_OPTIONS: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: true,
};

/// The top-level names a receiver accepts from a sender it asked for `requested` sources.
#[derive(Debug, Clone)]
pub struct NameFilter {
    rules: Vec<NameRule>,
}

#[derive(Debug, Clone)]
enum NameRule {
    /// The user named a directory by a relative name (`.`, `~`): any safe name.
    Any,
    /// The exact name, or the glob it spells.
    Named { literal: String, glob: Option<glob::Pattern> },
}

impl NameFilter {
    /// Builds the filter from the source paths the user asked for. A source whose last
    /// component is empty, `.`, `..` or `~` names a directory by its real name, which
    /// only the sender knows: any single safe name is accepted for it.
    pub fn for_requested<'a>(requested: impl IntoIterator<Item = &'a str>) -> Self {
        let rules = requested
            .into_iter()
            .map(|source| match requested_name(source) {
                None => NameRule::Any,
                Some(base) => NameRule::Named {
                    literal: base.to_string(),
                    glob: glob::Pattern::new(base).ok(),
                },
            })
            .collect();
        Self { rules }
    }

    /// Accepts a top-level name if it matches one of the requested sources.
    pub fn check(&self, name: &str) -> Result<(), ProtoError> {
        check_component(name)?;
        let ok = self.rules.iter().any(|rule| match rule {
            NameRule::Any => true,
            NameRule::Named { literal, glob } => {
                literal == name || glob.as_ref().is_some_and(|g| g.matches_with(name, GLOB_OPTIONS))
            }
        });
        if ok {
            Ok(())
        } else {
            Err(ProtoError::UnexpectedName { name: name.to_string() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wp(parts: &[&str]) -> WirePath {
        WirePath(parts.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn traversal_components_are_refused() {
        for bad in [
            wp(&[".."]),
            wp(&["a", ".."]),
            wp(&["a/../../etc"]),
            wp(&["/etc/passwd"]),
            wp(&["a", ""]),
            wp(&["."]),
            wp(&["a\0b"]),
            wp(&["..\\x"]),
            wp(&[]),
        ] {
            assert!(matches!(bad.validate(), Err(ProtoError::UnsafePath(_))), "{bad:?}");
        }
        assert!(wp(&["dir", "file with spaces", "ünï"]).validate().is_ok());
    }

    #[test]
    fn target_mapping_follows_scp() {
        let into = Target::resolve(Path::new("/t"), true, 2).expect("dir");
        assert_eq!(into.local_path(&wp(&["a", "b"])).expect("ok"), Path::new("/t/a/b"));
        let named = Target::resolve(Path::new("/t/new"), false, 1).expect("name");
        assert_eq!(named.local_path(&wp(&["src", "x"])).expect("ok"), Path::new("/t/new/x"));
        assert_eq!(named.local_path(&wp(&["src"])).expect("ok"), Path::new("/t/new"));
        assert_eq!(
            Target::resolve(Path::new("/t/f"), false, 2),
            Err(TargetError::NotADirectory(PathBuf::from("/t/f")))
        );
    }

    #[test]
    fn names_not_requested_are_refused() {
        let filter = NameFilter::for_requested(["dir/report.txt", "logs/*.log"]);
        assert!(filter.check("report.txt").is_ok());
        assert!(filter.check("a.log").is_ok());
        assert!(matches!(filter.check(".bashrc"), Err(ProtoError::UnexpectedName { .. })));
        assert!(matches!(filter.check("authorized_keys"), Err(ProtoError::UnexpectedName { .. })));
        assert!(filter.check("..").is_err());
        let any = NameFilter::for_requested(["~", "somedir/."]);
        assert!(any.check("whatever").is_ok());
        assert!(any.check("a/b").is_err());
    }

    #[test]
    fn a_name_with_glob_characters_matches_itself() {
        let filter = NameFilter::for_requested(["data[1].csv"]);
        assert!(filter.check("data[1].csv").is_ok());
    }
}
