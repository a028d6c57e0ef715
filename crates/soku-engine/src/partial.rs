//! Resume on the receiving side: the partial file of an interrupted copy, and what a
//! receiver finds it already holds of a file before receiving it.
//!
//! A partial file is the temporary file (`.NAME.soku-part`, see [`crate::fsops`]) with a
//! trailer after the file's bytes: the source's size and modification time when the copy
//! began. The trailer is written when the file is created, before any chunk, and cut off
//! just before the rename, so a final name never holds it. Nothing else is recorded:
//! which chunks are held is found by hashing what is on disk, so a chunk torn by a
//! crash, or lost with the page cache in a power cut, is simply sent again.
//!
//! What is held, in order of preference:
//! - a partial file of the same source (same size and modification time): its chunks;
//! - a regular file of the same size at the final name: its chunks (the copy ran before,
//!   or the file changed in a few places); it stays in place until a chunk has to be
//!   written, and is then copied to the partial file first;
//! - else nothing (a partial of another source is discarded, and the sender told why).
//!
//! A receiver holds an exclusive lock (`flock`) on the partial file it writes, so a
//! second copy to the same target (the reconnect of a copy whose first server has not
//! yet noticed the lost connection) waits for the first to let go instead of writing
//! beside it.
//!
//! A directory made as the target itself is marked while its copy is unfinished, so
//! that the same command resumes in it ([`made_dir`]).
//!
//! Regions the file system reports as holes (`SEEK_DATA`) are not read. In a partial
//! file a hole is a chunk not yet received, so it is not claimed; in a complete file it
//! is a run of zeros, and hashes as one.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use soku_proto::chunk::{chunk_hash, ChunkPlan};
use soku_proto::message::{HeldBase, HeldChunk};
use soku_proto::name::shown;
use soku_proto::path::{Target, WirePath};

use crate::fsops::{Found, TargetDir};
use crate::read_at::read_exact_at;
use crate::sys::{Locked, OsProblem};
use crate::temp_name::{own_temp_path, temp_path};
pub use trailer::{Trailer, TRAILER_LEN};

/// Where a file's chunks go while it is received.
#[derive(Debug)]
pub enum Storage {
    /// The temporary file, open for writing.
    Temp(File),
    /// Nothing yet: the held chunks are in the file at the final name, which is copied
    /// to the temporary file before the first chunk is written.
    FinalFile,
}

/// What a receiver holds of a file, ready to receive the rest.
#[derive(Debug)]
pub struct Prepared {
    /// What was found, for the sender.
    pub base: HeldBase,
    /// The held chunks and the hashes of their bytes, ascending.
    pub held: Vec<HeldChunk>,
    /// Where chunks are written.
    pub storage: Storage,
}

/// What a receiver expects to find of a file before it looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Anything: a partial file of an earlier run, a file at the final name, nothing.
    Anything,
    /// Nothing: the copy's preview found none of its top-level names in the target
    /// ([`holds_nothing`]), so every name below them is new unless something made it
    /// since. The temporary file is created straight away, and the usual looks are
    /// taken only if its name is taken.
    Nothing,
}

/// Finds what is held of the file at `local` (with resume) and prepares its storage.
/// `plan` cuts the file as the sender does.
pub fn prepare(
    dir: &TargetDir,
    local: &Path,
    trailer: Trailer,
    plan: ChunkPlan,
    mode: u32,
) -> std::io::Result<Prepared> {
    prepare_within(dir, local, trailer, plan, mode, LOCK_WAIT, Expect::Anything)
}

