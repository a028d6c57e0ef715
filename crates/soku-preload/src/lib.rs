//! soku-preload: `LD_PRELOAD=libsoku_preload.so SOKU_PRELOAD=22 scp ...` puts a
//! large-buffer relay thread pair between an unmodified program and its TCP
//! connections, the seeds' isfilter.
//!
//! # Layout
//! - `lib.rs`: the hooked libc functions: `connect`, `getpeername`, `getsockname`,
//!   `setsockopt`, `getsockopt`.
//! - [`config`]: `SOKU_PRELOAD` patterns (unset or empty: nothing changes at all).
//! - [`registry`]: which fds are hooked and what they report.
//! - [`relay`]: the relay threads and the exit-time drain.
//! - [`sys`]: the real functions (`dlsym(RTLD_NEXT)`) and address conversion.
//!
//! # How a connection is hooked
//! For a blocking or non-blocking `connect(fd, dest)` on a TCP socket whose `dest`
//! matches `SOKU_PRELOAD`: connect a new TCP socket to `dest` (blocking, so a
//! caller's connect timeout is not applied), with large buffers and `TCP_NODELAY`;
//! make a `socketpair(AF_UNIX)`; start the relay threads between the TCP socket and
//! one end; `dup2` the other end onto `fd`, keeping the caller's `O_NONBLOCK` and
//! `FD_CLOEXEC`; return 0 (also for non-blocking callers: the socket is connected, and
//! is writable at once). A failed connect returns -1 with its errno.
//!
//! Afterwards `getpeername`/`getsockname` on `fd` report the original TCP addresses
//! (ssh logs and checks them), and socket options other than `SOL_SOCKET` ones
//! (`TCP_NODELAY`, `IP_TOS`...) go to the real TCP socket and report success;
//! `SO_SNDBUF`/`SO_RCVBUF` stay on the socketpair so a program cannot shrink the
//! relay's TCP buffers. A `bind()` before `connect()` (`ssh -b`) is not carried over.
//!
//! Fork: the child shares the fd and is served by the parent's threads. Exec: the
//! threads are gone, so a hooked fd inherited across exec stops moving data (none of
//! ssh, scp, sftp, rsync or git do this: they connect after exec).

#![allow(clippy::missing_safety_doc)] // the hooks' contracts are those of libc's functions

mod config;
mod registry;
mod relay;
mod sys;

use std::cell::Cell;
use std::io::Write;
use std::sync::{Once, OnceLock};

use libc::{c_int, c_void, sockaddr, socklen_t};

use config::Config;
use sys::RawAddr;

thread_local! {
    /// Set while this thread runs hook code, so connects made by it (name
    /// resolution while reading the config) go straight to libc.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(Config::from_env)
}

/// Runs `f` with the reentrancy flag set; `None` if this thread is already inside.
fn guarded<R>(f: impl FnOnce() -> R) -> Option<R> {
    if IN_HOOK.with(|c| c.replace(true)) {
        return None;
    }
    let r = f();
    IN_HOOK.with(|c| c.set(false));
    Some(r)
}

/// connect(2), hooked for destinations matching `SOKU_PRELOAD`.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let Some(real) = sys::connect() else {
        sys::set_errno(libc::ENOSYS);
        return -1;
    };
    // Fast path: SOKU_PRELOAD unset or empty, or a connect made by the hook itself.
    let hooked = guarded(|| {
        let cfg = config();
        if !cfg.enabled() {
            return None;
        }
        // SAFETY: the caller passes `len` readable bytes at `addr` (connect's contract).
        let dest = unsafe { sys::read_addr(addr, len) }?;
        if !cfg.matches(&dest) || sys::socket_type(fd) != Some(libc::SOCK_STREAM) {
            return None;
        }
        // SAFETY: as above.
        unsafe { hook(fd, addr, len, dest, cfg) }
    });
    match hooked.flatten() {
        Some(rc) => rc,
        // SAFETY: forwarding the caller's arguments unchanged.
        None => unsafe { real(fd, addr, len) },
    }
}

