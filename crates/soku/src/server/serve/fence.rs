//! The fences an administrator puts around `soku serve` in a forced command
//! (`command="soku serve --root /data --read-only"` in authorized_keys), held by this
//! side whatever the client asks, for the first job and every job of a kept server.
//!
//! - **The client's options.** sshd runs the forced command instead of the client's,
//!   and hands the client's in `SSH_ORIGINAL_COMMAND`. They are split as a shell would
//!   split them, without expanding anything, and must be a `soku serve` line (any
//!   program name: the client's `--remote-soku`); from it the server takes the port
//!   range, bind address and stall limit the client asked for, unless the forced
//!   command set its own, and the fences the client adds (`--read-only`,
//!   `--write-only`, `--no-tunnel`: a client can only narrow). A client's `--root` or
//!   `--allow-tunnel` counts for nothing.
//! - **TCP.** A forced command carries no TCP connections unless the administrator
//!   added `--allow-tunnel`: `restrict` in authorized_keys stops sshd's own forwarding,
//!   and a key meant for copies must not open another way. sshd sets
//!   `SSH_ORIGINAL_COMMAND` only when the client sends a command, and a client that
//!   sends none gets the forced command all the same; so any fence given to `soku
//!   serve` (`--root`, `--read-only`, `--write-only`) turns tunnels off too, and a
//!   forced command with one needs no more to be closed to a hand-made client.
//! - **`--root`.** Every path the client names is taken from the root: `x`, `~/x` and
//!   `/x` are all ROOT/x, as rrsync and sftp's `ChrootDirectory` take them (refusing
//!   absolute paths would break every `host:/path` a user already types, and gains
//!   nothing: the kernel resolves each path beneath the root anyway). The root is
//!   opened once; every look, open and listing resolves beneath it
//!   (`soku_engine::fsops::TargetDir::open_beneath`), so neither `..` nor a symlink
//!   leads out, not even one swapped in during the copy.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use rustix::fs::OFlags;
use soku_engine::fsops::TargetDir;
use soku_proto::message::Job;

use crate::cli::args::ServeArgs;
use crate::sys::LOOKUP;

/// The fences this server holds.
#[derive(Debug, Default, Clone)]
pub struct Fence {
    /// No job writes, creates, deletes or renames anything.
    pub read_only: bool,
    /// No job reads or lists what is there.
    pub write_only: bool,
    /// TCP connections may be carried (`soku tunnel`).
    pub tunnel: bool,
    /// Every path resolves beneath this directory.
    pub root: Option<Arc<TargetDir>>,
}

/// The client's `soku serve` options, as they would be parsed on its command line.
#[derive(Debug, Parser)]
#[command(name = "serve", no_binary_name = false)]
struct ClientServe {
    #[command(flatten)]
    args: ServeArgs,
}

/// The options this server runs with, and its fences: the command line's, with the
/// client's from `SSH_ORIGINAL_COMMAND` when sshd ran this as a forced command.
pub fn effective(admin: ServeArgs) -> anyhow::Result<(ServeArgs, Fence)> {
    let original = std::env::var("SSH_ORIGINAL_COMMAND").ok();
    let client = original.as_deref().map(client_args).transpose()?;
    let fenced = original.is_some() || admin.root.is_some() || admin.read_only || admin.write_only;
    let root = match &admin.root {
        Some(dir) => Some(Arc::new(open_root(dir)?)),
        None => None,
    };
    let narrowed = |pick: fn(&ServeArgs) -> bool| pick(&admin) || client.as_ref().is_some_and(pick);
    let fence = Fence {
        read_only: narrowed(|a| a.read_only),
        write_only: narrowed(|a| a.write_only),
        tunnel: !narrowed(|a| a.no_tunnel) && (admin.allow_tunnel || !fenced),
        root,
    };
    let args = match client {
        None => admin,
        Some(client) => ServeArgs {
            bind: admin.bind.or(client.bind),
            ports: admin.ports.or(client.ports),
            // The shorter limit: the client's for its own copies, never past the admin's.
            stall_timeout: admin.stall_timeout.min(client.stall_timeout),
            ..admin
        },
    };
    Ok((args, fence))
}

