//! Paths on the wire and where they land.
//!
//! A wire path is a list of components relative to the target; the first component is
//! the name of a top-level source. Every component from a peer is checked: not empty,
//! not `.` or `..`, no `/`, no NUL. A receiver that asked for named sources also checks
//! that each top-level name is one it asked for (the scp CVE-2019-6111 class: a hostile
//! server sending names the user never requested). A component is a [`Name`]: bytes,
//! UTF-8 or not, as Unix file names are.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::name::Name;
use crate::ProtoError;

/// Most components a wire path may have (bounds recursion and memory).
pub const MAX_DEPTH: usize = 256;
/// Longest component we accept (Linux NAME_MAX).
pub const MAX_COMPONENT: usize = 255;

/// A relative path as a list of components.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WirePath(pub Vec<Name>);

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
            check_component(part.as_bytes())?;
        }
        Ok(self)
    }

    /// The top-level name.
    pub fn top(&self) -> Option<&Name> {
        self.0.first()
    }

    /// The components below the top-level name.
    pub fn below_top(&self) -> &[Name] {
        self.0.get(1..).unwrap_or(&[])
    }

    /// Whether every component is UTF-8, as a peer from before
    /// [`crate::name::BYTE_NAMES_SINCE_VERSION`] needs.
    pub fn is_utf8(&self) -> bool {
        self.0.iter().all(Name::is_utf8)
    }
}

impl std::fmt::Display for WirePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, part) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            write!(f, "{part}")?;
        }
        Ok(())
    }
}

/// Checks one component of a peer's path (bytes: a name need not be UTF-8).
pub fn check_component(part: &[u8]) -> Result<(), ProtoError> {
    let bad =
        |why: &str| Err(ProtoError::UnsafePath(format!("{:?}: {why}", Name::from_bytes(part))));
    if part.is_empty() {
        return bad("empty component");
    }
    if part == b"." || part == b".." {
        return bad("relative component");
    }
    if part.contains(&b'/') || part.contains(&b'\\') {
        return bad("contains a path separator");
    }
    if part.contains(&0) {
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
        name: Name,
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
        fn local(part: &Name) -> Result<&std::ffi::OsStr, ProtoError> {
            part.to_os().ok_or_else(|| {
                ProtoError::UnsafePath(format!("{part}: a name this system cannot spell"))
            })
        }
        let top = wire.top().ok_or_else(|| ProtoError::UnsafePath("empty path".into()))?;
        let mut out = match self {
            Target::IntoDir(dir) => dir.join(local(top)?),
            Target::AsName(name) => name.clone(),
            Target::Resumed { dir, name } if top == name => dir.clone(),
            Target::Resumed { dir, .. } => dir.join(local(top)?),
        };
        for part in wire.below_top() {
            out.push(local(part)?);
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
    pub fn takes_name(&self, top: &Name) -> bool {
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
    #[error(
        "{}: not a directory (several sources need an existing target directory)",
        crate::name::shown(.0)
    )]
    NotADirectory(PathBuf),
    /// The target names a directory (by a final `/`, or as the parent of a new name)
    /// that does not exist.
    #[error(
        "{}: no such directory: create it first, or name an existing one",
        crate::name::shown(.0)
    )]
    NoSuchDirectory(PathBuf),
    /// A sync's target directory was missing and could not be made.
    #[error("{}: cannot make the target directory: {}", crate::name::shown(.0), .1)]
    CannotMake(PathBuf, String),
}

/// The top-level name, or the glob of names, that a requested source's entries carry:
/// its last component. `None` when that is empty, `.`, `..` or `~`: a directory named
/// by its real name, which only the sender knows.
pub fn requested_name(source: &[u8]) -> Option<&[u8]> {
    let end = source.iter().rposition(|&b| b != b'/').map_or(0, |last| last + 1);
    let trimmed = &source[..end];
    let base = trimmed.rsplit(|&b| b == b'/').next().unwrap_or(b"");
    (!matches!(base, b"" | b"." | b".." | b"~")).then_some(base)
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
    /// The exact name, or the glob it spells (over [`Name::glob_text`]).
    Named { literal: Name, glob: Option<glob::Pattern> },
}

