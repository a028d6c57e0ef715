//! Walking the sources: each becomes a manifest entry named by its last component, and
//! with `-r` a directory becomes its whole tree (parents before children). Symbolic links
//! are followed, as scp does.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use soku_proto::manifest::Meta;
use soku_proto::path::WirePath;

/// One thing to send, found by the walk.
#[derive(Debug)]
pub enum Item {
    /// A directory (only with `-r`).
    Dir {
        /// Its wire path.
        wire: WirePath,
        /// Its metadata.
        meta: Meta,
    },
    /// A regular file.
    File {
        /// Its wire path.
        wire: WirePath,
        /// Where it is here.
        local: PathBuf,
        /// Size at walk time.
        size: u64,
        /// Its metadata.
        meta: Meta,
    },
    /// A source that cannot be sent (the copy goes on with the rest).
    Error {
        /// The source as named.
        path: String,
        /// Why.
        message: String,
    },
}

/// Most directory levels walked (a symlink loop ends here).
const MAX_DEPTH: usize = 64;

/// Metadata of a file for the wire.
pub fn meta_of(md: &Metadata) -> Meta {
    Meta {
        mode: md.mode() & 0o7777,
        mtime: md.mtime(),
        mtime_nsec: u32::try_from(md.mtime_nsec()).unwrap_or(0),
        atime: md.atime(),
        atime_nsec: u32::try_from(md.atime_nsec()).unwrap_or(0),
    }
}

/// The name a source is sent under: its last component (`dir/` is `dir`, `.` is the real
/// name of the directory).
pub fn top_name(source: &str) -> Option<String> {
    let trimmed = source.trim_end_matches('/');
    let path = Path::new(if trimmed.is_empty() { "/" } else { trimmed });
    match path.file_name().and_then(|n| n.to_str()) {
        Some(name) if name != "." && name != ".." => Some(name.to_string()),
        _ => std::fs::canonicalize(path)
            .ok()
            .and_then(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_string)),
    }
}

/// Walks all sources in order, calling `emit` for each item; stops early if `emit`
/// returns false (the receiver went away).
pub fn walk(sources: &[String], recursive: bool, emit: &mut dyn FnMut(Item) -> bool) {
    for source in sources {
        let error = |message: String| Item::Error { path: source.clone(), message };
        let Some(name) = top_name(source) else {
            if !emit(error("cannot name this source".into())) {
                return;
            }
            continue;
        };
        let md = match std::fs::metadata(source) {
            Ok(md) => md,
            Err(e) => {
                if !emit(error(source_problem(Path::new(source), &e))) {
                    return;
                }
                continue;
            }
        };
        let wire = WirePath(vec![name]);
        let keep_going = if md.is_dir() {
            if recursive {
                walk_dir(Path::new(source), wire, &md, 0, emit)
            } else {
                emit(error("is a directory (use -r to copy directories)".into()))
            }
        } else if md.is_file() {
            emit(Item::File { wire, local: source.into(), size: md.len(), meta: meta_of(&md) })
        } else {
            emit(error("not a regular file".into()))
        };
        if !keep_going {
            return;
        }
    }
}

fn walk_dir(
    dir: &Path,
    wire: WirePath,
    md: &Metadata,
    depth: usize,
    emit: &mut dyn FnMut(Item) -> bool,
) -> bool {
    let shown = dir.display().to_string();
    if depth > MAX_DEPTH {
        return emit(Item::Error { path: shown, message: "too deep (a symlink loop?)".into() });
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return emit(Item::Error { message: source_problem(dir, &e), path: shown }),
    };
    if !emit(Item::Dir { wire: wire.clone(), meta: meta_of(md) }) {
        return false;
    }
    // Each child's status is looked up from the open directory (`fstatat` on its name),
    // not by its whole path: in a deep tree that walked every component again per file.
    // A symlink is followed, as scp follows it, so only its target's status will do.
    let mut children: Vec<(PathBuf, std::io::Result<Metadata>)> = entries
        .filter_map(Result::ok)
        .map(|entry| {
            let path = entry.path();
            let md = match entry.file_type() {
                Ok(kind) if !kind.is_symlink() => entry.metadata(),
                _ => std::fs::metadata(&path),
            };
            (path, md)
        })
        .collect();
    children.sort_by(|a, b| a.0.cmp(&b.0));
    for (child, md) in children {
        let shown = child.display().to_string();
        let Some(name) = child.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            let item = Item::Error { path: shown, message: "name is not valid UTF-8".into() };
            if !emit(item) {
                return false;
            }
            continue;
        };
        let mut child_wire = wire.clone();
        child_wire.0.push(name);
        let keep_going = match md {
            Err(e) => emit(Item::Error { message: source_problem(&child, &e), path: shown }),
            Ok(md) if md.is_dir() => walk_dir(&child, child_wire, &md, depth + 1, emit),
            Ok(md) if md.is_file() => emit(Item::File {
                wire: child_wire,
                local: child,
                size: md.len(),
                meta: meta_of(&md),
            }),
            Ok(_) => emit(Item::Error { path: shown, message: "not a regular file".into() }),
        };
        if !keep_going {
            return false;
        }
    }
    true
}

