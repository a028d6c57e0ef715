//! The small-packet test (seeds/002): request/response exchanges over TCP across the
//! emulated path, with three ways of writing a length-prefixed message.
//!
//! What is measured, exactly: a TCP client in namespace A sends a message (a 4-byte
//! big-endian length, then the payload) to a server thread in namespace B, which reads
//! the whole message and answers with one write of the same framing and size; the time
//! of one exchange is from the client's first write to the last byte of the reply. The
//! server socket keeps the kernel defaults (Nagle on, delayed ACKs). The client writes
//!
//! - `two-writes`: length, then payload, as two `write`s, Nagle on (the 1992 program);
//! - `two-writes-nodelay`: the same with `TCP_NODELAY`;
//! - `one-write`: length and payload in one buffer, Nagle on. This is soku's framing
//!   discipline (`soku-proto`'s frame encoder builds header + payload as one buffer);
//!   soku itself is not run here, since it has no request/response API to time.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::Context;
use soku_netem::{Path, PathSpec};

/// Message sizes tried, bytes of payload.
pub const SIZES: [usize; 11] = [1, 64, 256, 512, 1000, 1400, 1448, 1460, 2000, 2896, 3000];

/// How the client writes a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Two writes, Nagle on.
    TwoWrites,
    /// Two writes, `TCP_NODELAY`.
    TwoWritesNoDelay,
    /// One write of length + payload, Nagle on (soku's framing).
    OneWrite,
}

impl Mode {
    /// All modes in output order.
    pub const ALL: [Mode; 3] = [Mode::TwoWrites, Mode::TwoWritesNoDelay, Mode::OneWrite];

    /// Name in the output.
    pub fn name(self) -> &'static str {
        match self {
            Mode::TwoWrites => "two-writes (Nagle on)",
            Mode::TwoWritesNoDelay => "two-writes TCP_NODELAY",
            Mode::OneWrite => "one-write (soku framing)",
        }
    }
}

/// Exchange times for one mode and size.
#[derive(Debug, Clone)]
pub struct SmallRow {
    /// The mode.
    pub mode: Mode,
    /// Payload bytes.
    pub size: usize,
    /// Median exchange time, ms.
    pub median_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// Exchanges timed.
    pub n: usize,
}

fn read_msg(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let n = u32::from_be_bytes(len) as usize;
    if n > 1 << 20 {
        return Err(std::io::Error::other("message too large"));
    }
    buf.resize(n, 0);
    s.read_exact(buf)?;
    Ok(n)
}

fn serve(listener: TcpListener, conns: usize) -> std::io::Result<()> {
    for _ in 0..conns {
        let (mut s, _) = listener.accept()?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut buf = Vec::new();
        while let Ok(n) = read_msg(&mut s, &mut buf) {
            let mut reply = (n as u32).to_be_bytes().to_vec();
            reply.extend_from_slice(&buf);
            s.write_all(&reply)?;
        }
    }
    Ok(())
}

/// Runs every mode and size on a fresh path of `rtt` (100 Mbit/s, no loss);
/// `exchanges` per size after 2 warm-up exchanges.
pub fn run(name: &str, rtt: Duration, exchanges: usize) -> anyhow::Result<Vec<SmallRow>> {
    let _ = Path::cleanup(name);
    let path = Path::up(name, PathSpec::symmetric(rtt, 0.0, Some(100_000_000)))?;
    let addr_b = path.addr_b();
    let listener = path.in_b(|| TcpListener::bind((addr_b, 0)))??;
    let port = listener.local_addr()?.port();
    let server = std::thread::spawn(move || serve(listener, Mode::ALL.len()));
    let mut rows = Vec::new();
    for mode in Mode::ALL {
        let mut s = path.in_a(|| TcpStream::connect((addr_b, port)))??;
        s.set_nodelay(mode == Mode::TwoWritesNoDelay)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut buf = Vec::new();
        for &size in &SIZES {
            let payload = vec![0x5au8; size];
            let mut times = Vec::with_capacity(exchanges);
            for i in 0..exchanges + 2 {
                let t0 = Instant::now();
                let len = (size as u32).to_be_bytes();
                if mode == Mode::OneWrite {
                    let mut frame = len.to_vec();
                    frame.extend_from_slice(&payload);
                    s.write_all(&frame)?;
                } else {
                    s.write_all(&len)?;
                    s.write_all(&payload)?;
                }
                let n = read_msg(&mut s, &mut buf).context("reading the reply")?;
                anyhow::ensure!(n == size && buf.iter().all(|&b| b == 0x5a), "bad reply");
                if i >= 2 {
                    times.push(t0.elapsed().as_secs_f64() * 1e3);
                }
            }
            times.sort_by(f64::total_cmp);
            let q = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
            rows.push(SmallRow { mode, size, median_ms: q(0.5), p90_ms: q(0.9), n: times.len() });
        }
    }
    server.join().map_err(|_| anyhow::anyhow!("server thread panicked"))??;
    path.down()?;
    Ok(rows)
}
