//! Walking the sources: each becomes a manifest entry named by its last component, and
//! with `-r` a directory becomes its whole tree (parents before children).
//!
//! Symbolic links are followed, as scp follows them: a link to a file is sent as that
//! file, a link to a directory is walked as a directory. Two rules keep that finite
//! whatever the links (directories are told apart by device and inode, never by path):
//! - a link to a directory that is being walked already (one of its own parents) is a
//!   loop: it is reported and not followed;
//! - a directory is entered through a link at most once per copy: a second link to it
//!   is reported and not followed, so links that fan out and meet again cannot make the
//!   walk exponential.
//!
//! For a confined server (`soku serve --root`) links are followed only while they stay
//! beneath the directory it serves: every look is resolved beneath it by the kernel
//! ([`TargetDir::open_beneath`]), so a tree's link out of it is an error item, its
//! target never listed.
//!
//! Like scp, a source that is not copied is an error line and exit status 1, and the rest
//! of the copy goes on.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::Metadata;
use std::path::{Path, PathBuf};

use soku_proto::manifest::Meta;
use soku_proto::name::{shown, Name};
use soku_proto::path::WirePath;

use crate::filter::Filter;
use crate::fsops::TargetDir;

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

/// Most directory levels walked: one less than a wire path may hold, so that the files
/// of the deepest directory can still be named.
const MAX_DEPTH: usize = soku_proto::path::MAX_DEPTH - 1;

/// A directory, by identity rather than by name.
type DirId = (u64, u64);

pub(crate) fn dir_id(path: &Path, md: &Metadata) -> DirId {
    crate::sys::identity(path, md)
}

/// What the walk knows about the directories it has entered, so links cannot make it
/// loop or multiply.
#[derive(Default)]
pub(crate) struct Visits {
    /// The directories from the source down to the one being walked.
    pub(crate) open: Vec<DirId>,
    /// Directories entered through a symbolic link.
    through_links: HashSet<DirId>,
}

/// Metadata of a file for the wire.
pub fn meta_of(md: &Metadata) -> Meta {
    let (mtime, mtime_nsec) = crate::sys::modified(md);
    let (atime, atime_nsec) = crate::sys::accessed(md);
    Meta {
        mode: crate::sys::permission_bits(md),
        mtime,
        mtime_nsec: u32::try_from(mtime_nsec).unwrap_or(0),
        atime,
        atime_nsec: u32::try_from(atime_nsec).unwrap_or(0),
    }
}

/// The name a source is sent under: its last component (`dir/` is `dir`, `.` is the real
/// name of the directory), UTF-8 or not.
pub fn top_name(source: &Path) -> Option<Name> {
    let bytes = crate::sys::name_bytes(source.as_os_str());
    let end = bytes.iter().rposition(|&b| b != b'/').map_or(0, |last| last + 1);
    let trimmed = crate::sys::name_of(&bytes[..end]);
    let path = Path::new(if end == 0 { OsStr::new("/") } else { &trimmed });
    match path.file_name() {
        Some(name) if name != "." && name != ".." => Name::from_os(name),
        _ => std::fs::canonicalize(path).ok().and_then(|p| p.file_name().and_then(Name::from_os)),
    }
}

/// Walks all sources in order, calling `emit` for each item; stops early if `emit`
/// returns false (the receiver went away). With `beneath`, nothing outside that
/// directory is looked at (see the module documentation).
pub fn walk(
    sources: &[PathBuf],
    recursive: bool,
    beneath: Option<&TargetDir>,
    emit: &mut dyn FnMut(Item) -> bool,
) {
    for source in sources {
        let error = |message: String| Item::Error { path: shown(source), message };
        let Some(name) = top_name(source) else {
            if !emit(error("cannot name this source".into())) {
                return;
            }
            continue;
        };
        let md = match metadata(source, beneath) {
            Ok(md) => md,
            Err(e) => {
                if !emit(error(source_problem(source, &e))) {
                    return;
                }
                continue;
            }
        };
        let wire = WirePath(vec![name]);
        let keep_going = if md.is_dir() {
            if recursive {
                walk_dir(source, wire, &md, &mut Visits::default(), beneath, emit)
            } else {
                emit(error("is a directory (use -r to copy directories)".into()))
            }
        } else if md.is_file() {
            emit(Item::File { wire, local: source.clone(), size: md.len(), meta: meta_of(&md) })
        } else {
            emit(error("not a regular file".into()))
        };
        if !keep_going {
            return;
        }
    }
}

