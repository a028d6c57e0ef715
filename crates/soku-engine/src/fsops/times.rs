//! A file's times as the wire carries them, for the standard library to set.

use std::fs::FileTimes;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use soku_proto::manifest::Meta;

/// The access and modification times of `meta`.
pub(super) fn times(meta: &Meta) -> FileTimes {
    FileTimes::new()
        .set_accessed(at(meta.atime, meta.atime_nsec))
        .set_modified(at(meta.mtime, meta.mtime_nsec))
}

/// `secs` and `nsec` since the Unix epoch, before it for negative `secs`.
pub(super) fn at(secs: i64, nsec: u32) -> SystemTime {
    let nanos = Duration::from_nanos(u64::from(nsec.min(999_999_999)));
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs()) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nanos
    }
}
