//! The temporary names a file is received under, beside its final name, until it is
//! verified and renamed into place ([`crate::fsops`]). Kept apart from the file-system
//! work so that the words for a failure ([`crate::failure`]) can name them without
//! depending on it.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// The temporary name for a file being received.
pub(crate) fn temp_path(local: &Path) -> PathBuf {
    local.with_file_name(temp_name(local.file_name().unwrap_or_default()))
}

/// The temporary name used instead of [`temp_path`] when another user's file sits at
/// that one and cannot be removed (a sticky directory such as `/tmp`).
pub(crate) fn own_temp_path(local: &Path) -> PathBuf {
    local.with_file_name(own_temp_name(local.file_name().unwrap_or_default()))
}

pub(crate) fn temp_name(name: &OsStr) -> OsString {
    let mut out = OsString::from(".");
    out.push(name);
    out.push(".soku-part");
    out
}

/// `.NAME.soku-part-UID`: it names this user, so two users' copies of one name into a
/// shared directory do not meet there, and a later run finds it to resume; it never
/// ends in `.soku-part`, so it is no other file's [`temp_name`].
pub(crate) fn own_temp_name(name: &OsStr) -> OsString {
    let mut out = temp_name(name);
    out.push(format!("-{}", crate::sys::user_id()));
    out
}
