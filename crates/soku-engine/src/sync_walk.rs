//! A sync's walk: rsync's reading of the sources on top of [`crate::walk`].
//!
//! - A source directory written with a trailing slash (`src/`) sends what it holds, each
//!   entry under its own name at the target (when the rules say so: a sync's, not an
//!   scp-style copy's with a filter); without one, the directory itself, as scp.
//!   Directories are always walked (a sync is recursive).
//! - The include and exclude rules ([`crate::filter`]) are applied to every path below
//!   the transfer's root; an excluded directory is not entered.
//! - With `--files-from`, only the listed paths below the one source directory are sent,
//!   each under its listed path: the directories above it are announced first (with
//!   their own metadata), and a listed directory is walked only with `-r`, as rsync's
//!   `--files-from` does. A listed path that leaves the source (`..`) is an error item.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use soku_proto::name::{shown, Name};
use soku_proto::path::WirePath;
use soku_proto::sync::SyncRules;

use crate::filter::Filter;
use crate::fsops::TargetDir;
use crate::walk::{self, Item, Visits, Within};

/// Walks `sources` as `rules` say, calling `emit` for each item; stops early if `emit`
/// returns false.
pub fn walk_sync(
    sources: &[PathBuf],
    rules: &SyncRules,
    filter: &Filter,
    beneath: Option<&TargetDir>,
    emit: &mut dyn FnMut(Item) -> bool,
) {
    let filter = Some(filter).filter(|f| !f.is_empty());
    if !rules.files_from.is_empty() {
        match sources {
            [root] => walk_listed(root, rules, filter, beneath, emit),
            _ => {
                let message = "--files-from takes one source directory".to_string();
                emit(Item::Error { path: String::new(), message });
            }
        }
        return;
    }
    for source in sources {
        let error = |message: String| Item::Error { path: shown(source), message };
        let md = match walk::metadata(source, beneath) {
            Ok(md) => md,
            Err(e) => {
                if !emit(error(walk::source_problem(source, &e))) {
                    return;
                }
                continue;
            }
        };
        let contents = rules.contents && crate::sys::name_bytes(source.as_os_str()).ends_with(b"/");
        let keep_going = if md.is_dir() && contents {
            let within = Within { beneath, filter, announce: false };
            let root = WirePath(Vec::new());
            walk::walk_dir_within(source, root, &md, &mut Visits::default(), within, emit)
        } else {
            let Some(name) = walk::top_name(source) else {
                if !emit(error("cannot name this source".into())) {
                    return;
                }
                continue;
            };
            let wire = WirePath(vec![name]);
            if filter.is_some_and(|f| !f.includes(&wire, md.is_dir())) {
                continue;
            }
            if md.is_dir() {
                let within = Within { beneath, filter, announce: true };
                walk::walk_dir_within(source, wire, &md, &mut Visits::default(), within, emit)
            } else if md.is_file() {
                emit(Item::File {
                    wire,
                    local: source.clone(),
                    size: md.len(),
                    meta: walk::meta_of(&md),
                })
            } else {
                emit(error("not a regular file".into()))
            }
        };
        if !keep_going {
            return;
        }
    }
}

/// The listed paths below `root`, with the directories above each.
fn walk_listed(
    root: &Path,
    rules: &SyncRules,
    filter: Option<&Filter>,
    beneath: Option<&TargetDir>,
    emit: &mut dyn FnMut(Item) -> bool,
) {
    let mut announced: HashSet<WirePath> = HashSet::new();
    for listed in &rules.files_from {
        let Some(wire) = listed_path(listed) else {
            let path = listed.to_string();
            if !emit(Item::Error { path, message: "not a path below the source: skipped".into() }) {
                return;
            }
            continue;
        };
        let local = |wire: &WirePath| -> PathBuf {
            let mut path = root.to_path_buf();
            for part in &wire.0 {
                path.push(crate::sys::name_of(part.as_bytes()));
            }
            path
        };
        // The directories above it, each once, from the top.
        for depth in 1..wire.0.len() {
            let parent = WirePath(wire.0[..depth].to_vec());
            if announced.contains(&parent) {
                continue;
            }
            let at = local(&parent);
            let item = match walk::metadata(&at, beneath) {
                Ok(md) if md.is_dir() => {
                    Item::Dir { wire: parent.clone(), meta: walk::meta_of(&md) }
                }
                Ok(_) => Item::Error { path: shown(&at), message: "not a directory".into() },
                Err(e) => Item::Error { path: shown(&at), message: walk::source_problem(&at, &e) },
            };
            let is_dir = matches!(item, Item::Dir { .. });
            announced.insert(parent);
            if !emit(item) {
                return;
            }
            if !is_dir {
                break;
            }
        }
        let at = local(&wire);
        let md = match walk::metadata(&at, beneath) {
            Ok(md) => md,
            Err(e) => {
                let item = Item::Error { path: shown(&at), message: walk::source_problem(&at, &e) };
                if !emit(item) {
                    return;
                }
                continue;
            }
        };
        if filter.is_some_and(|f| !f.includes(&wire, md.is_dir())) {
            continue;
        }
        let keep_going = if md.is_dir() {
            let fresh = announced.insert(wire.clone());
            let meta = walk::meta_of(&md);
            if fresh && !emit(Item::Dir { wire: wire.clone(), meta }) {
                return;
            }
            if rules.recursive_listed {
                let within = Within { beneath, filter, announce: false };
                walk::walk_dir_within(&at, wire, &md, &mut Visits::default(), within, emit)
            } else {
                true
            }
        } else if md.is_file() {
            emit(Item::File { wire, local: at, size: md.len(), meta: walk::meta_of(&md) })
        } else {
            emit(Item::Error { path: shown(&at), message: "not a regular file".into() })
        };
        if !keep_going {
            return;
        }
    }
}

