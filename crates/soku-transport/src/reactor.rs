//! Descriptors in tokio's reactor, and the one-shot timerfds that time the receive
//! side's rests (`batched_udp.rs`) and quinn's connection timers (`precise_timer.rs`):
//! tokio's own timers count whole milliseconds.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Registers `fd` with the runtime's reactor for `interest` alone: a descriptor
/// registered for reading is not woken by freed send buffers, and the reverse.
#[allow(unsafe_code)]
pub(crate) fn register(fd: Arc<OwnedFd>, interest: Interest) -> io::Result<AsyncFd<Arc<OwnedFd>>> {
    // SAFETY: tokio requires the descriptor to stay open and the same while registered.
    // The `AsyncFd` holds a reference to the `OwnedFd`, which closes it only when the
    // last reference goes, and an `OwnedFd` always answers `as_raw_fd` with the
    // descriptor it owns.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(|e| e.into())
}

/// A disarmed timerfd on `CLOCK_MONOTONIC` (the clock of `std::time::Instant`),
/// registered for reading. Must be called inside a tokio runtime.
pub(crate) fn timer() -> io::Result<AsyncFd<Arc<OwnedFd>>> {
    let fd =
        timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC)?;
    register(Arc::new(fd), Interest::READABLE)
}

/// Arms `timer` to expire once, `after` from now (at once for zero: a zero value
/// would disarm it). Setting a timerfd also clears the expirations it had not reported
/// yet, so a re-armed timer never fires for its old time.
pub(crate) fn arm_once(timer: &OwnedFd, after: Duration) -> io::Result<()> {
    let once = Itimerspec {
        it_interval: Timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: Timespec {
            tv_sec: after.as_secs() as _,
            tv_nsec: after.subsec_nanos().max(1) as _,
        },
    };
    timerfd_settime(timer, TimerfdTimerFlags::empty(), &once)?;
    Ok(())
}

/// Reads the timer's expiry count; `WouldBlock` while it has not expired.
pub(crate) fn read_expiry(timer: &OwnedFd) -> io::Result<()> {
    let mut expirations = [0u8; 8];
    rustix::io::read(timer, &mut expirations)?;
    Ok(())
}
