//! Where a sync lands: its target is always a directory, as rsync's is for a tree, made
//! when missing (one level: the directory above must exist, as rsync requires), except
//! in a dry run, which makes nothing.

use std::path::Path;

use soku_proto::path::{Target, TargetError};

use crate::fsops::TargetDir;

/// The target of a sync into `target` (beneath `beneath`, for a confined server).
pub fn sync_target(
    target: &Path,
    dry_run: bool,
    beneath: Option<&TargetDir>,
) -> Result<Target, TargetError> {
    let open = |path: &Path| TargetDir::open_within(beneath, path);
    let into = Target::IntoDir(target.to_path_buf());
    if open(target).is_ok() {
        return Ok(into);
    }
    let parent = target.parent().unwrap_or(Path::new(""));
    let Ok(above) = open(parent) else {
        return Err(TargetError::NoSuchDirectory(parent.to_path_buf()));
    };
    if dry_run {
        return Ok(into);
    }
    let Some(name) = target.file_name() else {
        return Err(TargetError::NotADirectory(target.to_path_buf()));
    };
    match above.make_dir(name) {
        Ok(()) => Ok(into),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && open(target).is_ok() => Ok(into),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(TargetError::NotADirectory(target.to_path_buf()))
        }
        Err(e) => {
            Err(TargetError::CannotMake(target.to_path_buf(), crate::failure::describe_io(&e)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_target_is_made_one_level_deep_except_in_a_dry_run() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let new = tmp.path().join("new");
        assert_eq!(sync_target(&new, true, None), Ok(Target::IntoDir(new.clone())));
        assert!(!new.exists(), "a dry run makes nothing");
        assert_eq!(sync_target(&new, false, None), Ok(Target::IntoDir(new.clone())));
        assert!(new.is_dir());
        let deep = tmp.path().join("a/b");
        assert_eq!(
            sync_target(&deep, false, None),
            Err(TargetError::NoSuchDirectory(tmp.path().join("a")))
        );
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").expect("write");
        assert_eq!(sync_target(&file, false, None), Err(TargetError::NotADirectory(file)));
    }
}
