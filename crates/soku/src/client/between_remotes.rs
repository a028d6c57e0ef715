//! A copy between two remote hosts (`soku h1:src h2:dst`), as scp makes it:
//!
//! - **`-R`: the origin host copies.** soku on the origin (found as any remote soku is,
//!   and sent there when it has none: `client/launch/deploy.rs`) runs the copy to the
//!   destination over the origin's own ssh, with the copy's options. The data goes
//!   straight from one host to the other at soku's speed, verified end to end there;
//!   the origin must be able to log in to the destination without a password (its own
//!   key, or the user's agent with `-A`), so its soku runs in batch mode (`-B`).
//! - **Through this host (`-3`, and scp's default since OpenSSH 8.7)**: a session to
//!   each host, joined here (`client/through_here.rs`).
//!
//! What the origin's soku prints reaches the user as any remote end's error output does:
//! line by line, made visible (`client/launch/stderr.rs`).

use std::ffi::OsString;
use std::process::Stdio;

use soku_engine::events::{EventSink, TransferEvent};
use tokio::io::AsyncReadExt;

use crate::cli::args::CopyArgs;
use crate::cli::cipher::CipherChoice;
use crate::cli::spec::{self, Location, Remote};
use crate::client::launch::deploy::{self, Lack, NoRemoteSoku, Platform};
use crate::client::launch::remote_soku::command_line;
use crate::client::launch::shell::shell_quote;
use crate::client::launch::{Forward, Launcher};
use crate::exit::{Exit, Told};

/// The origin's paths and the destination as typed, when every source is on one remote
/// host and the target on a remote host; `None` for any other copy.
pub fn between(paths: &[OsString]) -> anyhow::Result<Option<(Remote, Vec<String>, String)>> {
    let Some((target, sources)) = paths.split_last().filter(|(_, s)| !s.is_empty()) else {
        return Ok(None);
    };
    let Ok(Location::Remote(_)) = spec::parse(target) else { return Ok(None) };
    let mut origin: Option<Remote> = None;
    let mut paths = Vec::new();
    let mut locals = 0;
    for source in sources {
        match spec::parse(source).map_err(Exit::usage)? {
            Location::Local(_) => locals += 1,
            Location::Remote(remote) => {
                if origin.as_ref().is_some_and(|o| o.destination() != remote.destination()) {
                    return Err(Exit::usage(
                        "the sources are on more than one remote host: copy from each host \
                         in a command of its own",
                    )
                    .into());
                }
                paths.push(origin_path(&remote)?);
                origin = Some(remote);
            }
        }
    }
    let Some(origin) = origin else { return Ok(None) };
    if locals > 0 {
        return Err(Exit::usage(
            "some sources are local and some remote, and the target is remote: copy the \
             local ones in a command of their own",
        )
        .into());
    }
    let target = target.to_str().ok_or_else(|| {
        Exit::usage("the target of a copy between two remote hosts must be UTF-8 text")
    })?;
    Ok(Some((origin, paths, target.to_string())))
}

/// A source as a path on the origin, for its soku's command line: relative to the
/// home (where ssh starts the command), and never taken for `host:path` there.
fn origin_path(remote: &Remote) -> anyhow::Result<String> {
    let path = remote.path.to_str().ok_or_else(|| {
        Exit::usage(format!(
            "{}: a source of a copy between two remote hosts must be UTF-8 text",
            remote.path.glob_text()
        ))
    })?;
    let path = path.strip_prefix("~/").unwrap_or(path);
    Ok(match path {
        "" | "~" => ".".to_string(),
        p if p.starts_with('/') || p.starts_with("./") => p.to_string(),
        p => format!("./{p}"),
    })
}

