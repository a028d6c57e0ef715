//! A chunk's bytes, placed to start on a page boundary, in buffers used again.
//!
//! Direct I/O (`O_DIRECT`, `direct_io.rs`) needs the memory, the file offset and the
//! length all aligned to the device's block size. The sender reads each chunk into one
//! of these and the receiver's link reads each arriving chunk into one, so the usual
//! 1 MiB chunk is ready for a direct read or write without a bounce copy and without
//! `unsafe` aligned allocation: the vector is over-allocated and its first bytes pad up
//! to the boundary.
//!
//! Large buffers are used again once their chunk is sent (quinn let go of it) or
//! written. Allocated afresh, each came back from the allocator as new pages that the
//! kernel zeroes on first touch: a tenth of the sender's CPU at 100 Mbit/s x 50 ms
//! (`lab/2026-11-24-cpu-per-byte`) and a third of the receiver's in a 1 GiB
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

/// A vector with room for `want` bytes: an idle one of about that size if there is one
/// (at most twice it, so a small chunk never holds a large buffer), holding what it
/// last held, else a new, empty one.
fn room(want: usize) -> Vec<u8> {
    if want >= POOLED {
        let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
        let fits = idle.iter().position(|b| b.capacity() >= want && b.capacity() <= 2 * want);
        if let Some(at) = fits {
            return idle.swap_remove(at);
        }
    }
    Vec::with_capacity(want)
}

/// Where in `buf` the first page boundary is (0 when `align_offset` answers "cannot",
/// possible on exotic targets: then the bytes are unaligned and take the page cache).
fn boundary(buf: &[u8]) -> usize {
    let start = buf.as_ptr().align_offset(PAGE);
    if start < PAGE {
        start
    } else {
        0
    }
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
        let start = boundary(&buf);
        buf.resize(start, 0);
        PageBuf { buf, start }
    }

    /// `len` bytes starting on a page boundary, to be read into in place
    /// ([`PageBuf::pages_mut`]), then cut to what was read ([`PageBuf::truncate`]). A
    /// reused buffer keeps its old bytes (no zeroing per chunk); a new one is zeroed once.
    pub fn for_reading(len: usize) -> PageBuf {
        let whole = len.div_ceil(PAGE) * PAGE;
        let mut buf = room(whole + PAGE + SPARE);
        let start = boundary(&buf);
        buf.resize(start + whole, 0);
        PageBuf { buf, start }
    }

    /// The bytes and the rest of their last page: room for a direct read of whole pages.
    pub fn pages_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..]
    }

    /// Keeps the first `len` bytes.
    pub fn truncate(&mut self, len: usize) {
        self.buf.truncate(self.start + len);
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

impl AsRef<[u8]> for PageBuf {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
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
        && bytes.len().is_multiple_of(PAGE)
        && offset.is_multiple_of(PAGE as u64)
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
    fn a_buffer_read_into_in_place_is_aligned_and_whole_pages_long() {
        let mut buf = PageBuf::for_reading(PAGE + 10);
        assert_eq!(buf.pages_mut().len(), 2 * PAGE);
        assert_eq!(buf.pages_mut().as_ptr().align_offset(PAGE), 0);
        buf.pages_mut()[..PAGE + 10].fill(3);
        buf.truncate(PAGE + 10);
        assert_eq!(buf.len(), PAGE + 10);
        assert!(buf.iter().all(|&b| b == 3));
    }

    #[test]
    fn chunk_bytes_given_to_quinn_return_their_buffer_once_every_slice_is_gone() {
        let len = 1 << 20;
        let mut buf = PageBuf::for_reading(len);
        buf.pages_mut().fill(7);
        let at = buf.as_ptr();
        let wire = bytes::Bytes::from_owner(buf);
        let slice = wire.slice(10..20); // quinn may keep a slice after the whole
        drop(wire);
        assert_eq!(&slice[..], &[7u8; 10]);
        drop(slice);
        let next: Vec<PageBuf> = (0..KEEP).map(|_| PageBuf::for_reading(len)).collect();
        assert!(next.iter().any(|b| b.as_ptr() == at), "the buffer was not used again");
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
