//! soku-preload: `LD_PRELOAD=libsoku_preload.so SOKU_PRELOAD=22 scp ...` puts a
//! large-buffer relay between an unmodified program and its TCP connections, the
//! seeds' isfilter.
//!
//! # Layout
//! - `lib.rs`: the hooked libc functions: `connect`, `close`, `getpeername`,
//!   `getsockname`, `setsockopt`, `getsockopt`.
//! - [`config`]: `SOKU_PRELOAD` patterns (unset or empty: nothing changes at all).
//! - [`registry`]: which fds are hooked and what they report.
//! - [`relay`]: the relay process.
//! - [`sys`]: the real functions (`dlsym(RTLD_NEXT)`) and address conversion.
//!
//! # How a connection is hooked
//! On `connect(fd, dest)` of a TCP socket whose `dest` matches `SOKU_PRELOAD`, the
//! caller's own socket gets large buffers and `TCP_NODELAY` and is connected as the
//! caller asked: so a `bind()` before it (`ssh -b`), a blocking connect's
//! `SO_SNDTIMEO` and a non-blocking connect's timeout all keep their meaning. Once it is
//! connected, a `socketpair(AF_UNIX)` is made, a relay process joins the TCP socket and
//! one end, and the other end is `dup2`ed onto `fd`, keeping the caller's `O_NONBLOCK`
//! and `FD_CLOEXEC`. A blocking connect does this before it returns 0. A non-blocking
//! one returns `EINPROGRESS` as usual, and the relay goes in when the program learns
//! that the connect succeeded: `getsockopt(SO_ERROR)` reporting 0 (OpenSSH, curl),
//! `getpeername` succeeding, or `connect()` again reporting success or `EISCONN`. A
//! program that polls and then writes without asking any of these (Rust std's
//! `connect_timeout`) keeps its direct connection, without the relay. A failed connect
//! is returned unchanged.
//!
//! Afterwards `getpeername`/`getsockname` on `fd` report the original TCP addresses
//! (ssh logs and checks them), and socket options other than `SOL_SOCKET` ones
//! (`TCP_NODELAY`, `IP_TOS`...) go to the real TCP socket and report success;
//! `SO_SNDBUF`/`SO_RCVBUF` stay on the socketpair so a program cannot shrink the
//! relay's TCP buffers.
//!
//! The relay is a process of its own (see [`relay`]), so fork, exec and exit of the
//! program do not disturb it: it serves whoever holds the socketpair end and ends when
//! both directions have.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]
#![allow(clippy::missing_safety_doc)] // the hooks' contracts are those of libc's functions

mod config;
mod registry;
mod relay;
mod sys;

use std::cell::Cell;
use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::OnceLock;

use libc::{c_int, c_void, sockaddr, socklen_t};

use config::Config;
use registry::{Entry, State};
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
    // SAFETY: the caller passes `len` readable bytes at `addr` (connect's contract).
    let hooked = guarded(|| unsafe { hooked_connect(real, fd, addr, len) });
    match hooked.flatten() {
        Some(rc) => rc,
        // SAFETY: forwarding the caller's arguments unchanged.
        None => unsafe { real(fd, addr, len) },
    }
}

