//! The relay of one hooked connection: a small process of its own.
//!
//! Why a process and not threads in the program: threads die with an `exec()` and
//! with `exit()`, so a hooked fd handed across exec would stop moving data, and bytes
//! written just before exit would need a drain at exit. A detached process has
//! neither problem: it copies until both directions have ended, whoever holds the
//! program's end (the program, its forked children, a program it exec'd), and then
//! exits. The program never waits for it: it is forked twice, so init reaps it.
//!
//! The relay process is forked from inside `connect()`, possibly in a multithreaded
//! program, so it runs only async-signal-safe system calls (poll, read, write,
//! shutdown, close, sigaction, _exit) on buffers allocated before the fork, and it
//! closes every descriptor except its two sockets so it holds none of the program's
//! pipes or files open.
//!
//! Each direction has a 1 MiB buffer; end of file on one side becomes
//! `shutdown(SHUT_WR)` on the other; an error on either side shuts both down.

use std::fmt::Write as _;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

use libc::c_int;

const BUF_SIZE: usize = 1 << 20;

/// Forks the relay process between the TCP socket `tcp` and `pair_end`. The program
/// keeps `tcp` open; `pair_end` is closed here once the relay holds its own copy.
pub(crate) fn spawn(
    tcp: c_int,
    pair_end: OwnedFd,
    label: &str,
    debug: bool,
) -> std::io::Result<()> {
    // Everything the relay needs is allocated here, before the fork.
    let mut up = vec![0u8; BUF_SIZE];
    let mut down = vec![0u8; BUF_SIZE];
    let mut message = String::with_capacity(256);
    let _ = write!(message, "soku-preload: relay for {label} ended");
    let (tcp_fd, pair_fd) = (tcp, pair_end.as_raw_fd());

    // SAFETY: fork has no preconditions; the child below only makes system calls.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if child == 0 {
        // The intermediate child: fork the relay and exit at once, so the relay is
        // reparented to init and the program has no lasting child to reap.
        // SAFETY: as above; _exit skips the program's atexit handlers and buffers.
        unsafe {
            if libc::fork() == 0 {
                let status = run_relay(tcp_fd, pair_fd, &mut up, &mut down, &message, debug);
                libc::_exit(status);
            }
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child. EINTR is retried; ECHILD (a SIGCHLD handler
    // of the program reaped it first, or SIGCHLD is ignored) is fine.
    while unsafe { libc::waitpid(child, &mut status, 0) } < 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
    drop(pair_end);
    Ok(())
}

/// The relay process's body. Returns its exit status.
fn run_relay(
    tcp: c_int,
    pair: c_int,
    up_buf: &mut [u8],
    down_buf: &mut [u8],
    message: &str,
    debug: bool,
) -> c_int {
    reset_signals();
    // SAFETY: PR_SET_NAME with a NUL-terminated name of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"soku-preload".as_ptr()) };
    let keep_stderr = if debug { 2 } else { -1 };
    close_all_except(&[tcp, pair, keep_stderr]);
    for fd in [tcp, pair] {
        // SAFETY: fcntl on our own open descriptors.
        unsafe {
            libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK)
        };
    }
    let start = Instant::now();
    let mut up = Direction::new(pair, tcp, up_buf);
    let mut down = Direction::new(tcp, pair, down_buf);
    let ok = pump(&mut up, &mut down);
    if debug {
        let mut line = StackLine::default();
        let _ = writeln!(
            line,
            "{message}{}: {} bytes up, {} bytes down, {:.2} s",
            if ok { "" } else { " by an error" },
            up.total,
            down.total,
            start.elapsed().as_secs_f64()
        );
        // SAFETY: writing our own stack buffer to stderr.
        unsafe { libc::write(2, line.buf.as_ptr().cast(), line.len) };
    }
    if ok {
        0
    } else {
        1
    }
}

/// One direction of the copy: `from` -> buffer -> `to`.
struct Direction<'a> {
    from: c_int,
    to: c_int,
    buf: &'a mut [u8],
    start: usize,
    end: usize,
    eof: bool,
    /// All copied and `to` half-closed.
    done: bool,
    total: u64,
}

enum Step {
    Progress,
    Blocked,
    Failed,
}

impl<'a> Direction<'a> {
    fn new(from: c_int, to: c_int, buf: &'a mut [u8]) -> Self {
        Direction { from, to, buf, start: 0, end: 0, eof: false, done: false, total: 0 }
    }

    fn wants_read(&self) -> bool {
        !self.done && !self.eof && self.start == self.end
    }

    fn wants_write(&self) -> bool {
        !self.done && self.start < self.end
    }

