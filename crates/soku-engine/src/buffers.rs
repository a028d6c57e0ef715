//! Chunk buffers kept for reuse on the sending side.
//!
//! Every chunk is read into a buffer of up to 1 MiB that quinn holds until the chunk is
//! acknowledged, a round trip later. Allocated afresh each time, such a buffer often
//! comes back from the allocator as new pages, and the kernel zeroes each page on first
//! touch: profiled at 100 Mbit/s x 50 ms, a tenth of the sender's CPU was page zeroing
//! (`bench/results/2026-11-24/cpu-per-byte/`). A buffer whose chunk was acknowledged
//! returns here instead, up to [`KEEP`] of them, and the next chunk is read into it.

use std::sync::Mutex;

use bytes::Bytes;

/// Idle buffers kept at most (each up to [`LARGEST`]): enough for the chunks read while
/// the previous ones are acknowledged at these rates, little next to what a long fast
/// path holds in flight anyway.
const KEEP: usize = 16;
/// Buffers larger than this are not kept (chunks are at most 1 MiB).
const LARGEST: usize = 2 << 20;

static IDLE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// An empty buffer with room for `len` bytes, reused when one is idle.
pub(crate) fn take(len: usize) -> Vec<u8> {
    let reused = IDLE.lock().ok().and_then(|mut idle| idle.pop());
    let mut buf = reused.unwrap_or_default();
    buf.clear();
    buf.reserve_exact(len);
    buf
}

/// Returns a buffer for reuse (dropped if the pool is full or it is oversized).
pub(crate) fn give_back(mut buf: Vec<u8>) {
    if buf.capacity() == 0 || buf.capacity() > LARGEST {
        return;
    }
    buf.clear();
    if let Ok(mut idle) = IDLE.lock() {
        if idle.len() < KEEP {
            idle.push(buf);
        }
    }
}

/// Wire bytes that give their buffer back once every reference (quinn's included) is
/// gone.
pub(crate) fn into_bytes(buf: Vec<u8>) -> Bytes {
    Bytes::from_owner(Returning(buf))
}

struct Returning(Vec<u8>);

impl AsRef<[u8]> for Returning {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Returning {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_chunk_gives_its_buffer_to_the_next() {
        let mut buf = take(1 << 20);
        buf.extend_from_slice(&[7u8; 1000]);
        let at = buf.as_ptr();
        let wire = into_bytes(buf);
        let slice = wire.slice(10..20); // quinn may keep a slice after the whole
        drop(wire);
        assert_eq!(&slice[..], &[7u8; 10]);
        drop(slice);
        // Other tests may take buffers meanwhile, so look for ours among a few.
        let next: Vec<Vec<u8>> = (0..KEEP).map(|_| take(1 << 20)).collect();
        assert!(next.iter().any(|b| b.as_ptr() == at), "the buffer was not reused");
        assert!(next.iter().all(|b| b.is_empty() && b.capacity() >= 1 << 20));
        next.into_iter().for_each(give_back);
    }

    #[test]
    fn oversized_buffers_are_not_kept() {
        let big = Vec::with_capacity(LARGEST + 1);
        let at = big.as_ptr();
        give_back(big);
        let next: Vec<Vec<u8>> = (0..KEEP).map(|_| take(10)).collect();
        assert!(next.iter().all(|b| b.as_ptr() != at));
        next.into_iter().for_each(give_back);
    }
}