impl NameFilter {
    /// Builds the filter from the source paths the user asked for. A source whose last
    /// component is empty, `.`, `..` or `~` names a directory by its real name, which
    /// only the sender knows: any single safe name is accepted for it.
    pub fn for_requested<'a>(requested: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let rules = requested
            .into_iter()
            .map(|source| match requested_name(source) {
                None => NameRule::Any,
                Some(base) => NameRule::Named {
                    literal: Name::from_bytes(base),
                    glob: glob::Pattern::new(&crate::name::glob_text(base)).ok(),
                },
            })
            .collect();
        Self { rules }
    }

    /// Accepts a top-level name if it matches one of the requested sources. A name
    /// that is not UTF-8 is matched byte for byte, and by a glob through
    /// [`Name::glob_text`].
    pub fn check(&self, name: &Name) -> Result<(), ProtoError> {
        check_component(name.as_bytes())?;
        let ok = self.rules.iter().any(|rule| match rule {
            NameRule::Any => true,
            NameRule::Named { literal, glob } => {
                literal.as_bytes() == name.as_bytes()
                    || glob
                        .as_ref()
                        .is_some_and(|g| g.matches_with(&name.glob_text(), GLOB_OPTIONS))
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
        WirePath(parts.iter().map(|s| Name::from(*s)).collect())
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
        let filter = NameFilter::for_requested([&b"dir/report.txt"[..], b"logs/*.log"]);
        let check = |name: &str| filter.check(&Name::from(name));
        assert!(check("report.txt").is_ok());
        assert!(check("a.log").is_ok());
        assert!(matches!(check(".bashrc"), Err(ProtoError::UnexpectedName { .. })));
        assert!(matches!(check("authorized_keys"), Err(ProtoError::UnexpectedName { .. })));
        assert!(check("..").is_err());
        let any = NameFilter::for_requested([&b"~"[..], b"somedir/."]);
        assert!(any.check(&Name::from("whatever")).is_ok());
        assert!(any.check(&Name::from("a/b")).is_err());
    }

    #[test]
    fn a_name_with_glob_characters_matches_itself() {
        let filter = NameFilter::for_requested([&b"data[1].csv"[..]]);
        assert!(filter.check(&Name::from("data[1].csv")).is_ok());
    }

    /// Catches: a component that is not UTF-8 refused, or one that is unsafe accepted
    /// because it is not UTF-8.
    #[test]
    fn components_that_are_not_utf8_are_checked_as_bytes() {
        let bytes =
            |parts: &[&[u8]]| WirePath(parts.iter().map(|p| Name::from_bytes(*p)).collect());
        assert!(bytes(&[b"d\xff", b"caf\xe9.txt"]).validate().is_ok());
        for bad in [
            bytes(&[b"d\xff/.."]),
            bytes(&[b"\xff\0"]),
            bytes(&[b"\xff\\x"]),
            bytes(&[b"d\xff", b""]),
            bytes(&[&[0xe9; MAX_COMPONENT + 1]]),
        ] {
            assert!(matches!(bad.validate(), Err(ProtoError::UnsafePath(_))), "{bad:?}");
        }
        let err = bytes(&[b"a\xe9/b"]).validate().expect_err("separator");
        assert!(err.to_string().contains("a\\xe9/b"), "the name shown escaped: {err}");
        let into = Target::resolve(Path::new("/t"), true, 1).expect("dir");
        let landing = into.local_path(&bytes(&[b"d\xff", b"caf\xe9.txt"]));
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let local = landing.expect("lands");
            assert_eq!(local.as_os_str().as_bytes(), b"/t/d\xff/caf\xe9.txt");
        }
        // Where names are UTF-16 (Windows), bytes that are not UTF-8 have no spelling:
        // refused by name, never written under another.
        #[cfg(not(unix))]
        {
            let err = landing.expect_err("no spelling");
            assert!(err.to_string().contains("cannot spell"), "{err}");
        }
    }

    /// Catches: a requested name that is not UTF-8 refused when it comes back, or a
    /// glob that cannot match such a name.
    #[test]
    fn names_that_are_not_utf8_match_what_was_asked_for() {
        let filter = NameFilter::for_requested([&b"dir/*.txt"[..], b"x?", b"d\xff/caf\xe9?txt"]);
        assert!(filter.check(&Name::from_bytes(b"caf\xe9.txt".to_vec())).is_ok());
        assert!(filter.check(&Name::from_bytes(b"x\xff".to_vec())).is_ok(), "? is one byte");
        assert!(filter.check(&Name::from_bytes(b"x\xff\xfe".to_vec())).is_err());
        assert!(filter.check(&Name::from_bytes(b"caf\xe9.log".to_vec())).is_err());
        let byte_glob = Name::from_bytes(b"caf\xe9-txt".to_vec());
        assert!(filter.check(&byte_glob).is_ok(), "a glob holding a byte that is not UTF-8");
        assert!(filter.check(&Name::from_bytes(b"caf\xe8-txt".to_vec())).is_err());
    }
}
