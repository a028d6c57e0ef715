//! Property tests of path containment: whatever a peer sends as a wire path, a received
//! entry lands strictly inside the target root, or the path is refused.
//!
//! Regressions (seeds of failures proptest found) are kept in
//! `proptest-regressions/props_target.txt`, which is worth committing.

use std::path::{Component, Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use soku_proto::path::{Target, TargetError, WirePath, MAX_COMPONENT, MAX_DEPTH};
use soku_proto::ProtoError;

fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/proptest-regressions/props_target.txt"
        )))),
        ..ProptestConfig::default()
    }
}

/// The rules of crates/soku-proto/src/path.rs, written out again independently: a
/// component is safe when it is not empty, not `.` or `..`, holds no `/`, `\` or NUL,
/// and fits in NAME_MAX bytes.
fn component_is_safe(part: &str) -> bool {
    !part.is_empty()
        && part != "."
        && part != ".."
        && !part.contains(['/', '\\', '\0'])
        && part.len() <= MAX_COMPONENT
}

fn path_is_safe(parts: &[String]) -> bool {
    !parts.is_empty() && parts.len() <= MAX_DEPTH && parts.iter().all(|p| component_is_safe(p))
}

/// A name a well-behaved sender would send.
fn normal_name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_][a-zA-Z0-9 _.,+=~-]{0,15}"
}

/// Components a hostile or buggy peer might send, mixed with ordinary ones.
fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => normal_name(),
        // The traversal components themselves, often enough to meet every property.
        2 => prop::sample::select(vec!["..", "."]).prop_map(str::to_string),
        2 => prop::sample::select(vec![
            "", "/", "a/b", "/etc", "../x", "x/..", "\\", "..\\x", "a\\b", "\0", "a\0b", "..\0",
            "...", "....", ". ", " ..", ".. ", "~", "-rf", "C:", "\u{2215}x", "\u{ff0f}", "\u{0}/",
        ])
        .prop_map(str::to_string),
        // Unicode, any char but control characters.
        1 => "\\PC{1,24}",
        // Anything at all, control characters and lone separators included.
        1 => any::<String>(),
        // Around NAME_MAX, in one- and two-byte characters.
        1 => (MAX_COMPONENT - 2..=MAX_COMPONENT + 2).prop_map(|n| "x".repeat(n)),
        1 => (MAX_COMPONENT / 2 - 1..=MAX_COMPONENT / 2 + 1).prop_map(|n| "é".repeat(n)),
        // Names with dots and separators inside.
        1 => "[a.]{1,3}[/\\\\]?[a.]{0,3}",
    ]
}

/// Wire paths: short lists of any components, or paths around MAX_DEPTH levels.
fn wire_path() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        8 => prop::collection::vec(component(), 0..6),
        1 => (MAX_DEPTH - 1..=MAX_DEPTH + 1, component(), 0..MAX_DEPTH + 1).prop_map(
            |(depth, odd, at)| {
                let mut parts = vec!["d".to_string(); depth];
                if let Some(slot) = parts.get_mut(at) {
                    *slot = odd;
                }
                parts
            }
        ),
    ]
}

/// A target path as the user types it: absolute or relative, ending in a name.
fn named_target() -> impl Strategy<Value = PathBuf> {
    (
        prop::sample::select(vec!["/", "", "./", "../", "/tmp/", "~/"]),
        prop::collection::vec("[a-zA-Z0-9 ü_-][a-zA-Z0-9 ü_.-]{0,7}", 1..4),
        any::<bool>(),
    )
        .prop_map(|(prefix, names, slash)| {
            let mut path = format!("{prefix}{}", names.join("/"));
            if slash {
                path.push('/');
            }
            PathBuf::from(path)
        })
}

/// Every kind of target: an existing directory (which may be `/`, `.` or `..`), or a
/// name for one source; `sources` may be 0 (a sender that announces nothing) to several.
fn target() -> impl Strategy<Value = (PathBuf, bool, u32)> {
    let dir = prop_oneof![
        3 => named_target(),
        1 => prop::sample::select(vec!["/", ".", "..", "./", "../.."]).prop_map(PathBuf::from),
    ];
    prop_oneof![(dir, Just(true), 0u32..4), (named_target(), Just(false), 0u32..4)]
}

/// The components a checked wire path must add below the root: the wire path itself
/// for a target directory; the target's own name and everything below the top-level
/// name for a single source landing under a new name.
fn expected_below_root(target: &Target, wire: &[String]) -> Vec<String> {
    match target {
        Target::IntoDir(_) => wire.to_vec(),
        Target::AsName(name) => {
            let own = name.file_name().expect("named target").to_string_lossy().into_owned();
            std::iter::once(own).chain(wire[1..].iter().cloned()).collect()
        }
        Target::Resumed { dir, name } => {
            let own = dir.file_name().expect("named target").to_string_lossy().into_owned();
            let below = if name == wire[0].as_str() { &wire[1..] } else { wire };
            std::iter::once(own).chain(below.iter().cloned()).collect()
        }
    }
}

