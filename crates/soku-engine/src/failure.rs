//! File-system failures in words a person can act on: which path, what went wrong, and
//! what to do, on one line. The receiver's lines travel to the sender (and so to the user
//! on either side) as they are; the side is added where they are shown.
//!
//! Some failures end the whole copy rather than one file ([`Failure::ends_copy`]): a full
//! disk, a quota or a read-only file system would fail every file after this one too, so
//! the copy stops at once and keeps what it holds for a resume.
//!
//! The sender's side is here too ([`describe_source`]): a source that cannot be read,
//! or that changed while it was read, is that file's failure, and the line says so.

use soku_proto::name::shown;
use std::io::ErrorKind;
use std::path::Path;

use crate::sys::OsProblem;
use crate::temp_name::{own_temp_path, temp_path};

/// What the receiver was doing when the file system refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Creating or opening the temporary file beside the target.
    Create,
    /// Writing received bytes.
    Write,
    /// Renaming the verified file into place (or setting its metadata).
    Finish,
    /// Creating a directory of the tree.
    MakeDir,
}

/// A file-system failure, described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// One line: the path, the problem, what to do.
    pub message: String,
    /// The same without the path (for a line that names the path already).
    pub problem: String,
    /// The failure will recur for every other file: stop the copy.
    pub ends_copy: bool,
    /// The file system is out of space or quota (it also ends the copy).
    pub no_space: bool,
}

impl Failure {
    /// The error that ends the copy for this failure: [`EngineError::NoSpace`] for a
    /// full file system, whose receiver sums up what it holds, else
    /// [`EngineError::Target`].
    pub fn into_error(self) -> crate::EngineError {
        if self.no_space {
            crate::EngineError::NoSpace(self.message)
        } else {
            crate::EngineError::Target(self.message)
        }
    }
}

/// A source file that got shorter while it was being read: what was sent no longer
/// matches it, so the file fails rather than arriving torn (see [`describe_source`]).
#[derive(Debug, thiserror::Error)]
#[error("the file shrank while it was being read")]
pub struct SourceShrank;

impl SourceShrank {
    /// As the I/O error a read returns.
    pub fn io() -> std::io::Error {
        std::io::Error::new(ErrorKind::UnexpectedEof, SourceShrank)
    }
}

/// A verified file's partial file whose name was gone when it was to be renamed into
/// place: something removed it during the copy (another copy into the same target,
/// a clean-up). Its directory was there (the rename was asked of it), so it is not
/// the missing directory an `ENOENT` otherwise means.
#[derive(Debug, thiserror::Error)]
#[error("the partial file was removed during the copy")]
pub struct PartialGone;

impl PartialGone {
    /// As the I/O error the rename returns.
    pub fn io() -> std::io::Error {
        std::io::Error::new(ErrorKind::NotFound, PartialGone)
    }
}

/// Something soku did not make is at a file's temporary name (another user's file, in a
/// directory whose sticky bit keeps it there), so the file cannot be received there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("another user's file is at its temporary name")]
pub struct PlantedPartial;

impl PlantedPartial {
    /// As an I/O error.
    pub fn io() -> std::io::Error {
        std::io::Error::other(PlantedPartial)
    }
}

/// Bytes the receiver held from an earlier copy, and told the sender it holds, read
/// differently when checked again just before the file takes its final name: another
/// program wrote to the target or its partial file during the copy. The file's root hash
/// was built from what was held, so renaming it would call a different file verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bytes kept from an earlier copy changed during this copy")]
pub struct HeldChanged;

impl HeldChanged {
    /// As an I/O error.
    pub fn io() -> std::io::Error {
        std::io::Error::other(HeldChanged)
    }
}

/// A path that leads outside the directory a confined server serves (`soku serve
/// --root`): `..` past it, or a symlink out of it ([`crate::fsops::TargetDir::open_beneath`]).
#[derive(Debug, thiserror::Error)]
#[error("it leads outside the directory this server serves: name a path inside it")]
pub struct Outside;

impl Outside {
    /// As the I/O error an open returns.
    pub fn io() -> std::io::Error {
        std::io::Error::new(ErrorKind::PermissionDenied, Outside)
    }
}

