//! A file system mounted for the life of a guard (root needed): the small tmpfs of a
//! test whose target runs out of space.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mount at a path, undone when dropped.
pub struct Mount(PathBuf);

impl Mount {
    /// A tmpfs with `options` (`size=8m`) at `at`, or `None`, said on stderr, where this
    /// process may not mount (not root, or in a container without the capability).
    pub fn try_tmpfs(at: &Path, options: &str) -> Option<Mount> {
        std::fs::create_dir_all(at).expect("mount point");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(at)
            .output()
            .expect("run mount");
        if !out.status.success() {
            eprintln!(
                "skipped: mount -t tmpfs -o {options} {} is not permitted here (root \
                 needed): {}",
                at.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some(Mount(at.to_path_buf()))
    }

    /// [`Mount::try_tmpfs`] for a test that cannot run without it (the suite runs as root).
    pub fn tmpfs(at: &Path, options: &str) -> Mount {
        Mount::try_tmpfs(at, options)
            .unwrap_or_else(|| panic!("mount -t tmpfs -o {options} (this test needs root)"))
    }

    /// Mounts it again with `options` (`size=64m`: more space, the files kept).
    pub fn remount(&self, options: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(&self.0)
            .status()
            .expect("run mount");
        assert!(status.success(), "mount -o remount,{options} {}", self.0.display());
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // A lazy unmount as the fallback: a process of a failed test may still hold a
        // file there, and the mount must not outlive the test either way.
        let ok = Command::new("umount").arg(&self.0).status().is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}