/// Checks that `local` lies strictly inside `root`, component by component.
fn assert_inside(root: &Path, local: &Path, expected: &[String]) {
    assert!(local.starts_with(root), "{local:?} is not under the root {root:?}");
    let rest = local.strip_prefix(root).expect("starts with the root");
    let parts: Vec<Component<'_>> = rest.components().collect();
    assert!(!parts.is_empty(), "{local:?} is the root {root:?} itself, not inside it");
    for part in &parts {
        assert!(
            matches!(part, Component::Normal(_)),
            "{local:?} has {part:?} below the root {root:?}"
        );
    }
    let names: Vec<String> =
        parts.iter().map(|p| p.as_os_str().to_string_lossy().into_owned()).collect();
    assert_eq!(names, expected, "{local:?} below {root:?}");
}

/// The wire path of these components.
fn wp(parts: &[String]) -> WirePath {
    WirePath(parts.iter().map(|p| soku_proto::name::Name::from(p.as_str())).collect())
}

proptest! {
    #![proptest_config(config())]

    /// Catches: a rule of `check_component` dropped or weakened (`..`, `.`, empty, a
    /// separator, NUL, an over-long name or an over-deep path getting through), and
    /// `local_path` mapping a path that `validate` refuses.
    #[test]
    fn unsafe_components_are_refused(parts in wire_path()) {
        let safe = path_is_safe(&parts);
        let wire = wp(&parts);
        let validated = wire.validate();
        if !safe {
            let refused = matches!(validated, Err(ProtoError::UnsafePath(_)));
            prop_assert!(refused, "{:?} accepted", wire);
        }
        for (target, is_dir) in [("/t", true), ("/t/new", false)] {
            let target = Target::resolve(Path::new(target), is_dir, 1).expect("one source");
            let local = target.local_path(&wire);
            prop_assert_eq!(local.is_ok(), validated.is_ok(), "{:?}: {:?}", wire, local);
        }
    }

    /// Catches: any path that escapes the target root or lands on the root itself: a
    /// `..` or `.` that reaches the joined path, a component with a separator that
    /// splits into several (or replaces the root when absolute), the top-level name
    /// used for a target given as a new name, and a missing `NotADirectory` for several
    /// sources and a non-directory target.
    #[test]
    fn accepted_paths_land_strictly_inside_the_root(
        (path, is_dir, sources) in target(),
        parts in wire_path(),
    ) {
        let target = match Target::resolve(&path, is_dir, sources) {
            Ok(target) => target,
            Err(TargetError::NotADirectory(p)) => {
                prop_assert!(!is_dir && sources > 1, "{:?} refused", path);
                prop_assert_eq!(p, path);
                return Ok(());
            }
            Err(TargetError::NoSuchDirectory(p)) => {
                let slash = path.as_os_str().as_encoded_bytes().ends_with(b"/");
                prop_assert!(!is_dir && slash, "{:?} refused", path);
                prop_assert_eq!(p, path);
                return Ok(());
            }
            Err(e @ TargetError::CannotMake(..)) => {
                prop_assert!(false, "resolving makes nothing, yet: {}", e);
                return Ok(());
            }
        };
        prop_assert!(is_dir || sources <= 1, "{} sources into non-directory {:?}", sources, path);
        let wire = wp(&parts);
        match target.local_path(&wire) {
            Ok(local) => {
                prop_assert!(wire.validate().is_ok());
                assert_inside(target.root(), &local, &expected_below_root(&target, &parts));
            }
            Err(err) => {
                prop_assert!(!path_is_safe(&parts), "{:?} refused: {}", wire, err);
            }
        }
    }

    /// Keeps the property above from holding vacuously: ordinary names, as a sender of
    /// real files sends them, are accepted and mapped for every kind of target.
    #[test]
    fn ordinary_names_are_accepted(
        (path, is_dir, sources) in target().prop_map(|(path, is_dir, sources)| {
            (path, is_dir, if is_dir { sources } else { sources.min(1) })
        }),
        parts in prop::collection::vec(normal_name(), 1..6),
    ) {
        // A new name ending in `/` names a directory that is not there: refused above.
        prop_assume!(is_dir || !path.as_os_str().as_encoded_bytes().ends_with(b"/"));
        let target = Target::resolve(&path, is_dir, sources).expect("resolvable");
        let local = target.local_path(&wp(&parts));
        prop_assert!(local.is_ok(), "{:?} refused: {:?}", parts, local);
        assert_inside(target.root(), &local.expect("ok"), &expected_below_root(&target, &parts));
    }
}
