//! Where the bench writes: below the cargo target directory it was built in, never in
//! the source tree.

use std::path::{Path, PathBuf};

/// The cargo target directory `exe` was built in (`target/release/soku-bench` ->
/// `target`): where the bench keeps what it makes, so that `cargo clean` removes it and
/// no run writes into the source tree.
pub(crate) fn target_dir(exe: &Path) -> &Path {
    let profile = exe.parent().unwrap_or(exe);
    profile.parent().unwrap_or(profile)
}

/// Where a run writes without `--out`: `bench/DATE` in the target directory. Raw
/// per-run output stays out of the tree; a result worth keeping is copied to `lab/`.
pub(crate) fn default_out(exe: &Path, date: &str) -> PathBuf {
    target_dir(exe).join("bench").join(date)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_without_out_writes_into_the_target_directory_not_the_source_tree() {
        let exe = Path::new("/src/soku/target/release/soku-bench");
        assert_eq!(default_out(exe, "2026-11-28"), Path::new("/src/soku/target/bench/2026-11-28"));
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let here = std::env::current_exe().unwrap();
        let out = default_out(&here, "2026-11-28");
        assert!(
            !out.starts_with(manifest),
            "{} is inside the bench's source directory {}",
            out.display(),
            manifest.display()
        );
    }

    #[test]
    fn the_target_directory_is_two_levels_above_the_binary() {
        assert_eq!(target_dir(Path::new("/t/release/soku-bench")), Path::new("/t"));
        assert_eq!(
            target_dir(Path::new("/t/x86_64-unknown-linux-gnu/release/soku-bench")),
            Path::new("/t/x86_64-unknown-linux-gnu")
        );
    }
}
