//! The preload probe's protocol: the `preload-probe` binary (the client, run under
//! `LD_PRELOAD`) and [`Server`] (in the test process) agree on it.
//!
//! The client sends N bytes of [`pattern_byte`] and half-closes; the server answers
//! with a 16-byte [`Digest`] of what it received, then N bytes of the reply pattern,
//! and closes. Both directions carry volume and both are checked.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// The client's byte at stream offset `i`.
pub fn pattern_byte(i: u64) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 13)) as u8
}

fn reply_byte(i: u64) -> u8 {
    (i.wrapping_mul(17).wrapping_add(5) ^ (i >> 11)) as u8
}

/// Whether `data` is the reply pattern from offset 0.
pub fn is_reply_pattern(data: &[u8]) -> bool {
    data.iter().enumerate().all(|(i, &b)| b == reply_byte(i as u64))
}

/// Writes the pattern's bytes `from..to`.
pub fn send_pattern(mut stream: &TcpStream, from: u64, to: u64) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut at = from;
    while at < to {
        let n = (to - at).min(buf.len() as u64) as usize;
        for (k, b) in buf[..n].iter_mut().enumerate() {
            *b = pattern_byte(at + k as u64);
        }
        stream.write_all(&buf[..n])?;
        at += n as u64;
    }
    Ok(())
}

/// A byte count and a 64-bit FNV-1a hash of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest {
    /// Bytes seen.
    pub len: u64,
    /// FNV-1a over them: cheap, and enough to tell a relayed stream from a garbled one.
    pub hash: u64,
}

impl Default for Digest {
    fn default() -> Self {
        Digest { len: 0, hash: 0xcbf2_9ce4_8422_2325 }
    }
}

impl Digest {
    /// Adds `data` to the count and the hash.
    pub fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.hash = (self.hash ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        self.len += data.len() as u64;
    }

    /// The digest of the first `n` bytes of the client pattern.
    pub fn of_pattern(n: u64) -> Digest {
        let mut d = Digest::default();
        for i in 0..n {
            d.update(&[pattern_byte(i)]);
        }
        d
    }

    /// The 16 bytes the server sends back: length, then hash, little-endian.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.len.to_le_bytes());
        out[8..].copy_from_slice(&self.hash.to_le_bytes());
        out
    }

    /// Reads what [`Digest::to_bytes`] wrote.
    pub fn from_bytes(b: [u8; 16]) -> Digest {
        let word =
            |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap_or_default());
        Digest { len: word(0..8), hash: word(8..16) }
    }
}

/// What the server saw on one connection.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// The client's address, as the server saw it.
    pub peer: SocketAddr,
    /// What the client sent.
    pub digest: Digest,
}

/// The probe's server on 127.0.0.1, one thread per connection, until dropped.
pub struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    /// Starts listening on an unused port of 127.0.0.1.
    pub fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the probe server");
        let addr = listener.local_addr().expect("probe server address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let record = Arc::clone(&record);
                std::thread::spawn(move || {
                    if let Some(s) = serve(stream) {
                        record.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                    }
                });
            }
        });
        Server { addr, seen }
    }

    /// Where the server listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The connections served completely so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

fn serve(mut stream: TcpStream) -> Option<Seen> {
    let peer = stream.peer_addr().ok()?;
    let mut digest = Digest::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => digest.update(&buf[..n]),
            Err(_) => return None,
        }
    }
    stream.write_all(&digest.to_bytes()).ok()?;
    let mut at = 0u64;
    while at < digest.len {
        let n = (digest.len - at).min(buf.len() as u64) as usize;
        for (k, b) in buf[..n].iter_mut().enumerate() {
            *b = reply_byte(at + k as u64);
        }
        stream.write_all(&buf[..n]).ok()?;
        at += n as u64;
    }
    stream.shutdown(Shutdown::Write).ok()?;
    Some(Seen { peer, digest })
}
