//! Opening the source files the walk hands out, which come in runs from one directory
//! (a tree is walked a directory at a time, `walk.rs`).
//!
//! `open(2)` on a whole path resolves every component of it again for each file: a
//! tree's files many levels down paid that walk once per file, the largest part of the
//! sender's CPU for many small files after the opens themselves. The second file of a
//! run opens the directory (`O_PATH`) and every file after it is opened from there, by
//! its name alone. The directory is resolved as a whole-path open resolves it, symlinks
//! followed, and so is the name, so each open finds the file a whole-path open would,
//! with one difference: a directory renamed away or replaced within a run is still the
//! one read from, the directory whose listing named the files. Only one directory is
//! held open at a time.
//!
//! A confined server (`soku serve --root`) opens each file from the directory it is
//! confined to instead, resolved beneath it by the kernel
//! ([`TargetDir::open_beneath`]): a symlink in the tree cannot lead it outside.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::fsops::TargetDir;
use crate::sys::{self, DirHandle};

/// Opens source files for reading, each run of files from one directory through that
/// directory's descriptor.
#[derive(Debug, Default)]
pub(crate) struct SourceOpener {
    /// The parent of the last file opened, and its descriptor once a second file of
    /// it came.
    last: Option<(PathBuf, Option<DirHandle>)>,
    /// The directory every file is opened beneath, for a confined server.
    beneath: Option<Arc<TargetDir>>,
}

impl SourceOpener {
    /// An opener that opens every file beneath `beneath`, when there is one (see the
    /// module documentation).
    pub(crate) fn beneath(beneath: Option<Arc<TargetDir>>) -> SourceOpener {
        SourceOpener { last: None, beneath }
    }

    /// Opens `local` for reading, as `File::open` would.
    pub(crate) fn open(&mut self, local: &Path) -> std::io::Result<File> {
        if let Some(beneath) = &self.beneath {
            return beneath.open_file_beneath(local);
        }
        let (Some(parent), Some(name)) = (local.parent(), local.file_name()) else {
            return File::open(local);
        };
        match &mut self.last {
            Some((last, dir)) if last.as_path() == parent => {
                if dir.is_none() {
                    *dir = sys::open_dir(parent);
                }
                match dir {
                    Some(dir) => sys::open_in(dir, name),
                    None => File::open(local),
                }
            }
            _ => {
                self.last = Some((parent.to_path_buf(), None));
                File::open(local)
            }
        }
    }
}

// Symlinks and renames of open directories as Unix has them.
#[cfg(all(test, unix))]
mod tests {
    use std::io::Read;

    use super::*;

    fn read(file: std::io::Result<File>) -> std::io::Result<String> {
        let mut text = String::new();
        file?.read_to_string(&mut text)?;
        Ok(text)
    }

    #[test]
    fn runs_of_files_open_as_their_whole_paths_would() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir_all(&a).expect("mkdir");
        std::fs::create_dir_all(&b).expect("mkdir");
        for (dir, name) in [(&a, "1"), (&a, "2"), (&a, "3"), (&b, "1")] {
            std::fs::write(dir.join(name), format!("{}/{name}", dir.display())).expect("write");
        }
        std::os::unix::fs::symlink("2", a.join("link")).expect("link");
        let mut opener = SourceOpener::default();
        for path in
            [a.join("1"), a.join("2"), a.join("3"), a.join("link"), b.join("1"), a.join("1")]
        {
            let expected = read(File::open(&path)).expect("whole path");
            assert_eq!(read(opener.open(&path)).expect("opener"), expected, "{}", path.display());
        }
        // Missing files and directories fail as a whole-path open does.
        for path in [a.join("none"), a.join("none"), tmp.path().join("gone/x")] {
            let err = opener.open(&path).expect_err("missing");
            assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{}", path.display());
        }
        let dir_as_file = opener.open(&a.join("3").join("x")).expect_err("not a directory");
        assert_eq!(dir_as_file.kind(), std::io::ErrorKind::NotADirectory);
    }

    #[test]
    fn a_directory_replaced_within_a_run_is_still_the_one_walked() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let a = tmp.path().join("a");
        std::fs::create_dir_all(&a).expect("mkdir");
        std::fs::write(a.join("1"), "one").expect("write");
        std::fs::write(a.join("2"), "two").expect("write");
        let mut opener = SourceOpener::default();
        assert_eq!(read(opener.open(&a.join("1"))).expect("first"), "one");
        assert_eq!(read(opener.open(&a.join("2"))).expect("second"), "two");
        // Another directory now has the old name; the run goes on in the one walked.
        std::fs::rename(&a, tmp.path().join("moved")).expect("rename");
        std::fs::create_dir_all(&a).expect("mkdir");
        std::fs::write(a.join("2"), "new two").expect("write");
        assert_eq!(read(opener.open(&a.join("2"))).expect("in the run"), "two");
        // A new run (another directory first) opens by the path again.
        assert!(opener.open(&tmp.path().join("moved/1")).is_ok());
        assert_eq!(read(opener.open(&a.join("2"))).expect("new run"), "new two");
    }
}