/// [`prepare`], waiting at most `lock_wait` for another receiver to let go of the
/// partial file. With no wait at all, a partial file locked elsewhere fails with
/// [`LockBusy`], its content untouched, for the caller to try again where it may wait.
pub fn prepare_within(
    dir: &TargetDir,
    local: &Path,
    trailer: Trailer,
    plan: ChunkPlan,
    mode: u32,
    lock_wait: Duration,
    expect: Expect,
) -> std::io::Result<Prepared> {
    let temp = temp_path(local);
    // One resolution of its directory for every look below.
    let entry = dir.entry(local)?;
    if expect == Expect::Nothing {
        if let Some(file) = entry.create_new_temp(trailer.size, mode, Some(&trailer))? {
            lock_exclusive(&file, &temp, lock_wait)?;
            return Ok(Prepared {
                base: HeldBase::Nothing,
                held: Vec::new(),
                storage: Storage::Temp(file),
            });
        }
    }
    let mut restarted = None;
    if let Some(file) = entry.open_temp()? {
        lock_exclusive(&file, &temp, lock_wait)?;
        match Trailer::read_from(&file)? {
            Some(found) => match found.differs_from(&trailer) {
                None => {
                    let held = hash_held(&file, plan, false)?;
                    return Ok(Prepared {
                        base: HeldBase::Partial,
                        held,
                        storage: Storage::Temp(file),
                    });
                }
                Some(reason) => restarted = Some(reason),
            },
            None => {
                restarted = Some("the partial file of the interrupted copy was unreadable".into())
            }
        }
    }
    match entry.look_final()? {
        // Refused before any byte is sent for it.
        Found::Directory => return Err(crate::sys::error_of(OsProblem::IsADirectory)),
        Found::File(file) if restarted.is_none() && file.metadata()?.len() == trailer.size => {
            let held = hash_held(&file, plan, true)?;
            return Ok(Prepared { base: HeldBase::Complete, held, storage: Storage::FinalFile });
        }
        _ => {}
    }
    let file = entry.replace_temp(trailer.size, mode, Some(&trailer))?;
    // Taken by another receiver only if it made the same partial file meanwhile: a
    // caller that could not wait finds it next time, and waits for it.
    lock_exclusive(&file, &temp, lock_wait)?;
    let base = match restarted {
        Some(reason) => HeldBase::Restarted { reason },
        None => HeldBase::Nothing,
    };
    Ok(Prepared { base, held: Vec::new(), storage: Storage::Temp(file) })
}

/// Makes a new partial file for `local` when nothing held is wanted (no resume). As
/// [`prepare_within`] does, a partial file another receiver is still writing is waited
/// for (up to `lock_wait`, [`LockBusy`] at once if zero) rather than removed under it,
/// and the new one is locked in turn: two copies into one target never rename each
/// other's unfinished file into place.
pub fn prepare_fresh(
    dir: &TargetDir,
    local: &Path,
    size: u64,
    mode: u32,
    lock_wait: Duration,
) -> std::io::Result<File> {
    let temp = temp_path(local);
    let entry = dir.entry(local)?;
    if entry.final_is_directory()? {
        return Err(crate::sys::error_of(OsProblem::IsADirectory));
    }
    let file = match entry.create_new_temp(size, mode, None)? {
        Some(file) => file,
        None => {
            if let Some(other) = entry.open_temp()? {
                // Held until it is renamed into place or removed; ours replaces what
                // is left.
                lock_exclusive(&other, &temp, lock_wait)?;
            }
            entry.replace_temp(size, mode, None)?
        }
    };
    lock_exclusive(&file, &temp, lock_wait)?;
    Ok(file)
}

/// Whether a receiver into `target` holds nothing under any of these top-level names:
/// no file, directory or partial file is at any of their final names, so [`prepare`]
/// would find nothing for any file that comes under them. What cannot be checked counts
/// as held. This answers a copy's preview (`soku_proto::hello::ReceivePreview`): when
/// it holds, the copy runs without held reports.
pub fn holds_nothing(target: &Target, names: &[String]) -> bool {
    let absent = |path: &Path| {
        std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    };
    names.iter().all(|name| match target.local_path(&WirePath(vec![name.as_str().into()])) {
        Ok(local) => absent(&local) && absent(&temp_path(&local)) && absent(&own_temp_path(&local)),
        Err(_) => false,
    })
}

/// Copies the file at the final name `local` (held chunks, [`Storage::FinalFile`]) to a
/// new partial file, and returns it open for writing.
pub fn copy_final_to_temp(
    dir: &TargetDir,
    local: &Path,
    trailer: Trailer,
    mode: u32,
) -> std::io::Result<File> {
    let changed =
        || std::io::Error::other(format!("{} changed while it was being updated", shown(&local)));
    let entry = dir.entry(local)?;
    let Some(mut from) = entry.open_final()? else { return Err(changed()) };
    let mut temp = entry.create_temp(trailer.size, mode, None)?;
    lock_exclusive(&temp, &temp_path(local), LOCK_WAIT)?;
    // std's copy uses copy_file_range on Linux: no bytes through user space, and a
    // reflink where the file system offers one.
    let copied = std::io::copy(&mut (&mut from).take(trailer.size), &mut temp)?;
    if copied != trailer.size {
        return Err(changed());
    }
    trailer.write_to(&temp)?;
    Ok(temp)
}

