//! Deploying soku to a remote that has none: the copy's own ssh session found no soku
//! there and said the remote's system and machine (`remote_soku.rs`, `FIND_SOKU`).
//! If a binary for them is at hand, one more ssh session (through the shared login's
//! master, when there is one) sends it into a per-user cache on the remote,
//! `~/.cache/soku/bin/<version>-<hash>/soku`, and the copy starts again: the remote
//! finds it there, this time and next time, and nothing more is sent.
//!
//! - **Which binary.** This one, when it is the static (musl) build for the remote's
//!   machine; otherwise the one the user put in `~/.cache/soku/dist/` under the name
//!   `scripts/dist.sh` gives it (`soku-x86_64-unknown-linux-musl`). A remote that is not
//!   Linux, or whose machine has none of these, is told so in one line, with where to
//!   put a binary.
//! - **How it lands.** [`INSTALL`] writes it under a temporary name in a directory only
//!   its user can enter (umask 077), checks its size and SHA-256 (coreutils'
//!   `sha256sum`, where every Linux has it, unlike a BLAKE3 tool), records that hash
//!   beside it, and renames both into place. `FIND_SOKU` runs a deployed soku only
//!   while its hash still matches the record: one changed after it landed is sent again,
//!   never run.
//! - **What it never does.** Touch a soku the user installed: one found on PATH or in
//!   the user's places runs first, and the cache is soku's own.

use std::path::{Path, PathBuf};
use std::time::Instant;

use soku_engine::events::{EventSink, TransferEvent};
use soku_proto::name::shown;
use tokio::io::AsyncWriteExt;

use super::remote_soku::{DEPLOY_MARK, SAY_PLATFORM, USER_PLACES};
use super::shell::shell_quote;
use super::Launcher;
use crate::cli::spec::Remote;
use crate::exit::Exit;

/// Installs the binary that comes on stdin, as `sh -c INSTALL NAME SIZE SHA256 [first]`,
/// NAME the cache entry (`<version>-<hash>`); exits 0 once it is in place. `first`
/// marks it to run before a soku on PATH or in the user's places (`FIND_SOKU`). One
/// line without `!`, as `FIND_SOKU`.
pub const INSTALL: &str = "umask 077; d=\"$HOME/.cache/soku/bin/$0\"; mkdir -p \"$d\" || exit 1; \
     t=\"$d/soku.$$\"; head -c \"$1\" > \"$t\" && [ \"$(wc -c < \"$t\")\" -eq \"$1\" ] && \
     s=$(sha256sum < \"$t\") && [ \"$s\" = \"$2  -\" ] && chmod 700 \"$t\" && \
     printf '%s\\n' \"$s\" > \"$t.sha256\" && mv -f \"$t\" \"$d/soku\" && \
     mv -f \"$t.sha256\" \"$d/soku.sha256\" && \
     { [ \"$3\" != first ] || : > \"$d/soku.first\"; } && exit 0; rm -f \"$t\" \"$t.sha256\"; exit 1";

/// Largest binary sent: far above a release build (about 10 MB), far below what would
/// fill a remote disk by mistake.
const MAX_BINARY: u64 = 256 << 20;

/// The remote's system and machine, as `uname -s` and `uname -m` said them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub arch: String,
}

impl Platform {
    /// The platform the remote's line says, among what the remote printed before it
    /// ended. Its words are the peer's: only short plain ones are taken.
    pub fn said_in(output: &str) -> Option<Platform> {
        let line = output.lines().find(|line| line.starts_with(DEPLOY_MARK))?;
        let mut words = line.split_whitespace().skip(1);
        let plain = |word: &str| {
            !word.is_empty()
                && word.len() <= 32
                && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        };
        let (os, arch) = (words.next()?, words.next()?);
        (plain(os) && plain(arch)).then(|| Platform { os: os.into(), arch: arch.into() })
    }

