//! `soku sync`: rsync's rules (`soku_proto::sync`) on soku's copy. This file turns the
//! command line into the rules and a copy's arguments; the copy itself is the copy
//! command's, whose session, retries and meter it shares.

use std::io::Read;

use soku_proto::name::Name;
use soku_proto::sync::SyncRules;

use crate::cli::args::SyncArgs;
use crate::cli::spec::{self, Location};
use crate::client::copy::{self, CopyReport};
use crate::exit::Exit;

/// Runs `soku sync [OPTIONS] SOURCE... TARGET`.
pub async fn run(args: SyncArgs) -> anyhow::Result<CopyReport> {
    let SyncArgs { mut copy, checksum, update, delete, dry_run, files_from } = args;
    if copy.no_resume {
        return Err(Exit::usage(
            "--no-resume: a sync always finds what the target holds (that is how it skips); \
             leave the option out",
        )
        .into());
    }
    if dry_run && checksum {
        return Err(Exit::usage(
            "--dry-run with --checksum: a dry run decides by size and time only, and reads \
             no file; run it without --checksum",
        )
        .into());
    }
    if delete && files_from.is_some() {
        return Err(Exit::usage(
            "--delete with --files-from: a list names only part of the tree, and the rest \
             would be deleted; sync the whole tree to delete",
        )
        .into());
    }
    let listed = match &files_from {
        Some(file) => read_list(file)?,
        None => Vec::new(),
    };
    let sources = match copy.paths.split_last() {
        Some((_, sources)) if !sources.is_empty() => sources,
        _ => {
            return Err(Exit::usage(
                "name at least one source and a target (soku sync SOURCE... TARGET)",
            )
            .into())
        }
    };
    if files_from.is_some() && sources.len() != 1 {
        return Err(Exit::usage(
            "--files-from takes one source directory, the list's paths being below it",
        )
        .into());
    }
    // A source's trailing slash sends what it holds into the target itself, which is
    // then one of the directories a delete cleans.
    let contents = sources.iter().any(|source| {
        let path = match spec::parse(source) {
            Ok(Location::Remote(remote)) => remote.path.as_bytes().to_vec(),
            _ => source.as_encoded_bytes().to_vec(),
        };
        path.ends_with(b"/") || (cfg!(windows) && path.ends_with(b"\\"))
    });
    let rules = SyncRules {
        checksum,
        update,
        delete,
        dry_run,
        contents,
        filter: std::mem::take(&mut copy.filter),
        files_from: listed,
        recursive_listed: copy.recursive,
    };
    soku_engine::filter::Filter::new(&rules.filter)
        .map_err(|e| Exit::usage(format!("--exclude/--include: {e}")))?;
    copy.recursive = true;
    copy.preserve = true;
    copy.sync = Some(rules);
    copy::run(copy).await
}

/// The paths a `--files-from` file lists (`-`: stdin), one per line, as bytes: blank
/// lines skipped, a carriage return before the newline dropped.
fn read_list(file: &std::path::Path) -> anyhow::Result<Vec<Name>> {
    let mut bytes = Vec::new();
    let read = if file.as_os_str() == "-" {
        std::io::stdin().read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file).and_then(|mut f| f.read_to_end(&mut bytes))
    };
    read.map_err(|e| {
        Exit::usage(format!(
            "--files-from {}: cannot read it: {e}",
            crate::ui::visible(&file.to_string_lossy())
        ))
    })?;
    Ok(bytes
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| !line.is_empty())
        .map(|line| Name::from_bytes(line.to_vec()))
        .collect())
}
