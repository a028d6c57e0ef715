//! `get` and `put`: each is a soku copy (`crate::client::copy`), made through the
//! session's login with the session's options, so that it runs as any copy runs: QUIC
//! or TCP as chosen, verified, resumed when run again, the progress line and summary;
//! Ctrl-C ends the copy (`crate::client::interrupt`) and the session reads the next
//! command.
//!
//! The paths a copy is given are absolute on both sides: a remote one is the session's
//! directory joined to what was typed (the server expands its globs, as scp's remote
//! shell does), a local one the local directory's (globs expanded here), so that no
//! local name with a colon is taken for a host.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use soku_proto::name::Name;

use super::command::Transfer;
use super::dirs::RemoteDirs;
use super::local::local_path;
use super::outcome::Failed;
use crate::cli::args::CopyArgs;
use crate::client::copy;
use crate::exit::one_line;
use crate::ui::visible;

/// What every transfer of a session is made with.
pub struct Copier<'a> {
    /// The runtime the copies run on.
    pub rt: &'a tokio::runtime::Handle,
    /// The session's copy options.
    pub copy: &'a CopyArgs,
    /// `[user@]host` as a copy's remote path starts.
    pub destination: &'a str,
}

/// Downloads `get.sources` into `get.target` (the local directory if none).
pub fn get(copier: &Copier<'_>, dirs: &RemoteDirs, get: Transfer) -> Result<(), Failed> {
    let mut paths: Vec<OsString> = get
        .sources
        .iter()
        .map(|typed| remote_arg(copier.destination, &dirs.resolve(typed)))
        .collect();
    let target = local_path(get.target.as_deref().unwrap_or("."));
    paths.push(target.into_os_string());
    run(copier, &get, paths)
}

/// Uploads `put.sources` (globs expanded here) into `put.target` (the remote
/// directory if none).
pub fn put(copier: &Copier<'_>, dirs: &RemoteDirs, put: Transfer) -> Result<(), Failed> {
    let mut paths = Vec::new();
    for typed in &put.sources {
        paths.extend(local_matches(typed)?);
    }
    let target = dirs.resolve(put.target.as_deref().unwrap_or(""));
    paths.push(remote_arg(copier.destination, &target));
    run(copier, &put, paths)
}

/// Runs the copy of `paths` with the session's options and the command's flags.
fn run(copier: &Copier<'_>, transfer: &Transfer, paths: Vec<OsString>) -> Result<(), Failed> {
    let mut args = copier.copy.clone();
    args.paths = paths;
    args.recursive |= transfer.recursive;
    args.preserve |= transfer.preserve;
    match copier.rt.block_on(copy::run(args)) {
        Ok(_) => Ok(()),
        Err(err) => Err(Failed::Command(format!("soku: {}", one_line(&err)))),
    }
}

/// `[user@]host:path`, as a copy names a remote path.
fn remote_arg(destination: &str, path: &Name) -> OsString {
    let mut arg = destination.as_bytes().to_vec();
    arg.push(b':');
    arg.extend_from_slice(path.as_bytes());
    OsString::from_vec(arg)
}

/// The local paths `typed` names: its glob's matches, sorted, or itself.
fn local_matches(typed: &str) -> Result<Vec<OsString>, Failed> {
    let path = local_path(typed);
    let has_glob = typed.contains(['*', '?', '[']);
    if !has_glob {
        return Ok(vec![path.into_os_string()]);
    }
    let pattern = path.to_string_lossy().into_owned();
    let options = glob::MatchOptions { require_literal_leading_dot: true, ..Default::default() };
    let mut found: Vec<OsString> = glob::glob_with(&pattern, options)
        .map_err(|e| Failed::Command(format!("{}: {e}", visible(typed))))?
        .filter_map(Result::ok)
        .map(|p| p.into_os_string())
        .collect();
    if found.is_empty() {
        return Err(Failed::Command(format!("{}: no match", visible(typed))));
    }
    found.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    Ok(found)
}