    /// The Rust target of soku's static build for this platform.
    fn target(&self) -> Option<String> {
        (self.os == "Linux").then(|| format!("{}-unknown-linux-musl", self.arch))
    }
}

/// The remote has no soku this one can talk to.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct NoRemoteSoku {
    pub lack: Lack,
    pub message: String,
}

/// Why the remote's soku will not do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lack {
    /// None was found; what the remote said it runs, if it said.
    Missing(Option<Platform>),
    /// The one found speaks no protocol version in common with this one: these.
    OtherVersion(std::ops::RangeInclusive<u16>),
}

/// The remote's system and machine, asked in a shell of their own: a remote whose soku
/// speaks another protocol ran it, and said nothing of either.
pub async fn ask_platform(launcher: &Launcher, remote: &Remote) -> anyhow::Result<Platform> {
    let mut cmd = launcher.remote_shell(remote, SAY_PLATFORM.to_string(), false);
    cmd.stdin(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let out = tokio::time::timeout(ASK_LIMIT, cmd.output())
        .await
        .map_err(|_| anyhow::anyhow!("the remote host did not say its system within 30 s"))??;
    Platform::said_in(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| anyhow::anyhow!("the remote host did not say its system and machine"))
}

/// How long the remote has to say its platform: a login (through the shared one, when
/// there is one) and two `uname`s.
const ASK_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The binary to send to `platform`, or why there is none (a line for the user that
/// names every place looked, and the ways out).
pub fn binary_for(platform: &Platform) -> Result<PathBuf, String> {
    let missing = format!(
        "the remote host ({} {}) has no `soku` on its PATH or in {USER_PLACES}",
        platform.os, platform.arch
    );
    let Some(target) = platform.target() else {
        return Err(format!(
            "{missing}, and soku has no build for it to send: install soku there, or pass \
             --remote-soku /path/to/soku"
        ));
    };
    let this_one = cfg!(all(target_os = "linux", target_env = "musl"))
        && platform.arch == std::env::consts::ARCH;
    if this_one {
        return std::env::current_exe()
            .map_err(|e| format!("{missing}: cannot find this soku: {e}"));
    }
    let name = format!("soku-{target}");
    let at_hand =
        dist_dir().map_or_else(|| Path::new("~/.cache/soku/dist").join(&name), |d| d.join(&name));
    if at_hand.is_file() {
        return Ok(at_hand);
    }
    Err(format!(
        "{missing}, and no soku for it is at hand to send: put its static build at {} \
         (scripts/dist.sh builds it), install soku there, or pass --remote-soku /path/to/soku",
        shown(&at_hand)
    ))
}

/// Where the user puts the binaries soku may send (`~/.cache/soku/dist`).
pub fn dist_dir() -> Option<PathBuf> {
    Some(crate::client::private_dir::soku_cache_dir()?.join("dist"))
}

/// What [`install`] sent.
pub struct Installed {
    pub bytes: u64,
    pub seconds: f64,
}

/// Sends `binary` into the remote's cache, through `launcher`'s ssh; `first`: to run
/// before any soku the user installed there (see [`INSTALL`]).
pub async fn install(
    launcher: &Launcher,
    remote: &Remote,
    binary: &Path,
    first: bool,
) -> anyhow::Result<Installed> {
    let started = Instant::now();
    let bytes = tokio::fs::read(binary)
        .await
        .map_err(|e| anyhow::anyhow!("cannot read {} to send it: {e}", shown(binary)))?;
    if bytes.len() as u64 > MAX_BINARY {
        anyhow::bail!("{} is too large to send as soku", shown(binary));
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("{}-{}", env!("CARGO_PKG_VERSION"), &hex[..16]);
    let mut line =
        format!("sh -c {} {} {} {hex}", shell_quote(INSTALL), shell_quote(&name), bytes.len());
    if first {
        line.push_str(" first");
    }
    let mut cmd = launcher.remote_shell(remote, line, false);
    cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::null());
    cmd.stderr(std::process::Stdio::piped()).kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let mut stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("no stdin for ssh"))?;
    let sent = async {
        stdin.write_all(&bytes).await?;
        stdin.shutdown().await
    };
    // A remote that fails early stops reading: its status says why, below.
    let _ = sent.await;
    drop(stdin);
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = said.lines().last().unwrap_or("no message");
        anyhow::bail!(
            "could not install soku in ~/.cache/soku/bin on the remote host ({said}; it needs \
             sh, head, wc and sha256sum): install soku there, or pass --no-deploy"
        );
    }
    Ok(Installed { bytes: bytes.len() as u64, seconds: started.elapsed().as_secs_f64() })
}

