//! How many descriptors this process may hold open, which bounds how many files a copy
//! keeps open at once: the sender's files announced ahead and chunks in flight, and on
//! the receiving side the temporary file of each of those files. The receiver says its
//! limit in its hello (`soku_proto::hello`), so the sender sizes that window by the
//! lower of the two ([`for_files`]).

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
        let soft = crate::sys::raise_open_files(WANTED).unwrap_or(FALLBACK);
        if soft == 0 {
            FALLBACK
        } else {
            soft
        }
    });
    usize::try_from(limit).unwrap_or(usize::MAX)
}

/// Descriptors a receiving soku keeps for itself besides its copy's files, as the
/// sender counts them. Read from `/proc/PID/fd` in the middle of a copy, both ways over
/// QUIC, TLS over TCP (five connections) and the ssh channel, the receiver held 16 to
/// 21 besides its temporary file: the runtime's epoll, eventfd and timers, stdio and
/// ssh's pipes, the UDP socket and the TCP listener and connections, the target
/// directory, the path memory file. The rest of the 64 is for what opens beside each
/// file for a moment: the directory a file is made in, for each of the up to 32 files
/// prepared at once (`receive.rs`), and the one a file is renamed in.
pub const RECEIVER_KEEPS: u64 = 64;

/// The descriptors a sender sizes the window of files it keeps open by: its own limit
/// ([`open_files`]), and when the receiver told its limit (`None`: an older one that
/// does not), that limit less [`RECEIVER_KEEPS`]. The window holds at most 3/8 of this
/// many files announced or with chunks in flight (`send.rs`), and a file holds at most
/// two descriptors at the receiver (its temporary file, and a second one for direct
/// writes). It lets a file go once its chunks are acknowledged, before the receiver
/// has flushed and renamed it: a receiver whose flushes lag holds more for a while.
pub fn for_files(receiver: Option<u64>) -> usize {
    let own = open_files();
    let Some(limit) = receiver else { return own };
    own.min(usize::try_from(limit.saturating_sub(RECEIVER_KEEPS)).unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_receivers_limit_bounds_the_senders_window_less_what_it_keeps() {
        let own = super::open_files();
        assert_eq!(super::for_files(None), own);
        assert_eq!(super::for_files(Some(256)), own.min(256 - 64));
        assert_eq!(super::for_files(Some(40)), 0, "fewer than it keeps: the least window");
        assert_eq!(super::for_files(Some(u64::MAX)), own);
    }
}