/// connect() for fds this library handles; `None`: not ours, call libc's.
///
/// # Safety
/// `addr` points to `len` readable bytes.
unsafe fn hooked_connect(
    real: sys::ConnectFn,
    fd: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> Option<c_int> {
    match registry::with(fd, |e| matches!(e.state, State::Connecting)) {
        // A non-blocking connect in progress, checked by calling connect() again.
        Some(true) => {
            // SAFETY: forwarding the caller's arguments.
            let rc = unsafe { real(fd, addr, len) };
            let err = sys::errno();
            if rc == 0 || err == libc::EISCONN {
                complete(fd);
            } else if !matches!(err, libc::EALREADY | libc::EINPROGRESS | libc::EINTR) {
                registry::take(fd);
            }
            sys::set_errno(err);
            return Some(rc);
        }
        Some(false) => {
            sys::set_errno(libc::EISCONN);
            return Some(-1);
        }
        None => {}
    }
    let cfg = config();
    if !cfg.enabled() {
        return None;
    }
    // SAFETY: forwarded from the caller.
    let dest = unsafe { sys::read_addr(addr, len) }?;
    if !cfg.matches(&dest) || sys::socket_type(fd) != Some(libc::SOCK_STREAM) {
        return None;
    }
    tune(fd, cfg);
    // SAFETY: the caller's socket and destination, as the caller asked.
    let rc = unsafe { real(fd, addr, len) };
    let err = sys::errno();
    // SAFETY: `addr`/`len` are readable (connect's contract).
    let peer = unsafe { RawAddr::copy(addr, len) };
    if rc == 0 {
        insert_relay(fd, peer, dest, cfg);
    } else if matches!(err, libc::EINPROGRESS | libc::EINTR) {
        // The connect goes on in the kernel; the relay goes in when it succeeds.
        if let Some(identity) = sys::identity(fd) {
            registry::insert(Entry { fd, identity, peer, state: State::Connecting });
        }
    } else if cfg.debug {
        let _ = writeln!(std::io::stderr(), "soku-preload: connect to {dest} failed: errno {err}");
    }
    sys::set_errno(err);
    Some(rc)
}

/// `TCP_DELACK_MAX_US` from include/uapi/linux/tcp.h (Linux 6.15).
const TCP_DELACK_MAX_US: c_int = 46;

/// Two jiffies at HZ 1000, 250 and 100: the smallest delayed-ACK caps each tick rate
/// accepts.
const DELACK_CAPS_US: [c_int; 3] = [2_000, 8_000, 20_000];

/// Large buffers, no Nagle and a short delayed-ACK timer on the caller's socket, before
/// it connects (the receive buffer must be set before the handshake to get a large
/// window scale).
fn tune(fd: c_int, cfg: &Config) {
    sys::set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    cap_delayed_acks(fd);
    let size =
        |explicit: Option<usize>, core, auto| explicit.or_else(|| sys::auto_size(core, auto));
    if let Some(n) = size(cfg.sndbuf, "wmem_max", "tcp_wmem") {
        sys::set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, n as c_int);
    }
    if let Some(n) = size(cfg.rcvbuf, "rmem_max", "tcp_rmem") {
        sys::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, n as c_int);
    }
}

/// sshd keeps Nagle's algorithm on without a tty, so its small messages wait for our
/// ACK, which Linux delays up to 40 ms (after every login: see
/// `crates/soku-relay/src/delack.rs`). Capped as low as the kernel accepts; older
/// kernels refuse the option and nothing changes.
fn cap_delayed_acks(fd: c_int) -> Option<c_int> {
    DELACK_CAPS_US
        .iter()
        .find(|&&us| sys::try_set_int(fd, libc::IPPROTO_TCP, TCP_DELACK_MAX_US, us))
        .and_then(|_| sys::get_int(fd, libc::IPPROTO_TCP, TCP_DELACK_MAX_US))
}

/// A non-blocking connect of `fd` has succeeded: put the relay in.
fn complete(fd: c_int) {
    if let Some(Entry { peer, .. }) = registry::take(fd) {
        let dest = peer_addr(&peer);
        if let Some(dest) = dest {
            insert_relay(fd, peer, dest, config());
        }
    }
}

fn peer_addr(peer: &RawAddr) -> Option<SocketAddr> {
    // SAFETY: the stored address and its length.
    unsafe { sys::read_addr((&raw const peer.storage).cast(), peer.len) }
}

/// Puts a relay between the connected TCP socket `fd` and the program: afterwards
/// `fd` is a socketpair end. On any failure `fd` stays the direct TCP connection.
fn insert_relay(fd: c_int, peer: RawAddr, dest: SocketAddr, cfg: &Config) {
    let fail = |what: &str| {
        if cfg.debug {
            let err = std::io::Error::last_os_error();
            let _ = writeln!(std::io::stderr(), "soku-preload: no relay for {dest}: {what}: {err}");
        }
    };
    // SAFETY: duplicating the caller's open socket; the copy is ours.
    let tcp = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if tcp < 0 {
        return fail("dup");
    }
    // SAFETY: `tcp` was just created and is owned here.
    let tcp = unsafe { OwnedFd::from_raw_fd(tcp) };
    let tcp_fd = std::os::fd::AsRawFd::as_raw_fd(&tcp);
    let Some(local) = local_addr(tcp_fd) else { return fail("getsockname") };
    let mut sv = [-1 as c_int; 2];
    // SAFETY: sv has room for the two descriptors.
    if unsafe {
        libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr())
    } != 0
    {
        return fail("socketpair");
    }
    // SAFETY: both ends were just created and are owned here.
    let (app_end, relay_end) =
        unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
    for end in sv {
        sys::set_int(end, libc::SOL_SOCKET, libc::SO_SNDBUF, 4 << 20);
        sys::set_int(end, libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20);
    }
    let Some(identity) = sys::identity(sv[0]) else { return fail("fstat") };

    // The program's fd becomes the socketpair end (its TCP socket lives on in `tcp`).
    // SAFETY: fcntl/dup2 on the caller's fd and our socketpair end, both open.
    let (status, fd_flags) =
        unsafe { (libc::fcntl(fd, libc::F_GETFL), libc::fcntl(fd, libc::F_GETFD)) };
    if unsafe { libc::dup2(sv[0], fd) } < 0 {
        return fail("dup2");
    }
    drop(app_end);
    let restore = |status: c_int, fd_flags: c_int| {
        // SAFETY: fcntl on the caller's open fd.
        unsafe {
            if status >= 0 {
                libc::fcntl(fd, libc::F_SETFL, status);
            }
            if fd_flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, fd_flags);
            }
        }
    };
    let label = format!("fd {fd} to {dest}");
    if let Err(e) = relay::spawn(tcp_fd, relay_end, &label, cfg.debug) {
        // Nothing has moved yet: give the program its TCP socket back.
        // SAFETY: dup2 of our open copy onto the caller's fd.
        unsafe { libc::dup2(tcp_fd, fd) };
        restore(status, fd_flags);
        if cfg.debug {
            let _ = writeln!(std::io::stderr(), "soku-preload: no relay for {dest}: fork: {e}");
        }
        return;
    }
    restore(status & libc::O_NONBLOCK, fd_flags);
    let tcp_fd = std::os::fd::IntoRawFd::into_raw_fd(tcp);
    registry::insert(Entry { fd, identity, peer, state: State::Relayed { tcp_fd, local } });
    if cfg.debug {
        let _ = writeln!(std::io::stderr(), "soku-preload: relaying {label}");
    }
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

