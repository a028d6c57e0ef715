//! The built soku binary and preload library, found or built once per test process.
//!
//! Order of search: an environment override (`SOKU_BIN`, `SOKU_PRELOAD_LIB`); else the
//! file in the target directory the running test was built in (`target/<profile>/`),
//! after `cargo build -p <package>` with the same profile has brought it up to date.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The soku binary: `$SOKU_BIN`, else `cargo build -p soku` into this test's target dir.
pub fn soku_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| artifact("SOKU_BIN", "soku", "soku")).clone()
}

/// `libsoku_preload.so`: `$SOKU_PRELOAD_LIB`, else `cargo build -p soku-preload`.
pub fn preload_lib() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| artifact("SOKU_PRELOAD_LIB", "soku-preload", "libsoku_preload.so")).clone()
}

/// `preload-probe` (a client for the preload library's tests): `$SOKU_PRELOAD_PROBE`,
/// else `cargo build -p soku-testkit`.
pub fn preload_probe() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| artifact("SOKU_PRELOAD_PROBE", "soku-testkit", "preload-probe")).clone()
}

fn artifact(env: &str, package: &str, file: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "${env} is {} but that file does not exist", path.display());
        return path;
    }
    let profile_dir = profile_dir();
    let (target_dir, profile) = split_profile_dir(&profile_dir);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(workspace_root())
        .args(["build", "--quiet", "-p", package, "--profile", &profile])
        .env("CARGO_TARGET_DIR", &target_dir);
    let out = build.output().unwrap_or_else(|e| panic!("cannot run cargo to build {package}: {e}"));
    let path = profile_dir.join(file);
    assert!(
        out.status.success() && path.is_file(),
        "{file} not found: set ${env}, or build it with `cargo build -p {package}`\n{}",
        crate::cmd::describe(&build, &out)
    );
    path
}

/// `target/<profile>` of the running test executable (`target/<profile>/deps/test-hash`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test executable has a parent dir");
    if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().expect("deps has a parent").to_path_buf()
    } else {
        deps.to_path_buf()
    }
}

/// (`target`, `profile name`) from `target/<profile>`; cargo names the dev profile `debug`.
fn split_profile_dir(dir: &Path) -> (PathBuf, String) {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let profile = if name == "debug" { "dev".to_string() } else { name };
    (dir.parent().expect("profile dir has a parent").to_path_buf(), profile)
}

/// The workspace root: two levels above this crate's manifest.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