/// Connects for the caller through a relay. `None`: fall back to the real connect
/// (the relay could not be set up before anything irreversible happened).
///
/// # Safety
/// `addr` points to `len` readable bytes.
unsafe fn hook(
    fd: c_int,
    addr: *const sockaddr,
    len: socklen_t,
    dest: std::net::SocketAddr,
    cfg: &Config,
) -> Option<c_int> {
    let real = sys::connect()?;
    let family = if dest.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain socket creation.
    let tcp = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if tcp < 0 {
        return None;
    }
    // SAFETY: `tcp` was just created and is owned here.
    let tcp = unsafe { relay::own(tcp) };
    let tcp_fd = relay::raw(&tcp);
    sys::set_int(tcp_fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    let size =
        |explicit: Option<usize>, core, auto| explicit.or_else(|| sys::auto_size(core, auto));
    if let Some(n) = size(cfg.sndbuf, "wmem_max", "tcp_wmem") {
        sys::set_int(tcp_fd, libc::SOL_SOCKET, libc::SO_SNDBUF, n as c_int);
    }
    if let Some(n) = size(cfg.rcvbuf, "rmem_max", "tcp_rmem") {
        sys::set_int(tcp_fd, libc::SOL_SOCKET, libc::SO_RCVBUF, n as c_int);
    }
    // SAFETY: `addr`/`len` are the caller's valid destination.
    if unsafe { real(tcp_fd, addr, len) } != 0 {
        let err = sys::errno();
        if cfg.debug {
            let _ =
                writeln!(std::io::stderr(), "soku-preload: connect to {dest} failed: errno {err}");
        }
        drop(tcp);
        sys::set_errno(err);
        return Some(-1);
    }
    let local = local_addr(tcp_fd)?;

    let mut sv = [-1 as c_int; 2];
    // SAFETY: sv has room for the two descriptors.
    if unsafe {
        libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr())
    } != 0
    {
        return None;
    }
    // SAFETY: both ends were just created and are owned here.
    let (app_end, relay_end) = unsafe { (relay::own(sv[0]), relay::own(sv[1])) };
    for end in [sv[0], sv[1]] {
        sys::set_int(end, libc::SOL_SOCKET, libc::SO_SNDBUF, 4 << 20);
        sys::set_int(end, libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20);
    }
    let identity = sys::identity(sv[0])?;
    registry::insert(registry::Entry {
        fd,
        identity,
        // SAFETY: `addr`/`len` are readable (connect's contract).
        peer: unsafe { RawAddr::copy(addr, len) },
        local,
        tcp_fd,
        // SAFETY: getpid has no preconditions.
        owner: unsafe { libc::getpid() },
        up_done: false,
    });
    let label = format!("fd {fd} to {dest}");
    if let Err(e) = relay::start(tcp, relay_end, identity, label.clone(), cfg.debug) {
        registry::remove(identity);
        if cfg.debug {
            let _ = writeln!(std::io::stderr(), "soku-preload: cannot start relay threads: {e}");
        }
        return None;
    }
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registering a plain extern "C" fn with no arguments.
        unsafe { libc::atexit(relay::drain_at_exit) };
    });

    // SAFETY: fcntl/dup2 on the caller's fd and our socketpair end, both open.
    unsafe {
        let status = libc::fcntl(fd, libc::F_GETFL);
        let fd_flags = libc::fcntl(fd, libc::F_GETFD);
        if libc::dup2(sv[0], fd) < 0 {
            // The relay is running with nobody on the other end: it ends at once.
            drop(app_end);
            return None;
        }
        if status >= 0 && status & libc::O_NONBLOCK != 0 {
            libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
        }
        if fd_flags >= 0 {
            libc::fcntl(fd, libc::F_SETFD, fd_flags);
        }
    }
    drop(app_end);
    if cfg.debug {
        let _ = writeln!(std::io::stderr(), "soku-preload: relaying {label}");
    }
    Some(0)
}

fn local_addr(tcp_fd: c_int) -> Option<RawAddr> {
    let real = sys::getsockname()?;
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
    // SAFETY: storage/len are valid out-pointers of the declared size.
    if unsafe { real(tcp_fd, (&raw mut storage).cast(), &mut len) } != 0 {
        return None;
    }
    Some(RawAddr { storage, len })
}

/// getpeername(2): the original destination for hooked fds.
#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if let Some(peer) = registry::with(fd, |e| e.peer) {
        // SAFETY: the caller's buffers, per getpeername's contract.
        return unsafe { peer.write_to(addr, len) };
    }
    match sys::getpeername() {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(real) => unsafe { real(fd, addr, len) },
        None => {
            sys::set_errno(libc::ENOSYS);
            -1
        }
    }
}

/// getsockname(2): the relay's TCP local address for hooked fds.
#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if let Some(local) = registry::with(fd, |e| e.local) {
        // SAFETY: the caller's buffers, per getsockname's contract.
        return unsafe { local.write_to(addr, len) };
    }
    match sys::getsockname() {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(real) => unsafe { real(fd, addr, len) },
        None => {
            sys::set_errno(libc::ENOSYS);
            -1
        }
    }
}

/// setsockopt(2): protocol-level options of hooked fds go to the real TCP socket.
#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *const c_void,
    len: socklen_t,
) -> c_int {
    let Some(real) = sys::setsockopt() else {
        sys::set_errno(libc::ENOSYS);
        return -1;
    };
    if let Some(tcp_fd) = registry::with(fd, |e| e.tcp_fd) {
        let buffer =
            level == libc::SOL_SOCKET && (name == libc::SO_SNDBUF || name == libc::SO_RCVBUF);
        if tcp_fd >= 0 && !buffer {
            // SAFETY: the caller's option value, applied to our TCP socket.
            unsafe { real(tcp_fd, level, name, value, len) };
        }
        if level != libc::SOL_SOCKET {
            return 0;
        }
        // SAFETY: forwarding the caller's arguments unchanged.
        let rc = unsafe { real(fd, level, name, value, len) };
        return if rc != 0 && matches!(sys::errno(), libc::ENOPROTOOPT | libc::EOPNOTSUPP) {
            0
        } else {
            rc
        };
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { real(fd, level, name, value, len) }
}

/// getsockopt(2): protocol-level options of hooked fds are read from the TCP socket.
#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    let Some(real) = sys::getsockopt() else {
        sys::set_errno(libc::ENOSYS);
        return -1;
    };
    let target = match registry::with(fd, |e| e.tcp_fd) {
        Some(tcp_fd) if tcp_fd >= 0 && level != libc::SOL_SOCKET => tcp_fd,
        _ => fd,
    };
    // SAFETY: the caller's buffers, per getsockopt's contract.
    unsafe { real(target, level, name, value, len) }
}
