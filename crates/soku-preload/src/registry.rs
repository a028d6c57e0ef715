//! The hooked descriptors: which caller fds are relay socketpair ends, and what
//! getpeername/getsockname should report for them.
//!
//! An entry is valid only while the fd still refers to the same socket (same
//! st_dev/st_ino): if the program closed it and the number was reused, the entry is
//! stale and dropped at the next lookup, so no close() hook is needed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use libc::c_int;

use crate::sys::{self, RawAddr};

/// One hooked connection.
pub struct Entry {
    /// The caller's fd (now our socketpair end).
    pub fd: c_int,
    /// st_dev/st_ino of that socketpair end.
    pub identity: (u64, u64),
    /// The original destination (getpeername).
    pub peer: RawAddr,
    /// The TCP socket's local address (getsockname).
    pub local: RawAddr,
    /// The relay's TCP socket, -1 once the relay closed it.
    pub tcp_fd: c_int,
    /// The process that runs this relay's threads.
    pub owner: libc::pid_t,
    /// The program -> network direction has finished (all written, write side shut).
    pub up_done: bool,
}

static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
/// Signalled when an `up_done` changes (for the exit-time drain).
pub static CHANGED: Condvar = Condvar::new();
/// Entries ever added: lets programs that hooked nothing skip the lock.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// The table, surviving a poisoned lock (a panicking relay thread must not stop others).
pub fn lock() -> MutexGuard<'static, Vec<Entry>> {
    ENTRIES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Adds a hooked fd (replacing a stale entry with the same number).
pub fn insert(entry: Entry) {
    let mut t = lock();
    t.retain(|e| e.fd != entry.fd);
    t.push(entry);
    // Never decremented: a cheap "has this process ever hooked anything".
    COUNT.fetch_add(1, Ordering::Relaxed);
}

/// Runs `f` on the live entry for `fd`, if `fd` is hooked.
pub fn with<R>(fd: c_int, f: impl FnOnce(&Entry) -> R) -> Option<R> {
    if COUNT.load(Ordering::Relaxed) == 0 || fd < 0 {
        return None;
    }
    let mut t = lock();
    let i = t.iter().position(|e| e.fd == fd)?;
    if sys::identity(fd) != Some(t[i].identity) {
        t.swap_remove(i);
        return None;
    }
    Some(f(&t[i]))
}

/// Updates the entry whose socketpair end is `identity` (the caller's fd may be gone).
pub fn update(identity: (u64, u64), f: impl FnOnce(&mut Entry)) {
    let mut t = lock();
    if let Some(e) = t.iter_mut().find(|e| e.identity == identity) {
        f(e);
    }
    CHANGED.notify_all();
}

/// Removes the entry for `identity` once its relay is over.
pub fn remove(identity: (u64, u64)) {
    let mut t = lock();
    t.retain(|e| e.identity != identity);
    CHANGED.notify_all();
}