/// close(2): a hooked fd's entry and our copy of its TCP socket go with it.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    registry::closing(fd);
    match sys::real_close() {
        // SAFETY: forwarding the caller's argument unchanged.
        Some(real) => unsafe { real(fd) },
        None => {
            sys::set_errno(libc::ENOSYS);
            -1
        }
    }
}

/// The relay of `fd`, if it has one: (our TCP socket copy, its local address).
fn relayed(fd: c_int) -> Option<(c_int, RawAddr)> {
    registry::with(fd, |e| match e.state {
        State::Relayed { tcp_fd, local } => Some((tcp_fd, local)),
        State::Connecting => None,
    })
    .flatten()
}

/// getpeername(2): the original destination for relayed fds; succeeding on a
/// non-blocking connect in progress completes it (the relay goes in).
#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if connecting(fd) && sys::is_connected(fd) {
        guarded(|| complete(fd));
    }
    if relayed(fd).is_some() {
        if let Some(peer) = registry::with(fd, |e| e.peer) {
            // SAFETY: the caller's buffers, per getpeername's contract.
            return unsafe { peer.write_to(addr, len) };
        }
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

/// getsockname(2): the TCP socket's local address for relayed fds.
#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if let Some((_, local)) = relayed(fd) {
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

/// setsockopt(2): protocol-level options of relayed fds go to the real TCP socket.
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
    if let Some((tcp_fd, _)) = relayed(fd) {
        let buffer =
            level == libc::SOL_SOCKET && (name == libc::SO_SNDBUF || name == libc::SO_RCVBUF);
        if !buffer {
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

/// getsockopt(2): protocol-level options of relayed fds are read from the TCP socket;
/// `SO_ERROR` reporting success completes a non-blocking connect (the relay goes in).
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
    let relay = relayed(fd);
    let target = match relay {
        Some((tcp_fd, _)) if level != libc::SOL_SOCKET => tcp_fd,
        _ => fd,
    };
    // SAFETY: the caller's buffers, per getsockopt's contract.
    let rc = unsafe { real(target, level, name, value, len) };
    if rc == 0 && relay.is_none() && level == libc::SOL_SOCKET && name == libc::SO_ERROR {
        // SAFETY: getsockopt succeeded, so `value` holds an int.
        let error = unsafe { std::ptr::read_unaligned(value.cast::<c_int>()) };
        if error == 0 && connecting(fd) && sys::is_connected(fd) {
            guarded(|| complete(fd));
        }
    }
    rc
}

/// Whether `fd` is a hooked non-blocking connect still in progress.
fn connecting(fd: c_int) -> bool {
    registry::with(fd, |e| matches!(e.state, State::Connecting)).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the kernel knows the option, the cap is set and read back well under the
    /// 40 ms it replaces; elsewhere it is absent and nothing else changed.
    #[test]
    fn the_delayed_ack_cap_is_set_where_the_kernel_has_it() {
        // SAFETY: a plain socket call; the descriptor is closed below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        assert!(fd >= 0, "a TCP socket");
        match cap_delayed_acks(fd) {
            Some(us) => assert!((2_000..=20_000).contains(&us), "cap {us} us"),
            None => assert!(
                sys::get_int(fd, libc::IPPROTO_TCP, TCP_DELACK_MAX_US).is_none(),
                "the option exists but no cap was taken"
            ),
        }
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
    }
}
