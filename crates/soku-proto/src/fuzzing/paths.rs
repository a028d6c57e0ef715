//! The rules for a peer's paths, re-stated apart from `path.rs` so the harnesses can
//! check that code against them.

use std::path::Component;

use crate::path::{Target, WirePath};

/// The directory the receiver harness and the path checks write "into" (never touched:
/// nothing here uses the file system).
pub const ROOT: &str = "/fuzz/target";

/// Whether every component of a peer's path is one the receiver may create: this
/// re-states the rules of `path.rs` independently of its code.
pub fn is_safe_path(path: &WirePath) -> bool {
    (1..=crate::path::MAX_DEPTH).contains(&path.0.len())
        && path.0.iter().all(|part| {
            let part = part.as_bytes();
            !part.is_empty()
                && part != b"."
                && part != b".."
                && !part.iter().any(|b| matches!(b, b'/' | b'\\' | 0))
                && part.len() <= crate::path::MAX_COMPONENT
        })
}

/// Whether each of `names` has a spelling on this platform (any bytes on Unix, UTF-8
/// elsewhere, `crate::name::Name::to_os`): a receiver refuses a path that lands under
/// one that has none.
pub(super) fn is_spelled_here(names: &[crate::name::Name]) -> bool {
    names.iter().all(|part| part.to_os().is_some())
}

/// Where a safe wire path lands: under the target, one normal component per wire
/// component (the first replaced by the target's own name for a single-name target).
pub fn expected_local(target: &Target, path: &WirePath) -> std::path::PathBuf {
    let (mut out, below) = match target {
        Target::IntoDir(dir) => (dir.clone(), &path.0[..]),
        Target::AsName(name) => (name.clone(), path.0.get(1..).unwrap_or(&[])),
        Target::Resumed { dir, name } if path.0.first() == Some(name) => {
            (dir.clone(), path.0.get(1..).unwrap_or(&[]))
        }
        Target::Resumed { dir, .. } => (dir.clone(), &path.0[..]),
    };
    for part in below {
        let before = out.components().count();
        out.push(part.to_os().expect("a Unix name"));
        let last = out.components().next_back();
        assert_eq!(out.components().count(), before + 1, "{part:?} is not one component");
        assert!(matches!(last, Some(Component::Normal(_))), "{part:?} is not a plain name");
    }
    out
}
