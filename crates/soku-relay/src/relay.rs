//! `soku relay`: a standalone TCP relay with socket-buffer options.
//!
//! One thread per direction per connection, at most [`MAX_CONNECTIONS`] at once
//! (more are refused by closing them). Each finished connection prints one line of
//! statistics on stderr: bytes each way, duration and rate.

use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::pump::pump;
use crate::sock::{self, Target};
use crate::{BufferOptions, RelayError};

/// Connections relayed at once; further ones are closed at once.
pub const MAX_CONNECTIONS: usize = 256;

/// Accepts on `listen` and relays each connection to `to` until stopped.
///
/// Prints `soku relay: listening on ADDR, relaying to HOST:PORT` on stderr first
/// (with the real port when `listen` asked for port 0).
pub fn run(listen: &str, to: &str, buffers: BufferOptions) -> Result<(), RelayError> {
    let listen_addr = parse_listen(listen)?;
    let target = Target::parse(to, "--to")?;
    target.resolve()?;
    let listener = sock::listen(listen_addr, buffers)?;
    let local =
        listener.local_addr().map_err(|e| RelayError::io("reading the bound address", e))?;
    eprintln!("soku relay: listening on {local}, relaying to {target}");
    serve(listener, target, buffers, MAX_CONNECTIONS)
}

/// `--listen`: an address literal with a port, or `HOST:PORT` that resolves.
fn parse_listen(listen: &str) -> Result<SocketAddr, RelayError> {
    if let Ok(addr) = listen.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let t = Target::parse(listen, "--listen").map_err(|_| RelayError::BadAddress {
        what: "--listen",
        value: listen.to_string(),
        example: "127.0.0.1:2222 or [::]:2222",
    })?;
    Ok(t.resolve()?[0]) // safe: resolve() returns at least one address
}

/// Relays every connection accepted on `listener` to `target`, at most `max` at once.
/// Returns only if accepting fails for good.
pub fn serve(
    listener: TcpListener,
    target: Target,
    buffers: BufferOptions,
    max: usize,
) -> Result<(), RelayError> {
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let (client, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) if transient(&e) => {
                eprintln!("soku relay: accept: {e}");
                // Out of fds or the peer gave up: back off briefly rather than spin.
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
            Err(e) => return Err(RelayError::io("accepting connections", e)),
        };
        if active.fetch_add(1, Ordering::SeqCst) >= max {
            active.fetch_sub(1, Ordering::SeqCst);
            eprintln!("soku relay: {peer}: refused, {max} connections already open");
            continue;
        }
        let (target, active) = (target.clone(), Arc::clone(&active));
        std::thread::spawn(move || {
            handle(client, peer, &target, buffers);
            active.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNABORTED | libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    ) || e.kind() == std::io::ErrorKind::Interrupted
}

/// Relays one connection both ways, then prints its statistics.
fn handle(client: TcpStream, peer: SocketAddr, target: &Target, buffers: BufferOptions) {
    let start = Instant::now();
    let _ = client.set_nodelay(true);
    let server = match sock::connect(target, buffers) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("soku relay: {peer}: {e}");
            return;
        }
    };
    let (up, down) = match (client.try_clone(), server.try_clone()) {
        (Ok(c), Ok(s)) => {
            let up = std::thread::spawn(move || one_way(&c, &s));
            (up, one_way(&server, &client))
        }
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("soku relay: {peer}: cloning sockets: {e}");
            return;
        }
    };
    let up = up.join().unwrap_or(Err(0));
    let secs = start.elapsed().as_secs_f64();
    let bytes = |r: Result<u64, u64>| r.unwrap_or_else(|n| n);
    let (u, d) = (bytes(up), bytes(down));
    let rate = (u.max(d) as f64) / secs.max(1e-9) / 1e6;
    let errors = if up.is_err() || down.is_err() { " (ended by an error)" } else { "" };
    eprintln!(
        "soku relay: {peer} -> {target}: {u} bytes up, {d} bytes down, {secs:.2} s, {rate:.1} MB/s{errors}"
    );
}

/// Copies `from` into `to`, then half-closes `to`; on an error closes both sockets
/// so the other direction ends too. `Err` carries the bytes copied before it.
fn one_way(from: &TcpStream, to: &TcpStream) -> Result<u64, u64> {
    match pump(from, to) {
        Ok(n) => {
            let _ = to.shutdown(Shutdown::Write);
            Ok(n)
        }
        Err(_) => {
            let _ = to.shutdown(Shutdown::Both);
            let _ = from.shutdown(Shutdown::Both);
            Err(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn relays_both_ways_with_half_close() {
        // An upper-casing echo server that answers after the client half-closes.
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let server_port = server.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut s, _) = server.accept().unwrap();
            let mut all = Vec::new();
            s.read_to_end(&mut all).unwrap();
            s.write_all(&all.to_ascii_uppercase()).unwrap();
        });
        let relay = TcpListener::bind("127.0.0.1:0").unwrap();
        let relay_addr = relay.local_addr().unwrap();
        let target = Target { host: "127.0.0.1".into(), port: server_port };
        std::thread::spawn(move || serve(relay, target, BufferOptions::default(), 4));

        let mut c = TcpStream::connect(relay_addr).unwrap();
        let data: Vec<u8> = (0..3_000_000).map(|i| b"abcdefgh"[i % 8]).collect();
        c.write_all(&data).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert_eq!(back, data.to_ascii_uppercase());
    }

    #[test]
    fn bad_addresses_are_one_line_errors() {
        for (listen, to, want) in [
            ("nonsense", "127.0.0.1:22", "bad --listen 'nonsense'"),
            ("127.0.0.1:0", "127.0.0.1", "bad --to '127.0.0.1'"),
            ("127.0.0.1:0", "no-such-host.invalid:22", "cannot resolve 'no-such-host.invalid'"),
        ] {
            let err = run(listen, to, BufferOptions::default()).unwrap_err().to_string();
            assert!(err.starts_with(want), "{listen} {to}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
