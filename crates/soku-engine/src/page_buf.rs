//! A received chunk's bytes, placed to start on a page boundary.
//!
//! The receiver writes a chunk straight to the disk (`O_DIRECT`, see
//! `receive/files.rs`) only when the memory, the file offset and the length are all
//! aligned to the device's block size; anything else goes through the page cache. The
//! link reads each chunk into one of these, so the usual 1 MiB chunk arrives ready for a
//! direct write, without a bounce copy and without `unsafe` aligned allocation: the
//! vector is over-allocated and its first bytes pad up to the boundary.
//!
//! Large buffers are used again once their chunk is written, as the sender's are
//! (`buffers.rs`): allocated afresh, each came back from the allocator as new pages
//! that the kernel zeroes on first touch, a third of the receiver's CPU in a 1 GiB
//! loopback copy (`perf`: `clear_page_erms`).

use std::ops::Deref;
use std::sync::Mutex;

/// The alignment a direct write needs at most on Linux block devices (logical block
/// sizes are 512 or 4096 bytes), and the page size of the machines soku runs on.
pub const PAGE: usize = 4096;

/// Room kept beyond the bytes, so that a reader filling the vector's spare capacity
/// (tokio's `read_to_end` grows a vector with less than 32 bytes spare) never moves it
/// off the boundary.
const SPARE: usize = 64;

/// Buffers this large or larger are kept for reuse: chunks of large files. Smaller ones
/// (small files' chunks) are the allocator's business.
const POOLED: usize = 256 << 10;
/// Idle buffers kept at most: the chunks being read, checked and written at once.
const KEEP: usize = 16;

static IDLE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// An empty vector with room for `want` bytes: an idle one of about that size if there
/// is one (at most twice it, so a small chunk never holds a large buffer).
fn room(want: usize) -> Vec<u8> {
    if want >= POOLED {
        let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
        let fits = idle.iter().position(|b| b.capacity() >= want && b.capacity() <= 2 * want);
        if let Some(at) = fits {
            let mut buf = idle.swap_remove(at);
            buf.clear();
            return buf;
        }
    }
    Vec::with_capacity(want)
}

/// Owned bytes that start on a page boundary when made by [`PageBuf::with_room`].
#[derive(Debug, Default)]
pub struct PageBuf {
    /// Padding up to the boundary, then the bytes.
    buf: Vec<u8>,
    /// Where the bytes start in `buf`.
    start: usize,
}

impl PageBuf {
    /// An empty buffer with room for `len` bytes that will start on a page boundary.
    pub fn with_room(len: usize) -> PageBuf {
        let mut buf = room(len + PAGE + SPARE);
        // `align_offset` may answer "cannot" (usize::MAX) on exotic targets: then the
        // bytes start at 0, unaligned, and are written through the page cache.
        let start = buf.as_ptr().align_offset(PAGE);
        let start = if start < PAGE { start } else { 0 };
        buf.resize(start, 0);
        PageBuf { buf, start }
    }

    /// A copy of `bytes`, starting on a page boundary.
    pub fn copy_of(bytes: &[u8]) -> PageBuf {
        let mut buf = PageBuf::with_room(bytes.len());
        buf.buf.extend_from_slice(bytes);
        buf
    }

    /// Bytes as they are, wherever they start (a decompressed chunk, a test's bytes).
    pub fn from_vec(buf: Vec<u8>) -> PageBuf {
        PageBuf { buf, start: 0 }
    }

    /// The vector the bytes are appended to; its first bytes are the padding.
    pub fn appending(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        if buf.capacity() >= POOLED {
            let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < KEEP {
                idle.push(buf);
            }
        }
    }
}

impl Deref for PageBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

/// Whether `bytes` written at `offset` meet a direct write's alignment: memory, offset
/// and length all multiples of [`PAGE`].
pub fn direct_writable(bytes: &[u8], offset: u64) -> bool {
    !bytes.is_empty()
        && bytes.as_ptr().align_offset(PAGE) == 0
        && bytes.len() % PAGE == 0
        && offset % PAGE as u64 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_appended_start_on_a_page_boundary_and_stay_there() {
        for len in [1usize, 4096, 1 << 20] {
            let mut buf = PageBuf::with_room(len);
            let at = buf.appending().capacity();
            buf.appending().extend(std::iter::repeat_n(7u8, len));
            assert_eq!(buf.appending().capacity(), at, "the vector grew and moved");
            assert_eq!(buf.len(), len);
            assert!(buf.iter().all(|&b| b == 7));
            assert_eq!(buf.as_ptr().align_offset(PAGE), 0);
        }
    }

    #[test]
    fn a_large_buffer_is_used_again_and_a_small_chunk_does_not_take_it() {
        let len = 1 << 20;
        let first = PageBuf::copy_of(&vec![5u8; len]);
        let at = first.as_ptr();
        drop(first);
        // Other tests may take buffers meanwhile, so look for ours among a few.
        let next: Vec<PageBuf> = (0..KEEP).map(|_| PageBuf::with_room(len)).collect();
        assert!(next.iter().any(|b| b.as_ptr() == at), "the buffer was not used again");
        assert!(next.iter().all(|b| b.is_empty() && b.as_ptr().align_offset(PAGE) == 0));
        drop(next);
        let small = PageBuf::with_room(POOLED / 4);
        assert!(small.buf.capacity() < POOLED, "a small chunk took a pooled buffer");
    }

    #[test]
    fn direct_writes_need_memory_offset_and_length_aligned() {
        let buf = PageBuf::copy_of(&[1; 2 * PAGE]);
        assert!(direct_writable(&buf, 0));
        assert!(direct_writable(&buf, 3 * PAGE as u64));
        assert!(!direct_writable(&buf, 512), "offset off the boundary");
        assert!(!direct_writable(&buf[..PAGE + 1], 0), "length off the boundary");
        assert!(!direct_writable(&buf[1..PAGE + 1], 0), "memory off the boundary");
        assert!(!direct_writable(&[], 0), "nothing to write");
        assert_eq!(PageBuf::from_vec(vec![1, 2, 3]).bytes(), &[1, 2, 3]);
    }
}
