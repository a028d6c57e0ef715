//! The relay threads of one hooked connection, and the exit-time drain.
//!
//! Thread "up" copies program -> network, thread "down" network -> program, each with
//! a 1 MiB buffer; end of file on one side becomes `shutdown(SHUT_WR)` on the other.
//! The threads live in the process that called connect(): a forked child shares the
//! fd and is served by its parent's threads while the parent lives; a program that
//! exec()s loses them (ssh, scp, sftp, rsync and git connect after exec, so they are
//! unaffected).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::registry;

const BUF_SIZE: usize = 1 << 20;
/// How long a process exit waits for data it wrote to leave through the relay.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Starts the relay threads; they own both descriptors. Returns them on failure.
pub fn start(
    tcp: OwnedFd,
    pair_end: OwnedFd,
    identity: (u64, u64),
    label: String,
    debug: bool,
) -> Result<(), std::io::Error> {
    let tcp = TcpStream::from(tcp);
    let unix = UnixStream::from(pair_end);
    let (tcp2, unix2) = (tcp.try_clone()?, unix.try_clone()?);
    let down = std::thread::Builder::new()
        .name("soku-preload-down".into())
        .spawn(move || one_way(&tcp2, &unix2))?;
    std::thread::Builder::new().name("soku-preload-up".into()).spawn(move || {
        let start = Instant::now();
        let up = one_way(&unix, &tcp);
        registry::update(identity, |e| e.up_done = true);
        let down = down.join().unwrap_or(0);
        registry::update(identity, |e| e.tcp_fd = -1);
        if debug {
            let secs = start.elapsed().as_secs_f64();
            let _ = writeln!(
                std::io::stderr(),
                "soku-preload: {label}: {up} bytes up, {down} bytes down, {secs:.2} s"
            );
        }
        drop((unix, tcp));
    })?;
    Ok(())
}

/// Half-closing the destination, generically over the two stream types.
trait HalfClose {
    fn shutdown(&self, how: Shutdown) -> std::io::Result<()>;
}
impl HalfClose for &TcpStream {
    fn shutdown(&self, how: Shutdown) -> std::io::Result<()> {
        TcpStream::shutdown(self, how)
    }
}
impl HalfClose for &UnixStream {
    fn shutdown(&self, how: Shutdown) -> std::io::Result<()> {
        UnixStream::shutdown(self, how)
    }
}

/// Copies until end of file, then half-closes `to`; on an error shuts both down so
/// the other direction ends too. Returns the bytes copied.
fn one_way<R, W>(from: R, to: W) -> u64
where
    R: Read + HalfClose + Copy,
    W: Write + HalfClose + Copy,
{
    let mut buf = vec![0u8; BUF_SIZE];
    let mut total = 0u64;
    let (mut r, mut w) = (from, to);
    loop {
        match r.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return total;
            }
            Ok(n) => {
                if w.write_all(&buf[..n]).is_err() {
                    break;
                }
                total += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
    total
}

/// At exit: end the write side of this process's hooked fds, so their relays see end
/// of file after the last byte, and wait (bounded) until those bytes have left.
/// Without this, data written just before exit() could die with the relay thread.
pub extern "C" fn drain_at_exit() {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    let mut t = registry::lock();
    for e in t.iter().filter(|e| e.owner == pid && !e.up_done) {
        if crate::sys::identity(e.fd) == Some(e.identity) {
            // SAFETY: shutdown on a descriptor checked to be our socketpair end.
            unsafe { libc::shutdown(e.fd, libc::SHUT_WR) };
        }
    }
    while t.iter().any(|e| e.owner == pid && !e.up_done) {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else { return };
        t = match registry::CHANGED.wait_timeout(t, left) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        };
    }
}

/// The raw fd of an owned descriptor, for the registry.
pub fn raw(fd: &OwnedFd) -> i32 {
    fd.as_raw_fd()
}

/// Wraps a raw fd this library just created.
///
/// # Safety
/// `fd` must be open and owned by the caller, and not closed elsewhere.
pub unsafe fn own(fd: i32) -> OwnedFd {
    // SAFETY: forwarded from the caller.
    unsafe { OwnedFd::from_raw_fd(fd) }
}
