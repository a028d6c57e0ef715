//! Thin, safe wrappers over the few Linux calls the emulator needs.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca; // _IOW('T', 202, int)

/// `struct ifreq` as TUNSETIFF reads it: name then flags, padded to 40 bytes.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Opens a non-blocking layer-3 TUN device (`IFF_TUN | IFF_NO_PI`) named `name` in
/// the calling thread's network namespace. The device lives as long as the fd.
pub(crate) fn open_tun(name: &str) -> io::Result<OwnedFd> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad ifname"));
    }
    // SAFETY: the path is a NUL-terminated literal; open has no other preconditions.
    let fd = cvt(unsafe {
        libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC)
    })?;
    // SAFETY: fd was just returned by open and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF reads (and writes back the name of) a struct ifreq; IfReq has
    // its layout and size (40 bytes) and lives for the duration of the call.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req as *mut IfReq) })?;
    Ok(fd)
}

/// Moves the calling thread into the network namespace bound at `path`.
pub(crate) fn setns_net(path: &str) -> io::Result<()> {
    let f = File::open(path)?;
    // SAFETY: f is an open namespace file; setns only changes this thread's netns.
    cvt(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) })?;
    Ok(())
}

/// A non-blocking eventfd used to wake the forwarding threads for shutdown.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with flag arguments.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
    // SAFETY: fd was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes an eventfd readable.
pub(crate) fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an fd; errors (counter full) are harmless.
    unsafe {
        libc::write(fd, (&one as *const u64).cast(), 8);
    }
}

/// `read(2)` into `buf`.
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is a valid writable region of buf.len() bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `write(2)` of `buf`.
pub(crate) fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is a valid readable region of buf.len() bytes.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Waits until `data` or `stop` is readable or `timeout` passes (`None`: forever).
/// Returns whether `stop` fired. Uses ppoll, whose timeout has nanosecond resolution.
pub(crate) fn wait(data: RawFd, stop: RawFd, timeout: Option<Duration>) -> io::Result<bool> {
    let mut fds = [
        libc::pollfd { fd: data, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 },
    ];
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: fds is a live array of 2 pollfd; tsp is null or points to a live timespec;
    // a null sigmask leaves the mask unchanged.
    let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, tsp, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(fds[1].revents != 0)
}

/// Sets this thread's timer slack (default 50 us) so sleeps end on time.
pub(crate) fn set_timer_slack(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long; no pointers involved.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
}

/// CPU time used by the calling thread, (user, system) in nanoseconds.
pub(crate) fn thread_cpu_ns() -> (u64, u64) {
    // SAFETY: rusage is plain data, fully written by getrusage on success.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a live, writable rusage; RUSAGE_THREAD reports the caller.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return (0, 0);
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    (ns(ru.ru_utime), ns(ru.ru_stime))
}

/// Sets the calling thread's nice value (best effort: errors are ignored).
pub(crate) fn set_nice(nice: i32) {
    // SAFETY: gettid has no preconditions; setpriority on our own tid only changes
    // this thread's scheduling priority.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
    }
}

/// Puts the calling thread in SCHED_FIFO at `prio`; false if not permitted.
pub(crate) fn set_fifo(prio: i32) -> bool {
    let param = libc::sched_param { sched_priority: prio };
    // SAFETY: param is a live sched_param; pid 0 means the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}