pub(crate) fn walk_dir(
    dir: &Path,
    wire: WirePath,
    md: &Metadata,
    visits: &mut Visits,
    beneath: Option<&TargetDir>,
    emit: &mut dyn FnMut(Item) -> bool,
) -> bool {
    walk_dir_within(dir, wire, md, visits, Within { beneath, filter: None, announce: true }, emit)
}

/// What a walk keeps to: the directory it stays beneath, a sync's rules, and whether
/// the directory walked is announced itself (a sync of its contents announces only
/// what it holds).
#[derive(Clone, Copy)]
pub(crate) struct Within<'a> {
    pub(crate) beneath: Option<&'a TargetDir>,
    pub(crate) filter: Option<&'a Filter>,
    pub(crate) announce: bool,
}

/// [`walk_dir`] within `within`.
pub(crate) fn walk_dir_within(
    dir: &Path,
    wire: WirePath,
    md: &Metadata,
    visits: &mut Visits,
    within: Within<'_>,
    emit: &mut dyn FnMut(Item) -> bool,
) -> bool {
    let beneath = within.beneath;
    let shown = shown(dir);
    if visits.open.len() >= MAX_DEPTH {
        let message = format!("deeper than {MAX_DEPTH} directory levels: not copied");
        return emit(Item::Error { path: shown, message });
    }
    let listed = match beneath {
        Some(beneath) => children_beneath(dir, beneath),
        None => children(dir),
    };
    let mut children = match listed {
        Ok(children) => children,
        Err(e) => return emit(Item::Error { message: source_problem(dir, &e), path: shown }),
    };
    if within.announce && !emit(Item::Dir { wire: wire.clone(), meta: meta_of(md) }) {
        return false;
    }
    children.sort_by(|a, b| a.0.cmp(&b.0));
    visits.open.push(dir_id(dir, md));
    let within = Within { announce: true, ..within };
    let keep_going = walk_children(&wire, children, visits, within, emit);
    visits.open.pop();
    keep_going
}

/// A directory's entries: each one's path, whether it is a symbolic link, and its status
/// (a link's target's).
type Children = Vec<(PathBuf, bool, std::io::Result<Metadata>)>;

