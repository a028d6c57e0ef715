//! The mark of a directory an unfinished copy made as its target.
//!
//! `soku -r src host:rr`, with no `rr`, makes `rr` and puts `src`'s entries in it (scp's
//! rule for a new name). Interrupted, it leaves `rr` behind, and by scp's rule the same
//! command run again would copy into `rr/src`, since `rr` now exists: everything sent
//! again, and the partial files in `rr` left for good. So the receiver that makes such a
//! directory puts a small file in it, [`MARK`], naming the source it was made for, and
//! removes it once the copy has put every file in place. A target that is a directory
//! (not a symlink) holding a valid mark resolves to [`Target::Resumed`]: a single source
//! of that name lands in it again, as the first run laid it out; any other source goes
//! inside it, by scp's rule. A complete copy leaves no mark, so the next copy to `rr`
//! goes into `rr/src`, as scp's would.

use std::io::Read;
use std::path::Path;

use soku_proto::name::Name;
use soku_proto::path::{Target, TargetError};

/// The mark's file name inside the directory. It ends like the partial files, so a
/// look for what an unfinished copy left (`*.soku-part`) finds it too, and no partial
/// file's name (`.NAME.soku-part`, NAME never empty) is this one.
pub const MARK: &str = ".soku-part";

/// The mark's first line; the source's name follows it, as it is.
const MARK_HEAD: &[u8] = b"soku: this directory is the target of an unfinished copy of the \
    source named on the next line; running the same command again resumes it here\n";

/// Longest mark read: the head and a name of at most 255 bytes (`NAME_MAX`).
const MARK_MAX: u64 = 1024;

/// What the mark of a directory made for the source `name` holds.
pub(crate) fn mark_bytes(name: &Name) -> Vec<u8> {
    [MARK_HEAD, name.as_bytes()].concat()
}

/// The source name in `bytes` if they are a mark.
pub(crate) fn marked_name(bytes: &[u8]) -> Option<Name> {
    let name = bytes.strip_prefix(MARK_HEAD)?;
    soku_proto::path::check_component(name).ok()?;
    Some(Name::from_bytes(name))
}

/// Where the sources of a copy land in `target`, as scp decides it, unless `target`
/// is a directory an unfinished copy of a single source made ([`Target::Resumed`]).
/// Only a plain `target` (no final `/`, which asks for a directory's inside) and one
/// source are looked at.
pub fn resolve_target(target: &Path, sources: u32) -> Result<Target, TargetError> {
    let is_dir = std::fs::metadata(target).is_ok_and(|md| md.is_dir());
    let plain = !target.as_os_str().as_encoded_bytes().ends_with(b"/");
    if is_dir && plain && sources == 1 {
        if let Some(name) = made_for(target) {
            return Ok(Target::Resumed { dir: target.to_path_buf(), name });
        }
    }
    Target::resolve(target, is_dir, sources)
}

/// The name of the source an unfinished copy made `dir` for, if `dir` is a directory
/// itself (not a symlink to one) holding a valid mark.
fn made_for(dir: &Path) -> Option<Name> {
    if !std::fs::symlink_metadata(dir).ok()?.is_dir() {
        return None;
    }
    let file = crate::sys::open_not_following(&dir.join(MARK)).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MARK_MAX).read_to_end(&mut bytes).ok()?;
    marked_name(&bytes)
}
