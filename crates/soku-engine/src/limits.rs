//! How many descriptors this process may hold open, which bounds how many files a copy
//! keeps open at once: the sender's files announced ahead and chunks in flight, and on
//! the receiving side the temporary file of each of those files.

use std::sync::OnceLock;

/// Highest soft limit this process raises itself to.
const WANTED: u64 = 1 << 16;

/// Used when the limit cannot be read.
const FALLBACK: u64 = 1024;

/// The soft limit on open descriptors, raised once per process to the hard limit (at
/// most [`WANTED`]) first. Many systems start processes at a soft limit of 1024 with a
/// far higher hard limit, which a process may raise itself to (getrlimit(2)); a tree of
/// small files keeps many files open at once on both sides.
pub fn open_files() -> usize {
    static LIMIT: OnceLock<u64> = OnceLock::new();
    let limit = *LIMIT.get_or_init(|| {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let now = getrlimit(Resource::Nofile);
        let soft = now.current.unwrap_or(WANTED);
        let wanted = now.maximum.map_or(WANTED, |hard| hard.min(WANTED));
        if soft < wanted {
            let raised = Rlimit { current: Some(wanted), maximum: now.maximum };
            if setrlimit(Resource::Nofile, raised).is_ok() {
                return wanted;
            }
        }
        if soft == 0 {
            FALLBACK
        } else {
            soft
        }
    });
    usize::try_from(limit).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_limit_is_at_least_what_the_process_had() {
        let before = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        let limit = super::open_files() as u64;
        assert!(limit >= before.current.unwrap_or(0).min(super::WANTED));
        assert_eq!(super::open_files() as u64, limit);
    }
}