/// A source file that changed while its chunks were read, without shrinking (a log
/// appended to, a file rewritten in place): the chunks sent are a mix of before and
/// after, a file that never existed, so it fails rather than taking its final name.
/// Found by comparing the open file's status when its last chunk has been read with its
/// status when it was opened ([`SourceStamp::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SourceChanged {
    /// It got longer.
    #[error("the file grew while it was being read")]
    Grew,
    /// Same size or longer, but written to: a new modification or change time.
    #[error("the file was written to while it was being read")]
    Rewritten,
}

impl SourceChanged {
    /// As the I/O error a read returns.
    pub fn io(self) -> std::io::Error {
        std::io::Error::other(self)
    }
}

/// What a source file's status said when the sender opened it: what
/// [`SourceStamp::check`] compares once its last chunk has been read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceStamp {
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    nlink: u64,
}

impl SourceStamp {
    /// The stamp of the file `md` describes.
    pub fn of(md: &std::fs::Metadata) -> SourceStamp {
        SourceStamp {
            size: md.len(),
            mtime: crate::sys::modified(md),
            ctime: crate::sys::changed(md),
            nlink: crate::sys::links(md),
        }
    }

    /// Whether the file stamped `self` when it was opened is still as it was (`now` is
    /// its status after its last chunk was read): an error if it shrank
    /// ([`SourceShrank`]: its tail went while earlier chunks were read), grew, or was
    /// written to ([`SourceChanged`]).
    ///
    /// The change time is compared too because it is the one time no program can set
    /// back: a file rewritten at the same size with its modification time restored
    /// (`touch -r`, a tool that preserves times) moves only it. But removing the file or
    /// renaming another over it moves it as well, and those leave the open file's bytes
    /// as they were (the sender reads on through its descriptor, docs/durability.md), so
    /// a change time moved along with the link count is not taken for a write. A chmod
    /// or a rename of the file itself moves it too and cannot be told from such a write:
    /// that file fails, and the same command copies it.
    pub fn check(&self, now: &std::fs::Metadata) -> std::io::Result<()> {
        let now = SourceStamp::of(now);
        if now.size < self.size {
            return Err(SourceShrank::io());
        }
        if now.size > self.size {
            return Err(SourceChanged::Grew.io());
        }
        let rewritten =
            now.mtime != self.mtime || (now.ctime != self.ctime && now.nlink == self.nlink);
        if rewritten {
            return Err(SourceChanged::Rewritten.io());
        }
        Ok(())
    }

    /// [`SourceStamp::check`] on the open `file`, looked at again after a pause when it
    /// seems written to at its old size. Linux moves a file's times before its size on a
    /// write (`file_modified` runs before the bytes are copied in, and `fstat` does not
    /// wait for the write's inode lock), so a status taken in the middle of an append
    /// shows a new time and the old size: a log appended to would be named as rewritten.
    /// Once that write is over its size tells the truth. The pauses (50 ms at most) are
    /// paid by a file that fails anyway; where a small file's chunk is read in place they
    /// hold one runtime thread that long, once per such file.
    pub fn check_file(&self, file: &std::fs::File) -> std::io::Result<()> {
        let mut result = self.check(&file.metadata()?);
        for _ in 0..WRITE_SETTLES_LOOKS {
            if !is_rewritten(&result) {
                break;
            }
            std::thread::sleep(WRITE_SETTLES);
            result = match self.check(&file.metadata()?) {
                Ok(()) => result,
                again => again,
            };
        }
        result
    }
}

/// Whether `result` says the file was written to at its old size.
fn is_rewritten(result: &std::io::Result<()>) -> bool {
    let inner = result.as_ref().err().and_then(|err| err.get_ref());
    inner.is_some_and(|inner| inner.downcast_ref() == Some(&SourceChanged::Rewritten))
}

/// How long a write caught halfway is given to finish, and how many times: a line
/// appended takes microseconds, and this leaves room for its writer to lose the CPU a
/// few times on a busy machine. A file really rewritten waits it out once, then fails.
const WRITE_SETTLES: std::time::Duration = std::time::Duration::from_millis(10);
const WRITE_SETTLES_LOOKS: u32 = 5;