/// The client's serve options from its command line (sshd's `SSH_ORIGINAL_COMMAND`).
fn client_args(line: &str) -> anyhow::Result<ServeArgs> {
    let refused = || {
        anyhow::anyhow!(
            "this ssh key runs only `soku serve` (the administrator's forced command), \
             and the client asked for {line:?}: use soku with this key, or another key"
        )
    };
    let words = crate::client::launch::shell::shell_words(line).map_err(|_| refused())?;
    // A client that names no remote soku asks the shell to find one
    // (`client/launch/remote_soku.rs`): `sh -c SCRIPT VERSION serve ...`. The script is
    // never run here (sshd ran the administrator's command instead), so any client's
    // script will do, another version's too: only the serve line after it counts.
    let words = match words.as_slice() {
        [sh, c, _script, line @ ..] if sh == "sh" && c == "-c" => line.to_vec(),
        _ => words,
    };
    if words.get(1).map(String::as_str) != Some("serve") {
        return Err(refused());
    }
    let parsed = ClientServe::try_parse_from(&words[1..]).map_err(|e| {
        let why = e.to_string();
        let why = why.lines().next().unwrap_or("").trim_start_matches("error: ");
        anyhow::anyhow!("the client's soku serve options ({line:?}) do not parse here: {why}")
    })?;
    Ok(parsed.args)
}

/// Opens the administrator's root, once: the directory every job resolves beneath.
fn open_root(dir: &Path) -> anyhow::Result<TargetDir> {
    // Named by the administrator: a symlink there is followed once, here.
    let real = std::fs::canonicalize(dir)
        .with_context(|| format!("soku serve --root {}: cannot open it", dir.display()))?;
    TargetDir::open(&real)
        .with_context(|| format!("soku serve --root {}: cannot open it", dir.display()))
}

impl Fence {
    /// Why `job` is refused here, if it is: a line the client shows as `remote: ...`.
    pub fn refuses(&self, job: &Job) -> Option<String> {
        match job {
            Job::Receive { .. } if self.read_only => Some(
                "uploads are refused: this server is read-only (soku serve --read-only, \
                 set by its administrator): copy from it, not to it"
                    .into(),
            ),
            Job::Send { .. } if self.write_only => Some(
                "downloads are refused: this server is write-only (soku serve --write-only, \
                 set by its administrator): copy to it, not from it"
                    .into(),
            ),
            Job::Tunnel { .. } if !self.tunnel => Some(
                "tunnels are refused: this server carries no TCP connections (soku serve \
                 as a forced command, or with --no-tunnel or another fence, and without \
                 --allow-tunnel)"
                    .into(),
            ),
            Job::Sync { .. } => {
                let (job, rules) = job.clone().unwrap_sync();
                let rules = rules.unwrap_or_default();
                match self.refuses(&job) {
                    Some(why) => Some(why),
                    // A drop box tells nothing of what it holds, and loses nothing.
                    None if self.write_only && (rules.delete || rules.dry_run) => Some(
                        "sync --delete and --dry-run are refused: this server is write-only \
                         (soku serve --write-only, set by its administrator): it neither \
                         removes nor lists what it holds; sync without them"
                            .into(),
                    ),
                    None => None,
                }
            }
            _ => None,
        }
    }

    /// Whether anything restricts what jobs see of the file system: the receive
    /// preview (which tells whether names are taken) is then answered "maybe".
    pub fn hides_files(&self) -> bool {
        self.root.is_some() || self.write_only || self.read_only
    }

