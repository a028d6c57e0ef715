//! One direction of a relay: read into a large buffer, write it all, repeat until EOF.

use std::io::{ErrorKind, Read, Write};

/// Bytes read per call: large, so one wake-up moves a lot and the kernel's socket
/// buffers on both sides stay full.
pub const BUF_SIZE: usize = 1 << 20;

/// Copies `from` into `to` until `from` reports end of file; returns the bytes copied.
///
/// Every chunk is written (and flushed) as soon as it is read: nothing small is held
/// back. The caller half-closes the destination afterwards.
pub fn pump(mut from: impl Read, mut to: impl Write) -> std::io::Result<u64> {
    let mut buf = vec![0u8; BUF_SIZE];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        to.flush()?;
        total += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_everything() {
        let data: Vec<u8> = (0..3 * BUF_SIZE + 17).map(|i| (i * 31 % 251) as u8).collect();
        let mut out = Vec::new();
        assert_eq!(pump(&data[..], &mut out).unwrap(), data.len() as u64);
        assert_eq!(out, data);
    }
}
