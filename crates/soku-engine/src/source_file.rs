//! A source file being read in chunks: through the page cache where its bytes are
//! cached, straight from the disk where they are not.
//!
//! A file read once for a copy gains nothing from the page cache: reading it through
//! the cache costs a copy of every byte into the chunk's buffer, pages to allocate, and
//! the eviction of whatever else was cached (`lab/2026-11-24-loopback-disk`:
//! the cache's copy was the largest cost of a cold 1 GiB copy's sender). A chunk whose
//! first page is not cached is read with `O_DIRECT` into page-aligned memory
//! (`page_buf.rs`); one that is cached (a file just written, or read again) is copied
//! from the cache, which is faster than the disk. Only for large chunks, and where
//! direct I/O applies (`direct_io.rs`); everything else takes the page cache as before.

use std::fs::File;
use std::sync::OnceLock;

use crate::direct_io::{self, open_direct, Access};
use crate::page_buf::PageBuf;

/// An open source file and, once a chunk was not cached, its direct descriptor.
#[derive(Debug)]
pub struct SourceFile {
    file: File,
    /// Opened at the first chunk that was not cached; `None` where refused.
    direct: OnceLock<Option<File>>,
    #[cfg(test)]
    direct_reads: std::sync::atomic::AtomicU32,
}

impl SourceFile {
    /// A source read through `file`.
    pub fn new(file: File) -> SourceFile {
        SourceFile {
            file,
            direct: OnceLock::new(),
            #[cfg(test)]
            direct_reads: Default::default(),
        }
    }

    /// The file as opened.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Reads exactly `len` bytes at `offset`.
    pub fn read(&self, len: usize, offset: u64) -> std::io::Result<PageBuf> {
        let mut buf = PageBuf::for_reading(len);
        if let Some(direct) = self.direct_for(len, offset) {
            match read_exact(direct, buf.pages_mut(), len, offset) {
                Ok(()) => {
                    #[cfg(test)]
                    self.direct_reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    buf.truncate(len);
                    return Ok(buf);
                }
                // The page cache reads it, and tells what went wrong if anything did
                // (a file that shrank ends a direct read off the page boundary).
                Err(e) if direct_io::refused(&e) => {}
                Err(e) => return Err(e),
            }
        }
        read_exact(&self.file, &mut buf.pages_mut()[..len], len, offset)?;
        buf.truncate(len);
        Ok(buf)
    }

    /// The direct descriptor to read `len` bytes at `offset` with, if they are worth it
    /// and not cached. The cache is probed only where direct reads apply.
    fn direct_for(&self, len: usize, offset: u64) -> Option<&File> {
        if !direct_io::worth_it(len, offset) {
            return None;
        }
        let direct = self.direct()?;
        (!self.cached(offset)).then_some(direct)
    }

    /// Whether the page at `offset` is in the page cache (`crate::sys::cached`).
    pub(crate) fn cached(&self, offset: u64) -> bool {
        crate::sys::cached(&self.file, offset)
    }

    /// The direct descriptor, opened at the first call. Once it is there the page cache
    /// is told to read only what is asked (`POSIX_FADV_RANDOM`): a probe that misses
    /// then loads one page, not a readahead window the direct read would read again.
    fn direct(&self) -> Option<&File> {
        let direct = self.direct.get_or_init(|| {
            let direct = open_direct(&self.file, Access::Read).ok()?;
            // Advice only: refused, the probes cost some readahead.
            crate::sys::read_only_what_is_asked(&self.file);
            Some(direct)
        });
        direct.as_ref()
    }
}

/// Reads `len` bytes at `offset` into the front of `dest`, which may be longer (a direct
/// read asks for whole pages and gets at most the rest of the file).
fn read_exact(file: &File, dest: &mut [u8], len: usize, offset: u64) -> std::io::Result<()> {
    let mut got = 0;
    while got < len {
        let n = crate::sys::read_at(file, &mut dest[got..], offset + got as u64)?;
        if n == 0 {
            return Err(crate::failure::SourceShrank::io());
        }
        got += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::atomic::Ordering;

    use super::*;

    /// A file of `len` patterned bytes in the test's temporary directory, flushed.
    fn written(len: usize) -> (tempfile::NamedTempFile, Vec<u8>) {
        let want: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(&want).expect("write");
        f.as_file().sync_all().expect("sync");
        (f, want)
    }

    #[test]
    fn cached_chunks_are_copied_and_evicted_ones_read_from_the_disk() {
        let len = (2 << 20) + 1000;
        let (f, want) = written(len);
        let source = SourceFile::new(File::open(f.path()).expect("open"));
        // Just written: in the page cache.
        assert_eq!(&source.read(1 << 20, 0).expect("read")[..], &want[..1 << 20]);
        assert_eq!(source.direct_reads.load(Ordering::Relaxed), 0);
        // Evicted where the system takes the advice (flushed above, so it drops every
        // page).
        crate::sys::drop_cached(source.file(), 0, 0);
        let second = source.read(1 << 20, 1 << 20).expect("read");
        assert_eq!(&second[..], &want[1 << 20..2 << 20]);
        let last = source.read(1000, 2 << 20).expect("read the tail");
        assert_eq!(&last[..], &want[2 << 20..]);
        let direct = open_direct(source.file(), Access::Read).is_ok();
        // The file system of the test's temporary directory decides (ext4, XFS, Btrfs
        // and F2FS read directly; tmpfs keeps everything cached anyway).
        if direct {
            // The evicted 1 MiB chunk; the 1000-byte tail is too small to bother.
            assert_eq!(source.direct_reads.load(Ordering::Relaxed), 1, "evicted chunks");
        }
    }

    #[test]
    fn a_file_that_shrank_is_told_as_such_either_way() {
        let (f, _) = written(3 << 20);
        let source = SourceFile::new(File::open(f.path()).expect("open"));
        f.as_file().set_len((1 << 20) + 100).expect("shrink");
        for cached in [false, true] {
            if !cached {
                crate::sys::drop_cached(source.file(), 0, 0);
            }
            let err = source.read(1 << 20, 1 << 20).map(|_| ()).expect_err("it shrank");
            let shrank = err.get_ref().is_some_and(|e| e.is::<crate::failure::SourceShrank>());
            assert!(shrank, "cached {cached}: {err}");
        }
    }
}
