//! `soku sync`: the rules a synchronisation adds to a copy, as rsync has them, carried
//! to the server in [`crate::message::Job::Sync`].
//!
//! The receiver decides, per file, whether the one at its final name is already what
//! the sender has (rsync's "quick check": the same size and modification time, neither
//! file read), or newer there (`--update`); such a file is skipped
//! ([`crate::message::Message::Skipped`]) and neither side reads it. Every other file
//! is copied as any file is, resumed and verified by BLAKE3. With `--checksum` the
//! quick check is not trusted: a file of the same size is compared chunk by chunk by
//! hash, as a resumed copy compares what it holds.
//!
//! With `--delete` the receiver, once every file is in place and none failed, removes
//! what the transferred directories hold that the source does not (and that no
//! exclude rule protects), and tells the sender each path
//! ([`crate::message::Message::Deleted`]). A dry run decides and lists the same, and
//! writes, removes and sends nothing.

use serde::{Deserialize, Serialize};

/// The protocol version from which a server takes [`crate::message::Job::Sync`]: an
/// older one would refuse the request as undecodable.
pub const SYNC_SINCE_VERSION: u16 = 10;

/// What a synchronisation asks of both sides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncRules {
    /// Compare files of the same size by hash instead of trusting size and time.
    pub checksum: bool,
    /// Skip files whose copy at the target is newer than the source (`-u`).
    pub update: bool,
    /// Remove what the target's transferred directories hold beyond the source.
    pub delete: bool,
    /// Decide and report, and change nothing at the target.
    pub dry_run: bool,
    /// A source directory's contents go into the target itself (a source written with
    /// a trailing slash, as rsync reads it): the target directory is then one of the
    /// transferred directories that `delete` cleans.
    pub contents: bool,
    /// Include and exclude rules, in order: the first that matches a path decides.
    pub filter: Vec<FilterRule>,
    /// With `--files-from`: the paths to send, relative to the one source directory
    /// (empty: walk the sources).
    pub files_from: Vec<crate::name::Name>,
    /// With `files_from`: descend into the directories listed (`-r`); otherwise they are
    /// made at the target but not walked, as rsync's `--files-from` does.
    pub recursive_listed: bool,
}

/// One include or exclude rule: a gitignore-style pattern (see the engine's filter).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FilterRule {
    /// Paths that match are sent (and, at the target, may be deleted).
    Include(String),
    /// Paths that match are not sent, and are never deleted at the target.
    Exclude(String),
}

/// Why the receiver skipped a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SkipReason {
    /// Same size and modification time at the target (rsync's quick check).
    Unchanged,
    /// The target's copy is newer than the source (`--update`).
    NewerAtTarget,
    /// A dry run: this file would be sent.
    WouldSend,
}

impl SkipReason {
    /// How the reason reads in a list for the user.
    pub fn said(self) -> &'static str {
        match self {
            SkipReason::Unchanged => "unchanged",
            SkipReason::NewerAtTarget => "newer at the target",
            SkipReason::WouldSend => "would send",
        }
    }
}

/// The quick check's decision for a file of the source's `size` and `mtime` (seconds,
/// nanoseconds) against what the target holds under its name (`None`: no regular file
/// there). `None` means: send it.
///
/// Nanoseconds count only when both sides have them: a file system that keeps whole
/// seconds (or a copy made by a tool that set only those) would otherwise make every
/// file look changed.
pub fn decide(
    rules: &SyncRules,
    size: u64,
    mtime: (i64, u32),
    target: Option<(u64, (i64, u32))>,
) -> Option<SkipReason> {
    let send = || rules.dry_run.then_some(SkipReason::WouldSend);
    let Some((held_size, held_mtime)) = target else { return send() };
    if rules.update && newer(held_mtime, mtime) {
        return Some(SkipReason::NewerAtTarget);
    }
    if !rules.checksum && held_size == size && same_time(held_mtime, mtime) {
        return Some(SkipReason::Unchanged);
    }
    send()
}

fn same_time(a: (i64, u32), b: (i64, u32)) -> bool {
    a.0 == b.0 && (a.1 == 0 || b.1 == 0 || a.1 == b.1)
}

fn newer(a: (i64, u32), b: (i64, u32)) -> bool {
    !same_time(a, b) && a > b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quick_check_skips_only_the_same_size_and_time() {
        let rules = SyncRules::default();
        let t = (1_700_000_000, 5);
        assert_eq!(decide(&rules, 10, t, Some((10, t))), Some(SkipReason::Unchanged));
        assert_eq!(decide(&rules, 10, t, Some((11, t))), None, "size differs");
        assert_eq!(decide(&rules, 10, t, Some((10, (t.0 + 1, 5)))), None, "time differs");
        assert_eq!(decide(&rules, 10, t, Some((10, (t.0, 6)))), None, "nanoseconds differ");
        assert_eq!(
            decide(&rules, 10, t, Some((10, (t.0, 0)))),
            Some(SkipReason::Unchanged),
            "whole seconds at the target"
        );
        assert_eq!(decide(&rules, 10, t, None), None, "nothing there");
    }

    #[test]
    fn checksum_update_and_dry_run_change_the_decision() {
        let t = (1_700_000_000, 0);
        let later = (t.0 + 60, 0);
        let checksum = SyncRules { checksum: true, ..SyncRules::default() };
        assert_eq!(decide(&checksum, 10, t, Some((10, t))), None, "hashed, not trusted");
        let update = SyncRules { update: true, ..SyncRules::default() };
        assert_eq!(decide(&update, 10, t, Some((99, later))), Some(SkipReason::NewerAtTarget));
        assert_eq!(decide(&update, 10, later, Some((99, t))), None, "older at the target");
        let dry = SyncRules { dry_run: true, ..SyncRules::default() };
        assert_eq!(decide(&dry, 10, t, None), Some(SkipReason::WouldSend));
        assert_eq!(decide(&dry, 10, t, Some((10, t))), Some(SkipReason::Unchanged));
        assert_eq!(decide(&dry, 10, t, Some((9, t))), Some(SkipReason::WouldSend));
    }
}
