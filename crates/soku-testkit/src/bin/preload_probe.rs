//! `preload-probe MODE ADDR BYTES`: a small TCP client that connects the ways real
//! programs do, for testing `libsoku_preload.so` directly (run it under `LD_PRELOAD`).
//!
//! Each exchange follows [`soku_testkit::probe`]'s protocol: send BYTES of a pattern,
//! half-close, read the server's digest of what it received and BYTES of its reply
//! pattern, check both. Modes:
//! - `blocking`: a blocking connect;
//! - `nonblocking`: a non-blocking connect with a timeout as OpenSSH and curl make
//!   it: poll for writability, then `getsockopt(SO_ERROR)`;
//! - `connect-timeout`: Rust std's `connect_timeout` (poll, no `SO_ERROR`), then
//!   `getpeername`;
//! - `poll-then-write`: std's `connect_timeout`, then straight to the data;
//! - `bind`: bind to 127.0.0.2 first (as `ssh -b`), then connect;
//! - `threads`: four threads, each with its own connection, at once;
//! - `fork`: connect, a forked child sends the first half and exits, the parent sends
//!   the rest and reads the reply;
//! - `exec`: connect, then exec `exec-child FD` which does the exchange on the
//!   inherited fd;
//! - `timeout`: a non-blocking connect with a 1 s timeout to a server that never
//!   answers: must time out after about 1 s.
//!
//! Exit status 0 when everything checked out, 1 with a message otherwise.

// fork() and handing a raw fd across exec are what this client exists to do.
#![allow(unsafe_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};
use soku_testkit::probe::{self, Digest};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Err(e) = run(&args) {
        eprintln!("preload-probe: {e}");
        std::process::exit(1);
    }
}

type Result<T> = std::result::Result<T, String>;

fn run(args: &[String]) -> Result<()> {
    let [_, mode, addr, bytes] = args else {
        return Err("usage: preload-probe MODE ADDR BYTES".into());
    };
    let bytes: u64 = bytes.parse().map_err(|_| format!("bad byte count {bytes}"))?;
    if mode == "exec-child" {
        let fd: i32 = addr.parse().map_err(|_| format!("bad fd {addr}"))?;
        // SAFETY: the parent handed this open socket over across exec.
        let stream = unsafe { TcpStream::from_raw_fd(fd) };
        return exchange(&stream, bytes);
    }
    let addr: SocketAddr = addr.parse().map_err(|_| format!("bad address {addr}"))?;
    match mode.as_str() {
        "blocking" => exchange(&connected(blocking(addr, None)?, addr)?, bytes),
        "bind" => exchange(&connected(blocking(addr, Some("127.0.0.2:0"))?, addr)?, bytes),
        "nonblocking" => exchange(&connected(nonblocking(addr)?, addr)?, bytes),
        "connect-timeout" => exchange(&connected(with_timeout(addr, 5)?, addr)?, bytes),
        "poll-then-write" => exchange(&with_timeout(addr, 5)?, bytes),
        "threads" => {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    std::thread::spawn(move || {
                        exchange(&connected(blocking(addr, None)?, addr)?, bytes)
                    })
                })
                .collect();
            workers
                .into_iter()
                .try_for_each(|w| w.join().map_err(|_| "a thread panicked".to_string())?)
        }
        "fork" => fork_mode(addr, bytes),
        "exec" => exec_mode(addr, bytes),
        "timeout" => timeout_mode(addr),
        _ => Err(format!("unknown mode {mode}")),
    }
}

fn blocking(addr: SocketAddr, bind: Option<&str>) -> Result<TcpStream> {
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(err("socket"))?;
    if let Some(local) = bind {
        let local: SocketAddr = local.parse().map_err(|_| "bad bind address".to_string())?;
        socket.bind(&local.into()).map_err(err("bind"))?;
    }
    socket.connect(&addr.into()).map_err(err("connect"))?;
    Ok(socket.into())
}