/// Walks a directory's entries, sorted (the directory is already announced as `wire`).
fn walk_children(
    wire: &WirePath,
    children: Children,
    visits: &mut Visits,
    within: Within<'_>,
    emit: &mut dyn FnMut(Item) -> bool,
) -> bool {
    for (child, link, md) in children {
        let shown = shown(&child);
        let Some(name) = child.file_name().and_then(Name::from_os) else {
            let item =
                Item::Error { path: shown, message: "a name this system cannot send".into() };
            if !emit(item) {
                return false;
            }
            continue;
        };
        let mut child_wire = wire.clone();
        child_wire.0.push(name);
        // An excluded entry is not looked at further: not even its status's error.
        let is_dir = md.as_ref().is_ok_and(Metadata::is_dir);
        if within.filter.is_some_and(|filter| !filter.includes(&child_wire, is_dir)) {
            continue;
        }
        let keep_going = match md {
            Err(e) => emit(Item::Error { message: source_problem(&child, &e), path: shown }),
            Ok(md) if md.is_dir() => match visits.refuse(dir_id(&child, &md), link) {
                Some(message) => emit(Item::Error { path: shown, message: message.into() }),
                None => walk_dir_within(&child, child_wire, &md, visits, within, emit),
            },
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

/// The items a peer from before `soku_proto::name::BYTE_NAMES_SINCE_VERSION` can take:
/// one whose own name is not UTF-8 becomes a failed source (with what to do), and what
/// lies beneath such a directory is left out with it.
pub fn utf8_names_only(items: Vec<Item>) -> Vec<Item> {
    let problem = format!(
        "name is not valid UTF-8, which soku on the other side is too old to take \
         (protocol before {}): upgrade soku there to copy it",
        soku_proto::name::BYTE_NAMES_SINCE_VERSION
    );
    items
        .into_iter()
        .filter_map(|item| {
            let (wire, path) = match &item {
                Item::Dir { wire, .. } => (wire, wire.to_string()),
                Item::File { wire, local, .. } => (wire, shown(local)),
                Item::Error { .. } => return Some(item),
            };
            match wire.0.iter().position(|part| !part.is_utf8()) {
                None => Some(item),
                Some(first) if first + 1 == wire.0.len() => {
                    Some(Item::Error { path, message: problem.clone() })
                }
                Some(_) => None,
            }
        })
        .collect()
}

/// The status of `path`, a symlink followed (beneath `beneath`, when there is one).
pub(crate) fn metadata(path: &Path, beneath: Option<&TargetDir>) -> std::io::Result<Metadata> {
    match beneath {
        Some(beneath) => beneath.metadata_beneath(path),
        None => std::fs::metadata(path),
    }
}

/// The entries of `dir` with their status. Each child's status is looked up from the
/// open directory (`fstatat` on its name), not by its whole path: in a deep tree that
/// walked every component again per file. A symlink is followed, as scp follows it, so
/// only its target's status will do.
fn children(dir: &Path) -> std::io::Result<Children> {
    Ok(std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|entry| {
            let path = entry.path();
            let link = entry.file_type().map_or(true, |kind| kind.is_symlink());
            let md = if link { std::fs::metadata(&path) } else { entry.metadata() };
            (path, link, md)
        })
        .collect())
}

/// [`children`] beneath `beneath`: the directory is listed through a descriptor opened
/// beneath it, and each child's status is looked up beneath it too (a whole path per
/// child, which a confined server's rare copies can pay).
fn children_beneath(dir: &Path, beneath: &TargetDir) -> std::io::Result<Children> {
    let mut out = Vec::new();
    for (name, link) in beneath.list_beneath(dir)? {
        let path = dir.join(name);
        let md = metadata(&path, Some(beneath));
        out.push((path, link, md));
    }
    Ok(out)
}

impl Visits {
    /// Why the directory `id` (reached through a symbolic link if `link`) is not
    /// walked, if it is not. A directory that is one of its own parents without a link
    /// is a bind mount of a parent: the same loop.
    fn refuse(&mut self, id: DirId, link: bool) -> Option<&'static str> {
        if self.open.contains(&id) {
            return Some("symbolic link loop: links to a directory above it; not followed");
        }
        if link && !self.through_links.insert(id) {
            return Some("links to a directory already copied through another link; not followed");
        }
        None
    }
}

/// What went wrong with a source, with what to do ([`crate::failure::describe_source`]).
pub(crate) fn source_problem(path: &Path, e: &std::io::Error) -> String {
    crate::failure::describe_source(path, e).problem
}

// Symlinks, and names that are bytes, as Unix has them.
#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn collect(sources: &[String], recursive: bool) -> Vec<Item> {
        let sources: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        let mut items = Vec::new();
        walk(&sources, recursive, None, &mut |item| {
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
        let expected = tmp.path().file_name().and_then(Name::from_os);
        assert_eq!(top_name(Path::new(&dot)), expected);
        assert_eq!(top_name(Path::new("a/b/")), Some("b".into()));
        assert_eq!(
            top_name(Path::new(&*crate::sys::name_of(b"d\xff//"))),
            Some(Name::from_bytes(*b"d\xff"))
        );
    }

    /// Catches: a name that is not UTF-8 failed (it once was, `name is not valid
    /// UTF-8`), changed, or sent to a peer too old to decode it.
    #[test]
    fn names_that_are_not_utf8_are_walked_as_bytes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("top");
        std::fs::create_dir_all(root.join(crate::sys::name_of(b"d\xff"))).expect("mkdir");
        std::fs::write(root.join(crate::sys::name_of(b"d\xff/caf\xe9.txt")), b"x").expect("write");
        std::fs::write(root.join("plain.txt"), b"y").expect("write");
        let items = collect(&[root.display().to_string()], true);
        let wires: Vec<Vec<u8>> = items
            .iter()
            .map(|item| match item {
                Item::Dir { wire, .. } | Item::File { wire, .. } => {
                    wire.0.iter().map(Name::as_bytes).collect::<Vec<_>>().join(&b'/')
                }
                Item::Error { path, message } => panic!("{path}: {message}"),
            })
            .collect();
        let want: [&[u8]; 4] = [b"top", b"top/d\xff", b"top/d\xff/caf\xe9.txt", b"top/plain.txt"];
        assert_eq!(wires, want);
        let old_peer = utf8_names_only(items);
        assert_eq!(old_peer.len(), 3, "the directory fails, what is in it is left out");
        let Item::Error { path, message } = &old_peer[1] else { panic!("{old_peer:?}") };
        assert_eq!(path, "top/d\\xff");
        assert!(message.contains("upgrade soku there"), "{message}");
    }

    fn seen(items: &[Item]) -> Vec<String> {
        items
            .iter()
            .map(|i| match i {
                Item::Dir { wire, .. } => format!("dir {wire}"),
                Item::File { wire, .. } => format!("file {wire}"),
                Item::Error { path, message } => format!("error {path}: {message}"),
            })
            .collect()
    }

    /// A link back up the tree (`real/up -> ..`) reached through another link
    /// (`dirlink -> real`) once made the walk grow without bound: every level doubled.
    /// Each directory is now walked once per way in, and the loop is named.
    #[test]
    fn a_symlink_loop_is_named_and_not_followed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("src2");
        std::fs::create_dir_all(root.join("real")).expect("mkdir");
        std::fs::write(root.join("real/f"), b"x").expect("write");
        std::os::unix::fs::symlink("real", root.join("dirlink")).expect("link");
        std::os::unix::fs::symlink("..", root.join("real/up")).expect("link");
        let shown = |p: &str| root.join(p).display().to_string();
        let loop_message = "symbolic link loop: links to a directory above it; not followed";
        assert_eq!(
            seen(&collect(&[root.display().to_string()], true)),
            [
                "dir src2".to_string(),
                "dir src2/dirlink".into(),
                "file src2/dirlink/f".into(),
                format!("error {}: {loop_message}", shown("dirlink/up")),
                "dir src2/real".into(),
                "file src2/real/f".into(),
                format!("error {}: {loop_message}", shown("real/up")),
            ]
        );
    }

    /// Links that fan out and meet again (each level links twice to the next) would
    /// walk 2^levels directories if every link were followed.
    #[test]
    fn links_that_meet_again_are_walked_once() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let levels = 40;
        for level in 0..=levels {
            std::fs::create_dir(tmp.path().join(format!("d{level}"))).expect("mkdir");
        }
        for level in 0..levels {
            let dir = tmp.path().join(format!("d{level}"));
            let next = format!("../d{}", level + 1);
            std::os::unix::fs::symlink(&next, dir.join("a")).expect("link");
            std::os::unix::fs::symlink(&next, dir.join("b")).expect("link");
        }
        let items = collect(&[tmp.path().join("d0").display().to_string()], true);
        let dirs = items.iter().filter(|i| matches!(i, Item::Dir { .. })).count();
        let refused = items.iter().filter(|i| matches!(i, Item::Error { .. })).count();
        assert_eq!((dirs, refused), (levels + 1, levels));
    }
}