/// Describes `err`, met while reading the source file `path` (opening it, walking to it,
/// reading its chunks). The file fails and the copy goes on, unless every file after it
/// would fail the same way (too many open files: [`Failure::ends_copy`]).
pub fn describe_source(path: &Path, err: &std::io::Error) -> Failure {
    let inner = err.get_ref();
    let shrank = inner.is_some_and(|inner| inner.is::<SourceShrank>());
    let changed = inner.and_then(|inner| inner.downcast_ref::<SourceChanged>()).copied();
    let outside = inner.is_some_and(|inner| inner.is::<Outside>());
    // The same words for every change, so that one pattern matches them all.
    let again = "run the same command again once nothing writes to it";
    let (problem, ends_copy) = match (crate::sys::problem(err), err.kind()) {
        _ if shrank => {
            (format!("it changed during the copy (it shrank while it was read): {again}"), false)
        }
        _ if outside => (Outside.to_string(), false),
        _ if changed == Some(SourceChanged::Grew) => {
            (format!("it changed during the copy (it grew while it was read): {again}"), false)
        }
        _ if changed == Some(SourceChanged::Rewritten) => (
            format!("it changed during the copy (it was written to while it was read): {again}"),
            false,
        ),
        (Some(OsProblem::TooManyOpenFiles), _) => (
            "cannot open: too many open files: raise the limit (ulimit -n), then run the same \
             command again to resume"
                .into(),
            true,
        ),
        // scp's words, which scripts match; the name is what to check.
        (_, ErrorKind::NotFound) => ("No such file or directory".into(), false),
        (_, ErrorKind::PermissionDenied) => (
            "cannot read: permission denied: make it readable by this user, or leave it out".into(),
            false,
        ),
        _ => (format!("cannot read: {}", describe_io(err)), false),
    };
    Failure { message: format!("{}: {problem}", shown(&path)), problem, ends_copy, no_space: false }
}

/// Describes `err`, met while doing `action` at `path`.
pub fn describe(path: &Path, action: Action, err: &std::io::Error) -> Failure {
    let shown = shown(&path);
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let resume = "then run the same command again to resume";
    let gone = err.get_ref().is_some_and(|inner| inner.is::<PartialGone>());
    let outside = err.get_ref().is_some_and(|inner| inner.is::<Outside>());
    let held_changed = err.get_ref().is_some_and(|inner| inner.is::<HeldChanged>());
    let planted = err.get_ref().is_some_and(|inner| inner.is::<PlantedPartial>());
    let (problem, ends_copy) = match (crate::sys::problem(err), err.kind()) {
        _ if outside => (Outside.to_string(), false),
        _ if planted => (
            format!(
                "files soku did not make are at both its temporary names, {} and {}, and \
                 cannot be removed (another user's, in a sticky directory): ask their owner \
                 to remove them, or choose another target",
                soku_proto::name::shown(&temp_path(path)),
                soku_proto::name::shown(&own_temp_path(path))
            ),
            false,
        ),
        _ if held_changed => (
            "another program wrote to it during the copy, so what arrived could not be \
             checked: it did not take its final name; run the same command again once \
             nothing else writes there"
                .into(),
            false,
        ),
        _ if gone => (
            "its partial file was removed during the copy (by another copy into the same \
             target?): run the same command again once nothing else writes there"
                .into(),
            false,
        ),
        (Some(OsProblem::NoSpace), _) => {
            (format!("no space left on the device: free some space, {resume}"), true)
        }
        (Some(OsProblem::QuotaExceeded), _) => {
            (format!("disk quota exceeded: free some space or raise the quota, {resume}"), true)
        }
        (Some(OsProblem::ReadOnly), _) => {
            ("read-only file system: choose a target on a writable file system".into(), true)
        }
        (Some(OsProblem::TooManyOpenFiles), _) => {
            (format!("too many open files: raise the limit (ulimit -n), {resume}"), true)
        }
        (Some(OsProblem::NotADirectory), _) => (
            "a part of this path is a file, not a directory: remove or rename it, or choose \
             another target"
                .into(),
            false,
        ),
        (Some(OsProblem::SymlinkInTheWay), _) => (
            "a symbolic link is in the way: soku writes only through directories it can \
             trust; remove the link or choose another target"
                .into(),
            false,
        ),
        (Some(OsProblem::IsADirectory), _) => (
            "a directory is in the way: remove or rename it, or choose another target".into(),
            false,
        ),
        (_, ErrorKind::NotFound) if action != Action::Write => (
            format!(
                "the directory {} does not exist: create it first, or name an existing one",
                soku_proto::name::shown(&parent)
            ),
            false,
        ),
        (_, ErrorKind::PermissionDenied) => (
            format!(
                "permission denied: check that {} is writable by this user",
                soku_proto::name::shown(&parent)
            ),
            false,
        ),
        _ => (describe_io(err), false),
    };
    let verb = match action {
        Action::Create => "cannot create",
        Action::Write => "cannot write",
        Action::Finish => "cannot put in place",
        Action::MakeDir => "cannot create the directory",
    };
    let problem = format!("{verb}: {problem}");
    let no_space =
        matches!(crate::sys::problem(err), Some(OsProblem::NoSpace | OsProblem::QuotaExceeded));
    Failure { message: format!("{shown}: {problem}"), problem, ends_copy, no_space }
}

