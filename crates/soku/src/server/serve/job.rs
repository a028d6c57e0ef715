//! One job, on the first connection or on a kept server's: the client's request read,
//! held to the fence, its sources or target found, and the engine run.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use soku_engine::ahead::Walked;
use soku_engine::events::Silent;
use soku_engine::filter::Filter;
use soku_engine::link::Link;
use soku_engine::partial::made_dir::resolve_target;
use soku_engine::sync_target::sync_target;
use soku_engine::{CopyOptions, EngineError, Role};
use soku_proto::message::{Job, Message, UNFINISHED_SINCE_VERSION};
use soku_proto::name::{glob_text, Name, BYTE_NAMES_SINCE_VERSION};
use soku_proto::path::GLOB_OPTIONS;
use soku_proto::path::{Target, TargetError};
use soku_proto::receive::Receiver;
use soku_proto::sync::SyncRules;

use super::fence;
use super::home::expand_home;
use super::nudge::nudge_silent_jobs;
use crate::client::preview;
use crate::exit::Told;

/// What a job needs whichever carrier brings it.
pub struct Ground {
    /// What an upload's preview promised (see `crate::client::preview`).
    pub promise: preview::Promise,
    pub fence: Arc<fence::Fence>,
    /// The protocol both sides speak.
    pub version: u16,
    /// The most descriptors the client may hold open, if it said.
    pub client_open_files: Option<u64>,
    /// How long the client may say nothing before the job takes it for stalled.
    pub stall: Duration,
    /// When the server started, for its summary.
    pub started: Instant,
}

impl Ground {
    /// [`serve_job`] on `link`, which runs on `quic` if the data moves over QUIC.
    pub async fn serve(
        &self,
        link: &mut Link,
        quic: Option<&quinn::Connection>,
    ) -> anyhow::Result<bool> {
        let Ground { promise, fence, version, client_open_files, .. } = self;
        serve_job(link, quic, promise, fence, *version, *client_open_files).await
    }
}

/// Reads the client's request and runs it. A failure before the copy starts (a bad
/// target, unreadable sources) is told to the client here; the engine tells its own.
/// Returns whether this side sent the data (a download). A job the `fence` refuses is
/// told so, and nothing of it runs. `version` is the protocol both sides speak;
/// `client_open_files` the most descriptors the client may hold open, if it said.
pub async fn serve_job(
    link: &mut Link,
    quic: Option<&quinn::Connection>,
    promise: &preview::Promise,
    fence: &fence::Fence,
    version: u16,
    client_open_files: Option<u64>,
) -> anyhow::Result<bool> {
    let request = match soku_engine::role::read_request(link).await {
        Ok(request) => request,
        Err(err) if err.tell_peer() => return Err(tell_client(link, err.to_string()).await),
        Err(err) => return Err(err.into()),
    };
    let (job, mut opts) = CopyOptions::from_request(request);
    if let Some(why) = fence.refuses(&job) {
        return Err(tell_client_only(link, why).await);
    }
    let (job, sync) = job.unwrap_sync();
    // A write-only server tells nothing of what it holds: every file comes whole, as
    // its resume reports say (`Role::Receive::blind`), and none is skipped.
    let sync = sync.map(|rules| SyncRules {
        checksum: rules.checksum || fence.write_only,
        update: rules.update && !fence.write_only,
        ..rules
    });
    opts.nothing_held = opts.flags.resume && promise.holds_for(&job);
    opts.byte_names = version >= BYTE_NAMES_SINCE_VERSION;
    opts.peer_open_files = client_open_files;
    // The client shows what this side holds when it runs out of space.
    opts.tell_unfinished = version >= UNFINISHED_SINCE_VERSION;
    let role = match job {
        Job::Tunnel { destination, compress } => {
            let Some(conn) = quic else {
                return Err(tell_client(
                    link,
                    "a tunnel needs QUIC, and the client chose another transport",
                )
                .await);
            };
            return crate::tunnel::serve(conn.clone(), &destination, compress)
                .await
                .map(|()| false);
        }
        Job::Diagnose { target } => {
            // The probes' figures travel in diagnose's own messages, not the summary.
            // Its disk test writes a scratch file: none on a read-only server, and on a
            // confined one in the root itself, which is the administrator's to name.
            let disk = match &fence.root {
                _ if fence.read_only => None,
                Some(root) => Some(root.path().to_path_buf()),
                None => Some(expand_home(&target)),
            };
            return crate::diagnose::serve(link, quic, disk.as_deref()).await.map(|()| false);
        }
        Job::Receive { target, sources } => {
            if !opts.nothing_held {
                // A kept job this client left (UDP cut) may hold the partial files, which
                // a receiver waits for with or without resume. A look through /proc, off
                // the runtime; the receiver's wait for a held partial file
                // (`soku_engine::partial`) goes on meanwhile.
                drop(tokio::task::spawn_blocking(nudge_silent_jobs));
            }
            receive_role(&target, sources, opts, fence, sync)
        }
        // A client that goes away (its ssh channel's end closes QUIC) stops the walk of
        // a large tree too, rather than this server walking on for nobody.
        Job::Send { sources } => match quic {
            Some(conn) => tokio::select! {
                role = send_role(&sources, opts, fence, sync) => role,
                closed = conn.closed() => Err(anyhow::anyhow!("{closed} while walking the sources")),
            },
            None => send_role(&sources, opts, fence, sync).await,
        },
        Job::Browse => return super::browse::serve(link, fence).await.map(|()| false),
        // Unwrapped above.
        Job::Sync { .. } => Err(anyhow::anyhow!("a sync inside a sync")),
    };
    let role = match role {
        Ok(role) => role,
        Err(err) => return Err(tell_client_only(link, format!("{err:#}")).await),
    };
    let sent_data = matches!(role, Role::Send(_));
    soku_engine::run(role, link, opts, Arc::new(Silent)).await.map_err(|e| match e {
        // A failure of this side's files, sent to the client as `Fatal` by the engine
        // (`soku_engine::role::run`), which shows it. A broken protocol is printed here
        // too: it may be no client of ours at the other end.
        EngineError::Target(line) | EngineError::Source(line) | EngineError::NoSpace(line) => {
            Told(line).into()
        }
        // The client's own failure, which it shows (a full disk of a download): printed
        // here too, it reached the user twice, the second time named remote.
        EngineError::Remote(line) => Told(line).into(),
        other => anyhow::Error::from(other),
    })?;
    Ok(sent_data)
}