/// Runs the copy between `origin` (holding `sources`) and `target`.
pub async fn run(
    args: &CopyArgs,
    origin: Remote,
    sources: Vec<String>,
    target: String,
) -> anyhow::Result<()> {
    if !args.origin_copies {
        return crate::client::through_here::run(args).await;
    }
    let launcher = Launcher::from_args(&args.ssh, args.verbose, args.quiet)?;
    let line =
        command_line(args.ssh.remote_soku.as_deref(), &origin_arguments(args, &sources, &target)?);
    let mut sent = false;
    loop {
        let mut cmd = launcher.remote_shell(&origin, line.clone(), false);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child =
            cmd.spawn().map_err(|e| Exit::connection(format!("cannot run ssh: {e}")))?;
        let forward = child.stderr.take().map(|pipe| Forward::start_for_origin(pipe, &origin.host));
        // The origin's soku prints nothing on stdout; its search for soku does, when it
        // finds none (`remote_soku.rs`). Bounded: a line is all it says.
        let mut said = Vec::new();
        if let Some(out) = child.stdout.take() {
            let _ = out.take(4096).read_to_end(&mut said).await;
        }
        let status = child.wait().await?;
        if let Some(forward) = forward {
            forward.drain().await;
        }
        let code = status.code();
        if code == Some(0) {
            return Ok(());
        }
        let platform = Platform::said_in(&String::from_utf8_lossy(&said));
        if code == Some(127) && platform.is_some() && args.ssh.remote_soku.is_none() {
            let message = format!(
                "{} has no `soku` on its PATH or in {}",
                origin.host,
                crate::client::launch::remote_soku::USER_PLACES
            );
            if sent || args.ssh.no_deploy {
                return Err(Exit::connection(message).into());
            }
            let missing = NoRemoteSoku { lack: Lack::Missing(platform), message };
            deploy::send(&launcher, &origin, &missing, &Said { quiet: args.quiet }).await?;
            sent = true;
            continue;
        }
        // The origin's soku said why in its own line, forwarded above; ssh too.
        let code = code.and_then(|c| u8::try_from(c).ok()).unwrap_or(crate::exit::FAILURE);
        let told = format!("the copy on {} ended with status {code}", origin.host);
        return Err(anyhow::Error::new(Told(told.clone())).context(Exit { code, message: told }));
    }
}

/// The origin's soku command line: the copy's own options that hold there, batch mode,
/// then the paths.
fn origin_arguments(args: &CopyArgs, sources: &[String], target: &str) -> anyhow::Result<String> {
    let mut words: Vec<String> = vec!["-B".into()];
    let mut flag = |on: bool, word: &str| {
        if on {
            words.push(word.into());
        }
    };
    flag(args.recursive, "-r");
    flag(args.preserve, "-p");
    flag(args.quiet, "-q");
    flag(args.compress, "-C");
    flag(args.background, "--background");
    flag(args.no_resume, "--no-resume");
    flag(args.no_fsync, "--no-fsync");
    flag(args.ssh.no_deploy, "--no-deploy");
    flag(args.no_share_login, "--no-share-login");
    for _ in 0..args.verbose {
        words.push("-v".into());
    }
    if let Some(limit) = args.limit_kbps {
        words.extend(["-l".into(), limit.to_string()]);
    }
    // The data's cipher; an ssh cipher was for this host's login to the origin.
    if let Some(name) = &args.cipher {
        if let Some(cipher) = CipherChoice::parse(name).map_err(Exit::usage)?.data {
            words.extend(["-c".into(), cipher.name().into()]);
        }
    }
    if let Some(mode) = args.transport {
        words.extend(["--transport".into(), mode.name().into()]);
    }
    if let Some(secs) = args.retry_for {
        words.extend(["--retry-for".into(), secs.to_string()]);
    }
    if let Some(size) = args.chunk_size {
        words.extend(["--chunk-size".into(), size.to_string()]);
    }
    if let Some(soku) = &args.ssh.remote_soku {
        words.extend(["--remote-soku".into(), soku.clone()]);
    }
    words.push("--".into());
    words.extend(sources.iter().cloned());
    words.push(target.to_string());
    Ok(words.iter().map(|w| shell_quote(w)).collect::<Vec<_>>().join(" "))
}

/// Says what was sent to the origin, as a copy says it.
struct Said {
    quiet: bool,
}

impl EventSink for Said {
    fn event(&self, event: TransferEvent) {
        if let (TransferEvent::Notice(line), false) = (event, self.quiet) {
            crate::ui::say(&format!("soku: {line}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn only_remote_sources_on_one_host_and_a_remote_target_are_between() {
        let (origin, paths, target) =
            between(&os(&["u@h1:data/a.txt", "u@h1:/abs", "u@h1:", "h2:in/"])).unwrap().unwrap();
        assert_eq!(origin.destination(), "u@h1");
        assert_eq!(paths, ["./data/a.txt", "/abs", "."]);
        assert_eq!(target, "h2:in/");
        // A name with a colon stays a path on the origin.
        let (_, paths, _) = between(&os(&["h1:a:b", "h2:"])).unwrap().unwrap();
        assert_eq!(paths, ["./a:b"]);
        assert!(between(&os(&["a", "h2:"])).unwrap().is_none());
        assert!(between(&os(&["h1:a", "dir"])).unwrap().is_none());
        assert!(between(&os(&["h1:a", "h3:b", "h2:"])).is_err());
        assert!(between(&os(&["h1:a", "local", "h2:"])).is_err());
    }
}