/// A listed path as a wire path below the source: leading slashes and `.` dropped, as
/// rsync drops them; `None` for one with `..` or nothing left.
fn listed_path(listed: &Name) -> Option<WirePath> {
    let mut parts = Vec::new();
    for part in listed.as_bytes().split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => return None,
            part => parts.push(Name::from_bytes(part.to_vec())),
        }
    }
    let wire = WirePath(parts);
    (!wire.0.is_empty() && wire.validate().is_ok()).then_some(wire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use soku_proto::sync::FilterRule;

    fn seen(sources: &[PathBuf], rules: &SyncRules) -> Vec<String> {
        let filter = Filter::new(&rules.filter).expect("compiles");
        let mut out = Vec::new();
        walk_sync(sources, rules, &filter, None, &mut |item| {
            out.push(match item {
                Item::Dir { wire, .. } => format!("dir {wire}"),
                Item::File { wire, .. } => format!("file {wire}"),
                Item::Error { message, .. } => format!("error {message}"),
            });
            true
        });
        out
    }

    fn tree() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().expect("tempdir");
        let src = tmp.path().join("src");
        std::fs::create_dir_all(src.join("a/deep")).expect("mkdir");
        std::fs::create_dir_all(src.join("cache")).expect("mkdir");
        for file in ["top.txt", "a/x.o", "a/x.c", "a/deep/y.c", "cache/blob"] {
            std::fs::write(src.join(file), b"x").expect("write");
        }
        tmp
    }

    #[test]
    fn a_trailing_slash_sends_the_contents_and_rules_filter() {
        let tmp = tree();
        let src = tmp.path().join("src");
        let rules = SyncRules {
            filter: vec![FilterRule::Exclude("*.o".into()), FilterRule::Exclude("cache/".into())],
            contents: true,
            ..SyncRules::default()
        };
        let contents = PathBuf::from(format!("{}/", src.display()));
        assert_eq!(
            seen(std::slice::from_ref(&contents), &rules),
            ["dir a", "dir a/deep", "file a/deep/y.c", "file a/x.c", "file top.txt"]
        );
        let scp = SyncRules { contents: false, ..rules };
        assert_eq!(
            seen(&[contents], &scp)[..2],
            ["dir src".to_string(), "dir src/a".into()],
            "scp's rule"
        );
        let whole = seen(&[src], &SyncRules::default());
        assert_eq!(whole[..2], ["dir src".to_string(), "dir src/a".into()]);
        assert_eq!(whole.len(), 9, "{whole:?}");
    }

    #[test]
    fn listed_paths_come_with_their_parents_and_nothing_else() {
        let tmp = tree();
        let src = tmp.path().join("src");
        let listed = |paths: &[&str], recursive| SyncRules {
            files_from: paths.iter().map(|p| Name::from(*p)).collect(),
            recursive_listed: recursive,
            ..SyncRules::default()
        };
        assert_eq!(
            seen(std::slice::from_ref(&src), &listed(&["a/deep/y.c", "/a/x.c", "cache"], false)),
            ["dir a", "dir a/deep", "file a/deep/y.c", "file a/x.c", "dir cache"]
        );
        assert_eq!(
            seen(std::slice::from_ref(&src), &listed(&["cache"], true)),
            ["dir cache", "file cache/blob"]
        );
        assert_eq!(
            seen(&[src], &listed(&["../secret", "gone.txt"], false)),
            ["error not a path below the source: skipped", "error No such file or directory"]
        );
    }
}