    /// The local path for a path the client names: home-relative as ever
    /// ([`super::home::expand_home`]), or taken from the root (see the module documentation).
    pub fn path(&self, requested: impl AsRef<OsStr>) -> PathBuf {
        let requested = requested.as_ref();
        let Some(root) = &self.root else { return super::home::expand_home(requested) };
        let bytes = requested.as_bytes();
        let rest = bytes.strip_prefix(b"~").filter(|r| r.is_empty() || r.starts_with(b"/"));
        let rest = rest.unwrap_or(bytes);
        let rest = &rest[rest.iter().take_while(|&&b| b == b'/').count()..];
        if rest.is_empty() {
            root.path().to_path_buf()
        } else {
            root.path().join(OsStr::from_bytes(rest))
        }
    }

    /// Whether `path` (from [`Self::path`]) is a directory, looked at beneath the root.
    pub fn is_dir(&self, path: &Path) -> bool {
        match &self.root {
            Some(root) => root
                .open_beneath(path, LOOKUP | OFlags::DIRECTORY)
                .is_ok_and(|fd| std::fs::File::from(fd).metadata().is_ok_and(|md| md.is_dir())),
            None => std::fs::metadata(path).is_ok_and(|md| md.is_dir()),
        }
    }

    /// Whether `path` names something beneath the root (always, with none).
    pub fn holds(&self, path: &Path) -> bool {
        match &self.root {
            Some(root) => root.open_beneath(path, LOOKUP).is_ok(),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rooted(dir: &Path) -> Fence {
        Fence { root: Some(Arc::new(open_root(dir).expect("root"))), ..Fence::default() }
    }

    #[test]
    fn every_path_is_taken_from_the_root() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let real = std::fs::canonicalize(tmp.path()).expect("canonical");
        let fence = rooted(tmp.path());
        for (asked, want) in [
            ("", real.clone()),
            ("~", real.clone()),
            ("~/", real.clone()),
            ("/", real.clone()),
            ("x", real.join("x")),
            ("~/x", real.join("x")),
            ("/x", real.join("x")),
            ("//x/y", real.join("x/y")),
            ("~other/x", real.join("~other/x")),
        ] {
            assert_eq!(fence.path(asked), want, "{asked:?}");
        }
        assert_eq!(Fence::default().path("~/x"), Path::new("x"));
    }

    #[test]
    fn nothing_outside_the_root_is_seen() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("inside")).expect("mkdir");
        std::os::unix::fs::symlink("/etc", root.join("out")).expect("link");
        std::os::unix::fs::symlink("../..", root.join("up")).expect("link");
        std::os::unix::fs::symlink("inside", root.join("in")).expect("link");
        let fence = rooted(&root);
        assert!(fence.is_dir(&fence.path("/inside")));
        assert!(fence.is_dir(&fence.path("in")), "a link that stays inside is followed");
        for outside in ["out", "up", "../", "/../../etc", "inside/../../"] {
            assert!(!fence.is_dir(&fence.path(outside)), "{outside}");
            assert!(!fence.holds(&fence.path(outside)), "{outside}");
        }
    }

    #[test]
    fn the_client_may_only_name_serve_options() {
        assert!(client_args("soku serve --ports 40000-40100").is_ok());
        assert!(client_args("/opt/bin/soku serve").is_ok());
        let found = crate::client::launch::remote_soku::command_line(None, "serve --ports 1-2");
        assert_eq!(client_args(&found).expect("parses").ports, Some(1..=2));
        // Another version's search: never run here, only its serve line counts.
        let other = client_args("sh -c 'exec soku \"$@\"' 0.0.1 serve --read-only");
        assert!(other.expect("parses").read_only);
        assert!(client_args("sh -c 'cat /etc/passwd' 0.0.1 sleep 9").is_err());
        let refused = client_args("cat /etc/passwd").expect_err("not serve");
        assert!(refused.to_string().contains("runs only `soku serve`"), "{refused}");
        assert!(client_args("soku serve --no-such-option").is_err());
        assert!(client_args("soku 'serve").is_err());
        let narrowed = client_args("soku serve --read-only --no-tunnel").expect("parses");
        assert!(narrowed.read_only && narrowed.no_tunnel);
    }
}