/// Sends a soku to a remote that has none it can talk to (`client/launch/deploy.rs`),
/// and says so in one line; an error, with the reason, when there is none to send or it
/// did not land.
pub async fn send(
    launcher: &Launcher,
    remote: &Remote,
    missing: &NoRemoteSoku,
    events: &dyn EventSink,
) -> anyhow::Result<()> {
    let platform = match &missing.lack {
        Lack::Missing(Some(platform)) => platform.clone(),
        Lack::Missing(None) => return Err(Exit::connection(missing.message.clone()).into()),
        Lack::OtherVersion(_) => ask_platform(launcher, remote).await.map_err(|e| {
            Exit::connection(format!("{}; {}", missing.message, crate::exit::one_line(&e)))
        })?,
    };
    let binary = binary_for(&platform).map_err(|why| match &missing.lack {
        Lack::OtherVersion(_) => Exit::connection(missing.message.clone()),
        Lack::Missing(_) => Exit::connection(why),
    })?;
    let first = matches!(missing.lack, Lack::OtherVersion(_));
    let installed = install(launcher, remote, &binary, first)
        .await
        .map_err(|e| Exit::connection(crate::exit::one_line(&e)))?;
    let done = format!(
        "installed soku {} for {} {} on {} in ~/.cache/soku/bin ({}, {:.1} s)",
        env!("CARGO_PKG_VERSION"),
        platform.arch,
        platform.os,
        remote.host,
        crate::ui::human_bytes(installed.bytes),
        installed.seconds
    );
    let line = match &missing.lack {
        Lack::OtherVersion(speaks) => format!(
            "the remote's soku speaks protocol {}, this one {}: left it in place, {done}, and \
             copies from this soku use that one",
            range(speaks),
            range(&soku_proto::PROTOCOL_VERSIONS)
        ),
        Lack::Missing(_) => done,
    };
    events.event(TransferEvent::Notice(line));
    Ok(())
}

/// A range of protocol versions, as the user reads it: `5-9`, or `7`.
fn range(versions: &std::ops::RangeInclusive<u16>) -> String {
    match versions.start() == versions.end() {
        true => versions.start().to_string(),
        false => format!("{}-{}", versions.start(), versions.end()),
    }
}