/// How long a receiver waits for another one to let go of a partial file.
pub const LOCK_WAIT: Duration = Duration::from_secs(30);

/// A partial file is locked by another receiver, and the caller asked not to wait.
#[derive(Debug, thiserror::Error)]
#[error("another receiver holds the partial file")]
pub struct LockBusy;

impl LockBusy {
    /// Whether `err` is this.
    pub fn is(err: &std::io::Error) -> bool {
        err.get_ref().is_some_and(|inner| inner.is::<LockBusy>())
    }
}

/// Takes the exclusive lock on the partial file `file` at `path`, waiting up to `wait`
/// for another receiver to end ([`LockBusy`] at once if `wait` is zero). A file system
/// without `flock` (some network file systems) is used unlocked.
fn lock_exclusive(file: &File, path: &Path, wait: Duration) -> std::io::Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        match crate::sys::try_lock(file)? {
            Locked::Taken | Locked::Unsupported => return Ok(()),
            Locked::Busy if wait.is_zero() => return Err(std::io::Error::other(LockBusy)),
            Locked::Busy if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Locked::Busy => {
                return Err(std::io::Error::other(format!(
                    "another soku is still writing {}: wait for it to end, or stop it",
                    shown(&path)
                )))
            }
        }
    }
}

/// Hashes every chunk of `file` that holds data; chunks wholly in a hole are skipped, or
/// with `holes_are_zeros` hash as zeros without being read.
///
/// In a partial file (no `holes_are_zeros`) the trailer's block holds data from the
/// first run on, and with it whatever part of the last chunk shares that block: a last
/// chunk never received looked written, its zeros were claimed, and the sender sent it
/// again with a warning that the interrupted copy differed from the source, for every
/// file cut short. So only the part of a chunk before the trailer's block tells whether
/// it was written; a chunk wholly in that block (a small file's only one) is not
/// claimed at all, and costs at most a block sent again.
fn hash_held(
    file: &File,
    plan: ChunkPlan,
    holes_are_zeros: bool,
) -> std::io::Result<Vec<HeldChunk>> {
    let mut held = Vec::new();
    let mut buf = Vec::new();
    let mut zero_hash: Option<(u32, [u8; 32])> = None;
    let trailer_block = if holes_are_zeros {
        u64::MAX
    } else {
        let md = file.metadata()?;
        let block = crate::sys::block_size(&md).max(512);
        (md.len().saturating_sub(TRAILER_LEN) / block) * block
    };
    let mut index = 0u32;
    while let Some((offset, len)) = plan.span(index) {
        let end = offset + u64::from(len);
        let before_trailer =
            u32::try_from(end.min(trailer_block).saturating_sub(offset)).unwrap_or(len).min(len);
        if before_trailer == 0 {
            index += 1;
            continue;
        }
        let hole = crate::sys::is_hole(file, offset, before_trailer)?;
        let hash = if hole == Some(true) {
            if !holes_are_zeros {
                index += 1;
                continue;
            }
            match zero_hash {
                Some((zlen, hash)) if zlen == len => hash,
                _ => {
                    let hash = chunk_hash(&vec![0u8; len as usize]);
                    zero_hash = Some((len, hash));
                    hash
                }
            }
        } else {
            read_exact_at(file, len as usize, offset, &mut buf)?;
            // Where the file system cannot tell holes (Windows, or a Unix one without
            // SEEK_DATA), a partial file's chunk that reads as zeros is taken for one
            // never received: claimed, it would be sent again with a warning that the
            // interrupted copy differed from the source. A chunk that was zeros costs
            // one chunk sent again, which compression makes small.
            if hole.is_none() && !holes_are_zeros && buf.iter().all(|&b| b == 0) {
                index += 1;
                continue;
            }
            chunk_hash(&buf)
        };
        held.push(HeldChunk { index, hash });
        index += 1;
    }
    Ok(held)
}

pub mod made_dir;
#[cfg(test)]
mod tests;
pub(crate) mod trailer;