    fn read(&mut self) -> Step {
        // SAFETY: reading into our own buffer of the given length.
        let n = unsafe { libc::read(self.from, self.buf.as_mut_ptr().cast(), self.buf.len()) };
        match n {
            0 => {
                self.eof = true;
                Step::Progress
            }
            n if n > 0 => {
                (self.start, self.end) = (0, n as usize);
                Step::Progress
            }
            _ => blocked_or_failed(),
        }
    }

    fn write(&mut self) -> Step {
        let pending = &self.buf[self.start..self.end];
        // SAFETY: writing from our own buffer of the given length.
        let n = unsafe { libc::write(self.to, pending.as_ptr().cast(), pending.len()) };
        if n < 0 {
            return blocked_or_failed();
        }
        self.start += n as usize;
        self.total += n as u64;
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        }
        Step::Progress
    }

    /// Reads and writes until this direction would block; half-closes at the end.
    fn advance(&mut self) -> bool {
        loop {
            let step = if self.wants_write() {
                self.write()
            } else if self.wants_read() {
                self.read()
            } else {
                break;
            };
            match step {
                Step::Progress => {}
                Step::Blocked => break,
                Step::Failed => return false,
            }
        }
        if self.eof && !self.done && self.start == self.end {
            // SAFETY: shutdown on our own socket.
            unsafe { libc::shutdown(self.to, libc::SHUT_WR) };
            self.done = true;
        }
        true
    }
}

fn blocked_or_failed() -> Step {
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN | libc::EINTR) => Step::Blocked,
        _ => Step::Failed,
    }
}

/// Copies both ways until both are done (true) or one fails (false: both sockets are
/// shut down so the program and the peer see the connection end).
fn pump(up: &mut Direction<'_>, down: &mut Direction<'_>) -> bool {
    loop {
        if !up.advance() || !down.advance() {
            for fd in [up.from, up.to] {
                // SAFETY: shutdown on our own sockets.
                unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
            }
            return false;
        }
        if up.done && down.done {
            return true;
        }
        let mut fds = [libc::pollfd { fd: -1, events: 0, revents: 0 }; 2];
        for (slot, dir) in fds.iter_mut().zip([&*up, &*down]) {
            if dir.wants_write() {
                *slot = libc::pollfd { fd: dir.to, events: libc::POLLOUT, revents: 0 };
            } else if dir.wants_read() {
                *slot = libc::pollfd { fd: dir.from, events: libc::POLLIN, revents: 0 };
            }
        }
        // SAFETY: polling our own array (fd -1 entries are ignored by poll).
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
    }
}

/// Default signal handling, SIGPIPE ignored (a closed peer is an EPIPE error), nothing
/// blocked: the program's handlers make no sense in the relay.
fn reset_signals() {
    // SAFETY: sigaction/sigprocmask with valid, zero-initialised structures.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        for sig in 1..libc::SIGRTMAX() {
            action.sa_sigaction = if sig == libc::SIGPIPE { libc::SIG_IGN } else { libc::SIG_DFL };
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
}

/// Closes every descriptor but `keep` (negative entries are ignored).
fn close_all_except(keep: &[c_int]) {
    let mut keep_sorted = [-1; 3];
    let n = keep.len().min(keep_sorted.len());
    keep_sorted[..n].copy_from_slice(&keep[..n]);
    keep_sorted.sort_unstable();
    let mut from: libc::c_uint = 0;
    for &fd in keep_sorted.iter().filter(|&&fd| fd >= 0) {
        let fd = fd as libc::c_uint;
        if fd > from {
            close_range(from, fd - 1);
        }
        from = fd + 1;
    }
    close_range(from, libc::c_uint::MAX);
}

fn close_range(first: libc::c_uint, last: libc::c_uint) {
    // SAFETY: close_range only closes descriptors of this process.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
    if rc != 0 {
        // Kernels before 5.9: close one by one up to the descriptor limit.
        // SAFETY: sysconf has no preconditions; closing any number is harmless here
        // (the raw system call: libc's close would be our own hook).
        let max = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) }.clamp(0, 1 << 20) as libc::c_uint;
        for fd in first..=last.min(max) {
            unsafe { libc::syscall(libc::SYS_close, fd) };
        }
    }
}

/// A fixed-size line buffer: formatting without allocating (after fork).
struct StackLine {
    buf: [u8; 512],
    len: usize,
}

impl Default for StackLine {
    fn default() -> Self {
        StackLine { buf: [0; 512], len: 0 }
    }
}

impl std::fmt::Write for StackLine {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}
