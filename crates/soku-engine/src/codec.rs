//! Turning file bytes into chunks on the wire and back: read, hash, compress (with `-C`,
//! when [`crate::compress_policy`] says so and the chunk shrinks), and the reverse,
//! checked against the header.

use bytes::Bytes;
use soku_proto::chunk::{chunk_hash, ChunkHeader};

use crate::page_buf::PageBuf;
use crate::source_file::SourceFile;

/// zstd level for `-C`: level 1 runs at several hundred MB/s per core, so compression
/// rarely becomes the bottleneck (the seeds' gzip turned 75 MB/s into 9 MB/s).
const ZSTD_LEVEL: i32 = 1;
/// A compressed chunk is sent only if it saves at least this share of the bytes;
/// otherwise the receiver's decompression would be work for nothing.
const MIN_SAVING: f64 = 0.10;

/// A chunk ready to send.
#[derive(Debug)]
pub struct Encoded {
    /// Its header (file and index filled in by the caller's arguments).
    pub header: ChunkHeader,
    /// Its wire bytes.
    pub wire: Bytes,
    /// How long compressing took, if it was tried.
    pub compress_time: Option<std::time::Duration>,
}

/// Reads chunk `index` (`len` bytes at `offset`) of `file`, hashes it unless its hash is
/// `known` already (hashed ahead, [`crate::ahead`]) and maybe compresses it.
pub fn read_chunk(
    source: &SourceFile,
    id: u32,
    index: u32,
    (offset, len): (u64, u32),
    known: Option<[u8; 32]>,
    compress: bool,
) -> std::io::Result<Encoded> {
    let plain = source.read(len as usize, offset)?;
    let hash = known.unwrap_or_else(|| chunk_hash(&plain));
    let mut header = ChunkHeader { file: id, index, wire_len: len, compressed: false, hash };
    let mut compress_time = None;
    if compress {
        let start = std::time::Instant::now();
        let packed = zstd::bulk::compress(&plain, ZSTD_LEVEL);
        compress_time = Some(start.elapsed());
        if let Ok(packed) = packed {
            if (packed.len() as f64) < plain.len() as f64 * (1.0 - MIN_SAVING) {
                // safe: packed is shorter than plain, whose length is a u32
                header.wire_len = packed.len() as u32;
                header.compressed = true;
                return Ok(Encoded { header, wire: Bytes::from(packed), compress_time });
            }
        }
    }
    // quinn holds the bytes until they are acknowledged; then the buffer is used again.
    Ok(Encoded { header, wire: Bytes::from_owner(plain), compress_time })
}

/// Recovers a chunk's plain bytes; `None` if compressed bytes do not decompress to
/// exactly `plain_len` bytes.
pub fn decode(header: &ChunkHeader, wire: PageBuf, plain_len: u32) -> Option<PageBuf> {
    if !header.compressed {
        return (wire.len() == plain_len as usize).then_some(wire);
    }
    let plain = zstd::bulk::decompress(&wire, plain_len as usize).ok()?;
    (plain.len() == plain_len as usize).then(|| PageBuf::from_vec(plain))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Test helper: `take` on an XOF reader.
    trait TakeExt {
        fn take(self, n: usize) -> Vec<u8>;
    }

    impl TakeExt for blake3::OutputReader {
        fn take(mut self, n: usize) -> Vec<u8> {
            let mut out = vec![0; n];
            self.fill(&mut out);
            out
        }
    }

    #[test]
    fn compressible_chunks_shrink_and_come_back() {
        let mut f = tempfile::tempfile().expect("tempfile");
        let text = b"the quick brown fox jumps over the lazy dog\n".repeat(1000);
        f.write_all(&text).expect("write");
        let f = SourceFile::new(f);
        let enc = read_chunk(&f, 3, 0, (0, text.len() as u32), None, true).expect("read");
        assert!(enc.header.compressed && enc.wire.len() < text.len() / 4);
        let wire = PageBuf::from_vec(enc.wire.to_vec());
        let plain = decode(&enc.header, wire, text.len() as u32).expect("decodes");
        assert_eq!(plain.bytes(), &text[..]);
        assert_eq!(enc.header.hash, chunk_hash(&text));
    }

    #[test]
    fn random_chunks_go_raw() {
        let mut f = tempfile::tempfile().expect("tempfile");
        let noise: Vec<u8> = blake3::Hasher::new().finalize_xof().take(65536);
        f.write_all(&noise).expect("write");
        let f = SourceFile::new(f);
        let enc = read_chunk(&f, 0, 0, (0, 65536), None, true).expect("read");
        assert!(!enc.header.compressed);
        assert_eq!(enc.wire.len(), 65536);
    }

    #[test]
    fn a_decompression_bomb_or_garbage_is_refused() {
        let header =
            ChunkHeader { file: 0, index: 0, wire_len: 4, compressed: true, hash: [0; 32] };
        assert!(decode(&header, PageBuf::from_vec(vec![1, 2, 3, 4]), 100).is_none());
        let bomb = zstd::bulk::compress(&vec![0u8; 1 << 20], 1).expect("compress");
        assert!(decode(&header, PageBuf::from_vec(bomb), 1000).is_none());
    }

    #[test]
    fn a_hash_known_ahead_is_sent_as_it_is() {
        let mut f = tempfile::tempfile().expect("tempfile");
        f.write_all(&[5u8; 100]).expect("write");
        let f = SourceFile::new(f);
        let enc = read_chunk(&f, 0, 0, (0, 100), Some([9; 32]), false).expect("read");
        assert_eq!(enc.header.hash, [9; 32]);
        assert_eq!(enc.wire.len(), 100);
    }

    #[test]
    fn a_short_read_is_an_error() {
        let f = SourceFile::new(tempfile::tempfile().expect("tempfile"));
        assert!(read_chunk(&f, 0, 0, (0, 10), None, false).is_err());
    }
}
