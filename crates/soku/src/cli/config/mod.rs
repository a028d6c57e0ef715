//! The config files: `~/.config/soku/config.toml` (or `$XDG_CONFIG_HOME/soku/`) and
//! `/etc/soku/config.toml`, both optional. Precedence, highest first:
//!
//! 1. the command line;
//! 2. the user's file, then the system's file;
//! 3. within one file, the first `[host."PATTERNS"]` section that matches the host as
//!    written on the command line (ssh_config's rule and patterns), then the top level;
//! 4. soku's own defaults, which are automatic: an empty file is the best file.
//!
//! `soku config [HOST]` prints the effective settings and where each came from.
//!
//! - `pattern.rs`: ssh_config host patterns.
//! - `error.rs`: why a file cannot be used.
//! - `file.rs`: one file, parsed and checked.
//! - `settings.rs`: the tunables with their origins, layered.

mod error;
mod file;
mod pattern;
mod settings;

use std::path::PathBuf;

pub use error::ConfigError;
use file::{default_paths, ConfigFile};
pub use settings::Settings;

use crate::cli::args::{CopyArgs, SshArgs};
use crate::exit::Exit;

/// The config files found, highest precedence first.
pub struct Layers {
    files: Vec<(PathBuf, Option<ConfigFile>)>,
}

impl Layers {
    /// Reads the user's and the system's files; a missing one is no error.
    pub fn load() -> Result<Layers, ConfigError> {
        Layers::load_from(default_paths())
    }

    fn load_from(paths: Vec<PathBuf>) -> Result<Layers, ConfigError> {
        let files = paths
            .into_iter()
            .map(|path| ConfigFile::read(&path).map(|file| (path, file)))
            .collect::<Result<_, _>>()?;
        Ok(Layers { files })
    }

    /// What the files set for `host` (`None`: a local copy, top-level keys only).
    pub fn for_host(&self, host: Option<&str>) -> Settings {
        self.files
            .iter()
            .filter_map(|(_, file)| file.as_ref())
            .fold(Settings::default(), |upper, file| upper.over(file.for_host(host)))
    }
}

/// A copy's arguments with the config files filled in where the command line is silent.
/// A file that cannot be used stops the copy (exit 2): a typo must not quietly become a
/// default.
pub fn apply(mut args: CopyArgs, host: Option<&str>) -> anyhow::Result<CopyArgs> {
    let layers = Layers::load().map_err(|e| Exit::usage(e.to_string()))?;
    Settings::from_args(&args).over(layers.for_host(host)).apply_to(&mut args);
    Ok(args)
}

/// The ssh-side settings (remote ports, remote soku, ssh program) for a command that
/// reaches `host` without copying (`soku tunnel`).
pub fn apply_ssh(ssh: &mut SshArgs, host: &str) -> anyhow::Result<()> {
    let layers = Layers::load().map_err(|e| Exit::usage(e.to_string()))?;
    Settings::from_ssh_args(ssh).over(layers.for_host(Some(host))).apply_to_ssh(ssh);
    Ok(())
}

/// `soku config [HOST]`: the effective settings for a copy to HOST and their origins.
pub fn show(host: Option<&str>) -> anyhow::Result<()> {
    let layers = Layers::load().map_err(|e| Exit::usage(e.to_string()))?;
    let mut out = String::new();
    render(&layers, host, &mut out);
    crate::exit::write_stdout(out.as_bytes())
}