/// The receiver's role for an upload into `target` of `sources` sources (a sync's
/// under its rules).
fn receive_role(
    target: &Name,
    sources: u32,
    opts: CopyOptions,
    fence: &fence::Fence,
    sync: Option<SyncRules>,
) -> anyhow::Result<Role> {
    let target = fence.path(spelled(target)?);
    if let Some(rules) = &sync {
        return sync_receive_role(target, opts, fence, rules.clone());
    }
    let (target, missing) = match &fence.root {
        // Beneath a root every look goes through it; the mark of an interrupted copy
        // (`resolve_target`) is not looked for there.
        Some(_) => {
            let target = Target::resolve(&target, fence.is_dir(&target), sources)?;
            // A bare name's root is the empty path, which a root never leaves.
            let missing = (!fence.is_dir(target.root())).then(|| target.root().to_path_buf());
            (target, missing)
        }
        None => {
            let target = resolve_target(&target, sources)?;
            let missing = target.missing_root();
            (target, missing)
        }
    };
    if let Some(missing) = missing {
        return Err(TargetError::NoSuchDirectory(missing).into());
    }
    receiving(target, opts, fence, None)
}

/// The receiver's role into `target`, held to `fence`, under a sync's rules if any.
fn receiving(
    target: Target,
    opts: CopyOptions,
    fence: &fence::Fence,
    sync: Option<SyncRules>,
) -> anyhow::Result<Role> {
    let root = target.root().to_path_buf();
    let receiver = Receiver::new(target, None, opts.flags.recursive, opts.flags.chunk_size)?;
    Ok(Role::Receive {
        receiver: Box::new(receiver),
        root,
        beneath: fence.root.clone(),
        blind: fence.write_only,
        sync,
    })
}

/// A sync's receiving role: the target is a directory, made (one level, as rsync makes
/// it) when missing, unless this is a dry run, whose receiver makes nothing.
fn sync_receive_role(
    target: PathBuf,
    opts: CopyOptions,
    fence: &fence::Fence,
    rules: SyncRules,
) -> anyhow::Result<Role> {
    let target = sync_target(&target, rules.dry_run, fence.root.as_deref())?;
    receiving(target, opts, fence, Some(rules))
}

/// The sender's role for a download of `sources` (a sync's under its rules).
async fn send_role(
    sources: &[Name],
    opts: CopyOptions,
    fence: &fence::Fence,
    sync: Option<SyncRules>,
) -> anyhow::Result<Role> {
    let sources = sources.iter().map(spelled).collect::<anyhow::Result<Vec<_>>>()?;
    let sources = expand_sources(&sources, fence);
    if let Some(rules) = sync {
        let filter = Filter::new(&rules.filter)?;
        let walked = Walked::walk_sync(sources, rules, filter, fence.root.clone()).await?;
        return Ok(Role::Send(walked));
    }
    Ok(Role::Send(Walked::walk_beneath(sources, opts.flags.recursive, fence.root.clone()).await?))
}

/// Sends `message` to the client as the end of the job, and returns it as the error.
async fn tell_client(link: &Link, message: impl Into<String>) -> anyhow::Error {
    let message = message.into();
    let _ = link.tx.send_control(Message::Fatal { message: message.clone() }).await;
    anyhow::anyhow!(message)
}

/// The same for a failure of the job's files (its target, its sources), which the
/// client shows as `remote: ...`: once the client has it, the server does not print it
/// again (its error output reaches the user's terminal too).
async fn tell_client_only(link: &Link, message: String) -> anyhow::Error {
    match link.tx.send_control(Message::Fatal { message: message.clone() }).await {
        Ok(()) => Told(message).into(),
        // The client did not hear it: the error output is the only way left.
        Err(_) => anyhow::anyhow!(message),
    }
}

