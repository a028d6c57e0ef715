//! The preload library driven directly by `preload-probe`, a client that connects the
//! ways real programs do (blocking, non-blocking with a timeout, after bind, from
//! threads, then fork or exec), against a server in this process that checks every
//! byte both ways. See `soku_testkit::probe` for the protocol.

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use soku_testkit::cmd::output_within;
use soku_testkit::probe::{Digest, Server};
use soku_testkit::{describe, preload_lib, preload_probe};

/// 3 MiB and a tail: more than the relay's buffers, not a multiple of them.
const BYTES: u64 = 3 * 1024 * 1024 + 4099;
const LIMIT: Duration = Duration::from_secs(60);

fn probe(mode: &str, addr: SocketAddr, bytes: u64) -> (Command, Output) {
    let mut cmd = Command::new(preload_probe());
    cmd.args([mode, &addr.to_string(), &bytes.to_string()])
        .env("LD_PRELOAD", preload_lib())
        .env("SOKU_PRELOAD", addr.port().to_string())
        .env("SOKU_PRELOAD_DEBUG", "1");
    let out = output_within(&mut cmd, LIMIT);
    (cmd, out)
}

/// Runs `mode` and checks: success, one verified exchange per connection, every
/// connection relayed, every relay process finished having carried all the bytes.
fn check(mode: &str, connections: usize) -> Vec<soku_testkit::probe::Seen> {
    let server = Server::start();
    let (cmd, out) = probe(mode, server.addr(), BYTES);
    let why = describe(&cmd, &out);
    assert!(out.status.success(), "{why}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("ok\n").count(), connections, "{why}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("soku-preload: relaying fd").count(), connections, "{why}");
    // The relay counts what it wrote each way: all the data, plus the 16-byte digest.
    let ended = format!("ended: {BYTES} bytes up, {} bytes down", BYTES + 16);
    assert_eq!(stderr.matches(&ended).count(), connections, "{why}");
    let seen = server.seen();
    assert_eq!(seen.len(), connections, "{why}");
    assert!(seen.iter().all(|s| s.digest == Digest::of_pattern(BYTES)), "{seen:?}\n{why}");
    seen
}

#[test]
fn preload_blocking_connect() {
    check("blocking", 1);
}

#[test]
fn preload_nonblocking_connect_checked_with_so_error() {
    check("nonblocking", 1);
}

#[test]
fn preload_nonblocking_connect_checked_with_getpeername() {
    check("connect-timeout", 1);
}

#[test]
fn preload_nonblocking_connect_never_checked_stays_direct() {
    // Nothing tells the library the connect completed: no relay, but nothing breaks.
    let server = Server::start();
    let (cmd, out) = probe("poll-then-write", server.addr(), BYTES);
    let why = describe(&cmd, &out);
    assert!(out.status.success() && out.stdout == b"ok\n", "{why}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("relaying"), "{why}");
    assert_eq!(server.seen().len(), 1, "{why}");
}

#[test]
fn preload_keeps_a_bind_before_connect() {
    let seen = check("bind", 1);
    assert_eq!(seen[0].peer.ip().to_string(), "127.0.0.2", "{seen:?}");
}

#[test]
fn preload_threads_connect_at_once() {
    check("threads", 4);
}

#[test]
fn preload_fd_shared_with_a_forked_child() {
    check("fork", 1);
}

#[test]
fn preload_fd_survives_exec() {
    check("exec", 1);
}

#[test]
fn preload_keeps_the_callers_connect_timeout() {
    // A listener with a backlog of 0 whose queue is full drops further SYNs, so a
    // connect to it neither succeeds nor fails: only the caller's timeout ends it.
    let listener =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    listener.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    let mut fillers = Vec::new();
    let full = (0..8).any(|_| {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            Ok(s) => {
                fillers.push(s);
                false
            }
            Err(_) => true,
        }
    });
    assert!(full, "could not fill the listen queue of {addr}");

    let start = Instant::now();
    let (cmd, out) = probe("timeout", addr, 0);
    let secs = start.elapsed().as_secs_f64();
    let why = describe(&cmd, &out);
    assert!(out.status.success(), "{why}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("timed out after"), "{why}");
    assert!(secs < 10.0, "the 1 s connect timeout took {secs:.1} s\n{why}");
}