fn render(layers: &Layers, host: Option<&str>, out: &mut String) {
    use crate::ui::visible;
    use std::fmt::Write as _;
    match host {
        Some(h) => _ = writeln!(out, "# soku's settings for a copy to or from {}", visible(h)),
        None => _ = writeln!(out, "# soku's settings for a local copy (top-level keys only)"),
    }
    for (path, file) in &layers.files {
        let state = if file.is_some() { "read" } else { "absent" };
        _ = writeln!(out, "# {state}: {}", visible(&path.display().to_string()));
    }
    let rows = layers.for_host(host).rows();
    let key_width = rows.iter().map(|r| r.key.len()).max().unwrap_or(0);
    let value_width = rows.iter().map(|r| r.value.len()).max().unwrap_or(0);
    _ = writeln!(out, "{:<key_width$}  {:<value_width$}  FROM", "KEY", "VALUE");
    for row in rows {
        let from = row.origin.map_or_else(|| "default".to_string(), |o| o.to_string());
        let line = format!("{:<key_width$}  {:<value_width$}  {from}", row.key, row.value);
        _ = writeln!(out, "{}", visible(&line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layers(user: &str, system: &str) -> (tempfile::TempDir, Layers) {
        let dir = tempfile::tempdir().expect("tempdir");
        let user_path = dir.path().join("user.toml");
        let system_path = dir.path().join("system.toml");
        std::fs::write(&user_path, user).expect("write");
        std::fs::write(&system_path, system).expect("write");
        let layers = Layers::load_from(vec![user_path, system_path]).expect("loads");
        (dir, layers)
    }

    #[test]
    fn the_user_file_wins_over_the_system_file() {
        let (_dir, layers) = layers(
            "[host.\"db\"]\ncompress = true\n",
            "compress = false\nretry-for = 30\n[host.\"db\"]\nretry-for = 7\n",
        );
        let s = layers.for_host(Some("db"));
        assert_eq!(s.compress.map(|s| s.value), Some(true));
        assert_eq!(s.retry_for.map(|s| s.value), Some(7));
        assert_eq!(layers.for_host(Some("web")).compress.map(|s| s.value), Some(false));
    }

    #[test]
    fn the_command_line_wins_over_every_file() {
        let (_dir, layers) = layers("retry-for = 5\nfsync = false\n", "retry-for = 6\n");
        let args = CopyArgs { retry_for: Some(99), ..CopyArgs::default() };
        let mut applied = args.clone();
        Settings::from_args(&args).over(layers.for_host(Some("h"))).apply_to(&mut applied);
        assert_eq!(applied.retry_for, Some(99));
        assert!(applied.no_fsync, "keys the command line leaves alone come from the file");
    }

    #[test]
    fn a_missing_file_is_no_error_and_an_empty_one_changes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layers = Layers::load_from(vec![dir.path().join("none.toml")]).expect("loads");
        assert_eq!(layers.for_host(Some("h")), Settings::default());
        let (_dir, layers) = self::layers("", "");
        let mut args = CopyArgs::default();
        Settings::from_args(&args).over(layers.for_host(Some("h"))).apply_to(&mut args);
        assert_eq!(format!("{args:?}"), format!("{:?}", CopyArgs::default()));
    }

    #[test]
    fn an_unreadable_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A directory where the file should be: reading it fails whoever runs the test.
        let err = Layers::load_from(vec![dir.path().to_path_buf()]).err().expect("refused");
        assert!(err.to_string().contains(&dir.path().display().to_string()), "{err}");
    }

    /// Catches: a FIFO at the config file's name holding soku until someone writes to
    /// it, and a link to `/dev/zero` read until memory runs out.
    #[test]
    #[cfg(unix)]
    fn a_fifo_or_a_device_is_refused_without_waiting() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("config.toml");
        // mkfifo(1): POSIX, where rustix has no mkfifoat on every system.
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(made.success(), "mkfifo: {made}");
        let zero = dir.path().join("zero.toml");
        std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
        // Bounded: without the fix the first read waits for a writer forever, so the
        // check runs on a thread the test stops waiting for.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let errors = [fifo, zero].map(|path| {
                Layers::load_from(vec![path]).err().map(|e| e.to_string()).unwrap_or_default()
            });
            let _ = tx.send(errors);
        });
        let [fifo_error, zero_error] =
            rx.recv_timeout(std::time::Duration::from_secs(20)).expect("did not hang");
        assert!(
            fifo_error.ends_with(
                "config.toml: is a FIFO, not a regular file: make it a regular file or remove it"
            ),
            "{fifo_error}"
        );
        assert!(
            zero_error.contains("zero.toml: is a character device, not a regular file"),
            "{zero_error}"
        );
    }

    /// Catches: a huge file read whole into memory.
    #[test]
    fn a_file_beyond_the_cap_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = dir.path().join("config.toml");
        let comment = format!("# {}\n", "x".repeat(1000));
        std::fs::write(&big, comment.repeat(1100)).expect("write");
        let err = Layers::load_from(vec![big]).err().expect("refused").to_string();
        assert!(err.contains("larger than 1024 KiB"), "{err}");
        // Up to the cap is read.
        let (_dir, _layers) = layers(&comment.repeat(1000), "");
    }

    #[test]
    fn the_listing_says_where_each_value_came_from() {
        let (dir, layers) = layers("[host.\"*.lab\"]\ntransport = \"tcp\"\n", "");
        let mut out = String::new();
        render(&layers, Some("db.lab"), &mut out);
        let user = dir.path().join("user.toml");
        let fields = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let row = |key: &str| out.lines().map(fields).find(|f| f[0] == key).expect("row");
        let origin = format!("{}:2", user.display());
        assert_eq!(row("transport"), ["transport", "tcp", &origin, "[host.\"*.lab\"]"], "{out}");
        assert_eq!(row("compress"), ["compress", "no", "default"], "{out}");
        assert!(out.contains(&format!("# read: {}", user.display())), "{out}");
    }
}
