//! `ssh.exe` for soku's Windows build under Wine, in tests only.
//!
//! Wine (8.0) cannot hand a Windows pipe to a Unix process: a Linux `ssh` started by
//! the Windows build gets `/dev/null` for its stdin and stdout. This program is a
//! Windows one, so it gets the pipes. It sends its arguments over a TCP connection to
//! `%SOKU_SSH_BRIDGE%` (`127.0.0.1:PORT`), where the test runs the real
//! `/usr/bin/ssh` with them (`crates/soku/tests/e2e/wine_e2e.rs`), and then carries
//! its stdin and stdout both ways. ssh's stderr stays with the test; its exit status
//! is not carried: this shim exits 0 once the bridge closes, 255 if it cannot reach
//! it. No dependencies, so it builds with `rustc` alone:
//!
//!     rustc --edition 2021 --target x86_64-pc-windows-gnu -O scripts/wine/ssh_shim.rs -o ssh.exe
//!
//! Wire: each argument followed by a NUL byte, then one more NUL; then the streams.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};

fn main() {
    let Some(bridge) = std::env::var_os("SOKU_SSH_BRIDGE") else {
        eprintln!("ssh shim: SOKU_SSH_BRIDGE is not set");
        std::process::exit(255);
    };
    let mut socket = match TcpStream::connect(bridge.to_string_lossy().as_ref()) {
        Ok(socket) => socket,
        Err(e) => {
            eprintln!("ssh shim: {}: {e}", bridge.to_string_lossy());
            std::process::exit(255);
        }
    };
    let _ = socket.set_nodelay(true);
    let mut head = Vec::new();
    for arg in std::env::args().skip(1) {
        head.extend_from_slice(arg.as_bytes());
        head.push(0);
    }
    head.push(0);
    if socket.write_all(&head).is_err() {
        std::process::exit(255);
    }
    let mut upward = socket.try_clone().expect("a second handle of the socket");
    std::thread::spawn(move || {
        pump(&mut std::io::stdin().lock(), &mut upward);
        let _ = upward.shutdown(Shutdown::Write);
    });
    pump(&mut socket, &mut std::io::stdout().lock());
}

/// Carries what `from` reads to `to` as it comes, until either side ends.
fn pump(from: &mut impl Read, to: &mut impl Write) {
    let mut buf = vec![0u8; 64 << 10];
    while let Ok(n @ 1..) = from.read(&mut buf) {
        if to.write_all(&buf[..n]).and_then(|()| to.flush()).is_err() {
            return;
        }
    }
}