/// OpenSSH's `timeout_connect`: O_NONBLOCK, connect, poll, `SO_ERROR`, blocking again.
fn nonblocking(addr: SocketAddr) -> Result<TcpStream> {
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(err("socket"))?;
    socket.set_nonblocking(true).map_err(err("O_NONBLOCK"))?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
            let mut pfd =
                libc::pollfd { fd: socket.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
            // SAFETY: polling one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, 5000) } != 1 {
                return Err("connect: no answer within 5 s".into());
            }
            if let Some(e) = socket.take_error().map_err(err("SO_ERROR"))? {
                return Err(format!("connect: {e}"));
            }
        }
        Err(e) => return Err(format!("connect: {e}")),
    }
    socket.set_nonblocking(false).map_err(err("O_NONBLOCK"))?;
    Ok(socket.into())
}

/// std's connect_timeout: O_NONBLOCK, connect, poll, `SO_ERROR`, back to blocking.
fn with_timeout(addr: SocketAddr, secs: u64) -> Result<TcpStream> {
    TcpStream::connect_timeout(&addr, Duration::from_secs(secs)).map_err(err("connect"))
}

/// Checks that getpeername reports the destination (the preload must keep it).
fn connected(stream: TcpStream, addr: SocketAddr) -> Result<TcpStream> {
    let peer = stream.peer_addr().map_err(err("getpeername"))?;
    if peer != addr {
        return Err(format!("getpeername says {peer}, expected {addr}"));
    }
    Ok(stream)
}

fn fork_mode(addr: SocketAddr, bytes: u64) -> Result<()> {
    let stream = connected(blocking(addr, None)?, addr)?;
    let half = bytes / 2;
    // SAFETY: this program is single-threaded here; the child only writes and exits.
    match unsafe { libc::fork() } {
        -1 => Err("fork failed".into()),
        0 => {
            let ok = probe::send_pattern(&stream, 0, half).is_ok();
            // SAFETY: leaving the child without running the parent's cleanup.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) }
        }
        child => {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(child, &mut status, 0) };
            if status != 0 {
                return Err(format!("the forked child failed to send (status {status})"));
            }
            probe::send_pattern(&stream, half, bytes).map_err(err("send"))?;
            finish(&stream, bytes)
        }
    }
}

fn exec_mode(addr: SocketAddr, bytes: u64) -> Result<()> {
    let fd = connected(blocking(addr, None)?, addr)?.into_raw_fd();
    // SAFETY: clearing close-on-exec on our own fd so the exec'd program inherits it.
    unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    let exe = std::env::current_exe().map_err(err("current_exe"))?;
    let e = std::os::unix::process::CommandExt::exec(std::process::Command::new(exe).args([
        "exec-child",
        &fd.to_string(),
        &bytes.to_string(),
    ]));
    Err(format!("exec: {e}"))
}

fn timeout_mode(addr: SocketAddr) -> Result<()> {
    let start = Instant::now();
    match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            let secs = start.elapsed().as_secs_f64();
            println!("timed out after {secs:.2} s");
            Ok(())
        }
        Ok(_) => Err("connected, but the server was not expected to answer".into()),
        Err(e) => Err(format!("connect: {e} (expected a timeout)")),
    }
}

fn exchange(stream: &TcpStream, bytes: u64) -> Result<()> {
    probe::send_pattern(stream, 0, bytes).map_err(err("send"))?;
    finish(stream, bytes)
}

/// Half-closes, then checks the server's digest and reply.
fn finish(mut stream: &TcpStream, bytes: u64) -> Result<()> {
    stream.shutdown(Shutdown::Write).map_err(err("shutdown"))?;
    let mut head = [0u8; 16];
    stream.read_exact(&mut head).map_err(err("read digest"))?;
    let got = Digest::from_bytes(head);
    let want = Digest::of_pattern(bytes);
    if got != want {
        return Err(format!("server received {got:?}, sent {want:?}"));
    }
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).map_err(err("read reply"))?;
    if reply.len() as u64 != bytes || !probe::is_reply_pattern(&reply) {
        return Err(format!("bad reply: {} bytes, expected {bytes} of the pattern", reply.len()));
    }
    let _ = std::io::stdout().write_all(b"ok\n");
    Ok(())
}

fn err(what: &'static str) -> impl Fn(std::io::Error) -> String {
    move |e| format!("{what}: {e}")
}
