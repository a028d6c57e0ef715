//! The hooked descriptors of this process: caller fds that are now relay socketpair
//! ends, and non-blocking connects still in progress that will get a relay once they
//! complete.
//!
//! An entry is valid only while the fd still refers to the same socket (same
//! st_dev/st_ino): if the program closed the fd behind our back (libc-internal closes
//! bypass our hook) and the number was reused, the entry is stale and dropped at the
//! next lookup.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use libc::c_int;

use crate::sys::{self, RawAddr};

/// Where a hooked connection stands.
pub(crate) enum State {
    /// A non-blocking connect of the caller's socket is in progress; the relay is
    /// inserted when the program learns that it succeeded.
    Connecting,
    /// The fd is our socketpair end; `tcp_fd` is this process's close-on-exec copy of
    /// the relay's TCP socket (for socket options), closed with the fd.
    Relayed { tcp_fd: c_int, local: RawAddr },
}

/// One hooked connection.
pub(crate) struct Entry {
    /// The caller's fd.
    pub fd: c_int,
    /// st_dev/st_ino of the socket behind `fd`.
    pub identity: (u64, u64),
    /// The original destination (getpeername).
    pub peer: RawAddr,
    pub state: State,
}

static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
/// Entries ever added: lets programs that hooked nothing skip the lock (close() and
/// getsockopt() are hot paths of every program the library is loaded into).
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// The table, surviving a poisoned lock.
fn lock() -> MutexGuard<'static, Vec<Entry>> {
    ENTRIES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Adds a hooked fd, replacing any entry with the same number.
pub(crate) fn insert(entry: Entry) {
    let mut t = lock();
    t.retain(|e| e.fd != entry.fd);
    t.push(entry);
    // Never decremented: a cheap "has this process ever hooked anything".
    COUNT.fetch_add(1, Ordering::Relaxed);
}

/// Runs `f` on the live entry for `fd`, if `fd` is hooked.
pub(crate) fn with<R>(fd: c_int, f: impl FnOnce(&Entry) -> R) -> Option<R> {
    if COUNT.load(Ordering::Relaxed) == 0 || fd < 0 {
        return None;
    }
    let mut t = lock();
    let i = t.iter().position(|e| e.fd == fd)?;
    if sys::identity(fd) != Some(t[i].identity) {
        release(t.swap_remove(i));
        return None;
    }
    Some(f(&t[i]))
}

/// Takes the live entry for `fd` out of the table.
pub(crate) fn take(fd: c_int) -> Option<Entry> {
    if COUNT.load(Ordering::Relaxed) == 0 || fd < 0 {
        return None;
    }
    let mut t = lock();
    let i = t.iter().position(|e| e.fd == fd)?;
    let e = t.swap_remove(i);
    if sys::identity(fd) != Some(e.identity) {
        release(e);
        return None;
    }
    Some(e)
}

/// The program closes `fd`: forget it and close our TCP copy. Called from close(),
/// which may run in a signal handler: never blocks on the lock (a missed entry only
/// delays the release of the copy until the number is looked up again).
pub(crate) fn closing(fd: c_int) {
    if COUNT.load(Ordering::Relaxed) == 0 || fd < 0 {
        return;
    }
    let Ok(mut t) = ENTRIES.try_lock() else { return };
    if let Some(i) = t.iter().position(|e| e.fd == fd) {
        release(t.swap_remove(i));
    }
}

fn release(e: Entry) {
    if let State::Relayed { tcp_fd, .. } = e.state {
        sys::close(tcp_fd);
    }
}