/// An I/O error in scp's words ("No such file or directory").
pub fn describe_io(e: &std::io::Error) -> String {
    if e.get_ref().is_some_and(|inner| inner.is::<Outside>()) {
        return e.to_string();
    }
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".into(),
        _ => {
            let text = e.to_string();
            text.split(" (os error").next().unwrap_or(&text).to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(problem: OsProblem) -> std::io::Error {
        crate::sys::error_of(problem)
    }

    fn missing() -> std::io::Error {
        std::io::Error::from(ErrorKind::NotFound)
    }

    fn denied() -> std::io::Error {
        std::io::Error::from(ErrorKind::PermissionDenied)
    }

    #[test]
    fn a_full_disk_ends_the_copy_and_says_how_to_go_on() {
        let f = describe(Path::new("/mnt/t/big.bin"), Action::Write, &os(OsProblem::NoSpace));
        assert_eq!(
            f.message,
            "/mnt/t/big.bin: cannot write: no space left on the device: free some space, \
             then run the same command again to resume"
        );
        assert!(f.ends_copy && f.no_space);
        assert!(describe(Path::new("q"), Action::Write, &os(OsProblem::QuotaExceeded)).no_space);
        assert!(!describe(Path::new("q"), Action::Create, &os(OsProblem::ReadOnly)).no_space);
        assert!(describe(Path::new("q"), Action::Create, &os(OsProblem::ReadOnly)).ends_copy);
        assert!(
            describe(Path::new("q"), Action::Create, &os(OsProblem::TooManyOpenFiles)).ends_copy
        );
    }

    #[test]
    fn a_missing_directory_is_named_not_the_file() {
        let f = describe(Path::new("/srv/none/x.txt"), Action::Create, &missing());
        assert_eq!(
            f.message,
            "/srv/none/x.txt: cannot create: the directory /srv/none does not exist: create \
             it first, or name an existing one"
        );
        assert!(!f.ends_copy, "other files may go elsewhere");
    }

    #[test]
    fn a_source_that_shrank_or_is_unreadable_says_what_to_do() {
        let shrank = describe_source(Path::new("/var/log/big"), &SourceShrank::io());
        assert_eq!(
            shrank.message,
            "/var/log/big: it changed during the copy (it shrank while it was read): run the \
             same command again once nothing writes to it"
        );
        assert!(!shrank.ends_copy, "the other files are fine");
        let denied = describe_source(Path::new("s"), &denied()).message;
        assert!(denied.starts_with("s: cannot read: permission denied: make it readable"));
        let gone = describe_source(Path::new("s"), &missing()).message;
        assert_eq!(gone, "s: No such file or directory");
        assert!(describe_source(Path::new("s"), &os(OsProblem::TooManyOpenFiles)).ends_copy);
    }

    #[test]
    fn a_source_that_grew_or_was_rewritten_says_so_in_the_same_words() {
        let grew = describe_source(Path::new("/var/log/app.log"), &SourceChanged::Grew.io());
        assert_eq!(
            grew.message,
            "/var/log/app.log: it changed during the copy (it grew while it was read): run \
             the same command again once nothing writes to it"
        );
        assert!(!grew.ends_copy, "the other files are fine");
        let rewritten = describe_source(Path::new("db"), &SourceChanged::Rewritten.io());
        assert_eq!(
            rewritten.problem,
            "it changed during the copy (it was written to while it was read): run the same \
             command again once nothing writes to it"
        );
    }

    // The change time (Unix ctime): Windows keeps one too, but not in the standard
    // library's metadata, so there a rewrite that sets the modification time back goes
    // unseen by the stamp.
    #[cfg(unix)]
    #[test]
    fn a_stamp_tells_growth_a_rewrite_and_a_removal_apart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, [1u8; 100]).expect("write");
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).expect("open");
        let md = || file.metadata().expect("md");
        let changed = |stamp: SourceStamp| {
            let err = stamp.check(&md()).expect_err("a change");
            err.get_ref().and_then(|i| i.downcast_ref::<SourceChanged>()).copied()
        };
        // Past the coarse clock tick some kernels stamp change times with.
        let tick = || std::thread::sleep(std::time::Duration::from_millis(20));
        let stamp = SourceStamp::of(&md());
        assert!(stamp.check(&md()).is_ok(), "unchanged");
        // Written at the same size with its modification time set back: the change time
        // tells.
        let mtime = md().modified().expect("mtime");
        tick();
        crate::sys::write_all_at(&file, &[2u8; 10], 0).expect("rewrite");
        file.set_modified(mtime).expect("set the time back");
        assert_eq!(md().modified().expect("mtime"), mtime);
        assert_eq!(changed(stamp), Some(SourceChanged::Rewritten));
        let stamp = SourceStamp::of(&md());
        crate::sys::write_all_at(&file, &[3u8; 10], 100).expect("append");
        assert_eq!(changed(stamp), Some(SourceChanged::Grew));
        // Removed: its change time moves, its bytes (read through the descriptor) do not.
        let stamp = SourceStamp::of(&md());
        tick();
        std::fs::remove_file(&path).expect("remove");
        assert!(stamp.check(&md()).is_ok(), "removed, not changed");
        file.set_len(50).expect("truncate");
        let err = stamp.check(&md()).expect_err("shrank");
        assert!(err.get_ref().is_some_and(|i| i.is::<SourceShrank>()), "{err}");
    }

    /// Appends caught halfway (a new time, the old size) are named as growth. Each
    /// round stamps the file, appends a line from another thread and checks it as fast
    /// as it can until the append shows; a status taken inside the write's window said
    /// "rewritten" before [`SourceStamp::check_file`] looked again.
    #[test]
    fn an_append_caught_halfway_is_named_as_growth() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("app.log");
        std::fs::write(&path, b"first line\n").expect("write");
        let file = std::fs::File::open(&path).expect("open");
        for _ in 0..200 {
            let stamp = SourceStamp::of(&file.metadata().expect("md"));
            let appender = std::thread::spawn({
                let path = path.clone();
                move || {
                    use std::io::Write;
                    let mut log =
                        std::fs::OpenOptions::new().append(true).open(path).expect("open");
                    log.write_all(b"one more line\n").expect("append");
                }
            });
            let err = loop {
                match stamp.check_file(&file) {
                    Ok(()) => continue,
                    Err(err) => break err,
                }
            };
            appender.join().expect("appender");
            let changed = err.get_ref().and_then(|i| i.downcast_ref::<SourceChanged>()).copied();
            assert_eq!(changed, Some(SourceChanged::Grew), "{err}");
        }
    }

    #[test]
    fn a_partial_file_gone_at_the_rename_is_not_a_missing_directory() {
        let gone = describe(Path::new("t/a"), Action::Finish, &PartialGone::io()).message;
        assert!(
            gone.starts_with("t/a: cannot put in place: its partial file was removed"),
            "{gone}"
        );
        let dir = describe(Path::new("t/a"), Action::Finish, &missing()).message;
        assert!(dir.contains("the directory t does not exist"), "{dir}");
    }

    #[test]
    fn files_and_directories_in_the_way_are_told_apart() {
        let dir = describe(Path::new("t/a"), Action::Create, &os(OsProblem::IsADirectory)).message;
        assert!(dir.contains("a directory is in the way"), "{dir}");
        let file =
            describe(Path::new("t/a/b"), Action::MakeDir, &os(OsProblem::NotADirectory)).message;
        assert!(file.contains("is a file, not a directory"), "{file}");
        let denied = describe(Path::new("t/a"), Action::Create, &denied()).message;
        assert!(denied.contains("permission denied: check that t is writable"), "{denied}");
    }
}