/// The local spelling of a path the client names (bytes, UTF-8 or not).
fn spelled(name: &Name) -> anyhow::Result<&OsStr> {
    name.to_os().ok_or_else(|| anyhow::anyhow!("{name}: a name this system cannot spell"))
}

/// Expands `~` and globs in source paths, as the remote shell does for scp. Behind a
/// root, a match that does not resolve beneath it is no match: its name is not told.
fn expand_sources(sources: &[&OsStr], fence: &fence::Fence) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for source in sources {
        let path = fence.path(source);
        let bytes = path.as_os_str().as_bytes();
        let has_glob = bytes.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
        let matches: Vec<PathBuf> = match path.to_str() {
            _ if !has_glob || path.exists() => Vec::new(),
            // `**` spans directories, as the glob crate reads it.
            Some(pattern) if pattern.contains("**") => glob::glob(pattern)
                .map(|paths| {
                    paths
                        .filter_map(Result::ok)
                        .filter(|found| dots_spelled_out(pattern, &found.to_string_lossy()))
                        .collect()
                })
                .unwrap_or_default(),
            _ => glob_names(&path),
        };
        let matches: Vec<PathBuf> = matches.into_iter().filter(|p| fence.holds(p)).collect();
        if matches.is_empty() {
            out.push(path);
        } else {
            out.extend(matches);
        }
    }
    out
}

/// The paths `pattern` matches, sorted, found as glob(3) finds them for scp: one name
/// at a time, each matched as bytes through its lossless text form
/// (`soku_proto::name::glob_text`; the glob crate skips names that are not UTF-8), and
/// a `*` or `?` never matching a leading dot ([`GLOB_OPTIONS`]).
fn glob_names(pattern: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::new()];
    for part in pattern.components() {
        let name = match part {
            Component::Normal(name) => name.as_bytes(),
            _ => b"",
        };
        if !name.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
            found.iter_mut().for_each(|path| path.push(part));
            continue;
        }
        let Ok(glob) = glob::Pattern::new(&glob_text(name)) else { return Vec::new() };
        let mut next = Vec::new();
        for dir in &found {
            let listed = if dir.as_os_str().is_empty() { Path::new(".") } else { dir.as_path() };
            let Ok(entries) = std::fs::read_dir(listed) else { continue };
            for entry in entries.filter_map(Result::ok) {
                let entry = entry.file_name();
                if glob.matches_with(&glob_text(entry.as_bytes()), GLOB_OPTIONS) {
                    next.push(dir.join(entry));
                }
            }
        }
        next.sort();
        found = next;
    }
    found.retain(|path| std::fs::symlink_metadata(path).is_ok());
    found
}

/// Whether every name of `found` that starts with a dot has that dot spelled out in the
/// same component of `pattern`, as the shell and glob(3) require for scp: `dir/*` skips
/// `dir/.hidden`, `dir/.h*` finds it. (The glob crate's own option for this drops every
/// dotfile, even one the pattern names.)
fn dots_spelled_out(pattern: &str, found: &str) -> bool {
    let parts = |p: &str| -> Vec<String> {
        p.split('/').filter(|c| !c.is_empty() && *c != ".").map(str::to_string).collect()
    };
    let (pattern, found) = (parts(pattern), parts(found));
    let hidden_not_named = |(p, f): (&String, &String)| f.starts_with('.') && !p.starts_with('.');
    if pattern.len() == found.len() {
        !pattern.iter().zip(&found).any(hidden_not_named)
    } else {
        // `**` spans several names: only the last one lines up.
        !pattern.last().zip(found.last()).is_some_and(hidden_not_named)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_expand_and_literals_stay() {
        let tmp = tempfile::tempdir().expect("tempdir");
        for name in ["a.txt", "b.txt", "c.log", ".hidden.txt"] {
            std::fs::write(tmp.path().join(name), b"x").expect("write");
        }
        let pattern = format!("{}/*.txt", tmp.path().display());
        let none = fence::Fence::default();
        let mut found = expand_sources(&[pattern.as_ref()], &none);
        found.sort();
        let named = |n: &str| tmp.path().join(n);
        assert_eq!(found, [named("a.txt"), named("b.txt")], "a glob skips dotfiles");
        let dotted = format!("{}/.h*", tmp.path().display());
        let found = expand_sources(&[dotted.as_ref()], &none);
        assert_eq!(found, [named(".hidden.txt")], "a dot spelled out");
        let latin1 = OsStr::from_bytes(b"c\xe9.txt");
        std::fs::write(tmp.path().join(latin1), b"x").expect("write");
        let mut found = expand_sources(&[pattern.as_ref()], &none);
        found.sort();
        let want = [named("a.txt"), named("b.txt"), tmp.path().join(latin1)];
        assert_eq!(found, want, "a name that is not UTF-8 matches too");
        let missing = format!("{}/none*", tmp.path().display());
        assert_eq!(
            expand_sources(&[missing.as_ref()], &fence::Fence::default()),
            [PathBuf::from(missing)]
        );
    }
}