// The deploy script runs under a Unix shell.
#[cfg(all(test, unix))]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use std::process::{Command, ExitStatus, Stdio};

    use super::*;
    use crate::client::launch::remote_soku::FIND_SOKU;

    #[test]
    fn the_platform_is_read_from_the_remotes_line_and_nothing_else() {
        let said = "motd\nsoku-deploy Linux x86_64\n";
        let platform = Platform::said_in(said).expect("said");
        assert_eq!(platform, Platform { os: "Linux".into(), arch: "x86_64".into() });
        assert_eq!(platform.target().as_deref(), Some("x86_64-unknown-linux-musl"));
        assert!(Platform::said_in("no line here").is_none());
        // The peer's words reach a path and a line: only plain ones are taken.
        assert!(Platform::said_in("soku-deploy Linux ../../x").is_none());
        assert!(Platform::said_in("soku-deploy Linux \u{1b}[2J").is_none());
        let darwin = Platform::said_in("soku-deploy Darwin arm64").expect("said");
        assert!(binary_for(&darwin).expect_err("none").contains("no build for it"));
    }

    /// `sh -c INSTALL ...` fed a binary on stdin, with a made-up HOME.
    fn install_here(home: &Path, bytes: &[u8], sha256: &str, more: &[&str]) -> ExitStatus {
        let mut child = Command::new("sh")
            .args(["-c", INSTALL, "0.1.0-0123456789abcdef", &bytes.len().to_string(), sha256])
            .args(more)
            .env("HOME", home)
            .stdin(Stdio::piped())
            .spawn()
            .expect("sh");
        child.stdin.take().expect("stdin").write_all(bytes).expect("write");
        child.wait().expect("wait")
    }

    /// The remote's search for soku, with the same HOME and no soku on PATH.
    fn find_here(home: &Path) -> std::process::Output {
        find_with_path(home, "/usr/bin:/bin")
    }

    fn find_with_path(home: &Path, path: &str) -> std::process::Output {
        Command::new("sh")
            .args(["-c", FIND_SOKU, "0.1.0", "serve"])
            .env("HOME", home)
            .env("PATH", path)
            .output()
            .expect("sh")
    }

    fn sha256_hex(bytes: &[u8]) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
        digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A soku the user installed runs before a deployed one, unless that one was sent
    /// because the user's speaks another protocol (`first`); the user's stays in place.
    #[test]
    fn a_deployed_soku_runs_first_only_when_marked_so() {
        let home = tempfile::tempdir().expect("tempdir");
        let bin = home.path().join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        let old = b"#!/bin/sh\necho \"old $*\"\n";
        std::fs::write(bin.join("soku"), old).expect("write");
        std::fs::set_permissions(bin.join("soku"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let path = format!("{}:/usr/bin:/bin", bin.display());
        let bytes = b"#!/bin/sh\necho \"deployed $*\"\n";
        assert!(install_here(home.path(), bytes, &sha256_hex(bytes), &[]).success());
        let found = find_with_path(home.path(), &path);
        assert_eq!(String::from_utf8_lossy(&found.stdout), "old serve\n");
        assert!(install_here(home.path(), bytes, &sha256_hex(bytes), &["first"]).success());
        let found = find_with_path(home.path(), &path);
        assert_eq!(String::from_utf8_lossy(&found.stdout), "deployed serve\n");
        assert_eq!(std::fs::read(bin.join("soku")).expect("still there"), old);
    }

    /// What lands is what was sent, in a directory only its user enters, and the search
    /// runs it; one whose bytes changed is not run, and the search asks for another.
    #[test]
    fn a_deployed_soku_is_run_until_its_bytes_change() {
        let home = tempfile::tempdir().expect("tempdir");
        let bytes = b"#!/bin/sh\necho \"deployed $*\"\n";
        let hex = sha256_hex(bytes);
        assert!(!install_here(home.path(), bytes, &"0".repeat(64), &[]).success(), "a wrong hash");
        let dir = home.path().join(".cache/soku/bin/0.1.0-0123456789abcdef");
        assert!(!dir.join("soku").exists(), "nothing lands under a wrong hash");
        assert!(install_here(home.path(), bytes, &hex, &[]).success());
        assert_eq!(std::fs::read(dir.join("soku")).expect("landed"), bytes);
        let mode = std::fs::metadata(&dir).expect("dir").permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        let found = find_here(home.path());
        assert_eq!(String::from_utf8_lossy(&found.stdout), "deployed serve\n");
        let mut changed = bytes.to_vec();
        changed.extend_from_slice(b"echo changed\n");
        std::fs::write(dir.join("soku"), changed).expect("change it");
        let refused = find_here(home.path());
        assert_eq!(refused.status.code(), Some(127));
        assert!(String::from_utf8_lossy(&refused.stdout).starts_with("soku-deploy "));
    }
}