/// What went wrong with a source, with what to do ([`crate::failure::describe_source`]).
fn source_problem(path: &Path, e: &std::io::Error) -> String {
    crate::failure::describe_source(path, e).problem
}

/// An I/O error in scp's words ("No such file or directory").
pub fn describe(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".into(),
        _ => {
            let text = e.to_string();
            text.split(" (os error").next().unwrap_or(&text).to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(sources: &[String], recursive: bool) -> Vec<Item> {
        let mut items = Vec::new();
        walk(sources, recursive, &mut |item| {
            items.push(item);
            true
        });
        items
    }

    #[test]
    fn a_tree_walks_parents_first() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("top");
        std::fs::create_dir_all(root.join("sub")).expect("mkdir");
        std::fs::write(root.join("sub/f"), b"x").expect("write");
        let items = collect(&[root.display().to_string()], true);
        let names: Vec<String> = items
            .iter()
            .map(|i| match i {
                Item::Dir { wire, .. } | Item::File { wire, .. } => wire.to_string(),
                Item::Error { message, .. } => message.clone(),
            })
            .collect();
        assert_eq!(names, ["top", "top/sub", "top/sub/f"]);
    }

    #[test]
    fn errors_name_the_problem() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let missing = tmp.path().join("missing").display().to_string();
        let dir = tmp.path().display().to_string();
        let items = collect(&[missing, dir], false);
        let messages: Vec<&str> = items
            .iter()
            .filter_map(|i| match i {
                Item::Error { message, .. } => Some(message.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            messages,
            ["No such file or directory", "is a directory (use -r to copy directories)"]
        );
    }

    /// Symlinks inside a tree are followed, as scp follows them: a link to a file is
    /// that file (its size, not the link's), a link to a directory is walked, and a
    /// dangling link is named as missing.
    #[test]
    fn links_in_a_tree_are_followed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("top");
        std::fs::create_dir_all(tmp.path().join("elsewhere")).expect("mkdir");
        std::fs::write(tmp.path().join("elsewhere/big"), [7u8; 1000]).expect("write");
        std::fs::create_dir(&root).expect("mkdir");
        std::os::unix::fs::symlink("../elsewhere/big", root.join("a-file")).expect("link");
        std::os::unix::fs::symlink("../elsewhere", root.join("b-dir")).expect("link");
        std::os::unix::fs::symlink("nothing", root.join("c-gone")).expect("link");
        let items = collect(&[root.display().to_string()], true);
        let seen: Vec<String> = items
            .iter()
            .map(|i| match i {
                Item::Dir { wire, .. } => format!("dir {wire}"),
                Item::File { wire, size, .. } => format!("file {wire} {size}"),
                Item::Error { message, .. } => format!("error {message}"),
            })
            .collect();
        assert_eq!(
            seen,
            [
                "dir top",
                "file top/a-file 1000",
                "dir top/b-dir",
                "file top/b-dir/big 1000",
                "error No such file or directory"
            ]
        );
    }

    #[test]
    fn dot_is_sent_under_its_real_name() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dot = format!("{}/.", tmp.path().display());
        let expected = tmp.path().file_name().and_then(|n| n.to_str()).map(str::to_string);
        assert_eq!(top_name(&dot), expected);
        assert_eq!(top_name("a/b/"), Some("b".into()));
    }
}
