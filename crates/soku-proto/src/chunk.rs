//! Chunks: the unit of data transfer and verification.
//!
//! A file of `size` bytes is cut into `ceil(size / chunk_size)` chunks (an empty file has
//! none). Each chunk travels with the BLAKE3 hash of its plain bytes; the file's root hash
//! is BLAKE3 over the chunk hashes in index order, keyed by nothing but bound to the
//! file size, so a receiver that has verified every chunk and the root knows it holds
//! exactly the sender's file.

use serde::{Deserialize, Serialize};

use crate::ProtoError;

/// The default chunk size: large enough that per-chunk costs vanish, small enough that
/// many chunks are in flight at once.
pub const DEFAULT_CHUNK_SIZE: u32 = 1 << 20;
/// Smallest chunk size a peer may ask for.
pub const MIN_CHUNK_SIZE: u32 = 16 << 10;
/// Largest chunk size a peer may ask for (bounds the receiver's memory per chunk).
pub const MAX_CHUNK_SIZE: u32 = 16 << 20;

/// Header of one chunk on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkHeader {
    /// The file id from the manifest.
    pub file: u32,
    /// The chunk's index within the file.
    pub index: u32,
    /// Length of the bytes on the wire that follow the header.
    pub wire_len: u32,
    /// Whether the wire bytes are zstd-compressed.
    pub compressed: bool,
    /// BLAKE3 of the plain bytes.
    pub hash: [u8; 32],
}

/// Checks a chunk size a peer asked for.
pub fn check_chunk_size(size: u32) -> Result<u32, ProtoError> {
    if (MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE).contains(&size) {
        Ok(size)
    } else {
        Err(ProtoError::Violation(format!(
            "chunk size {size} outside {MIN_CHUNK_SIZE}..={MAX_CHUNK_SIZE}"
        )))
    }
}

/// How a file of a given size is cut into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkPlan {
    size: u64,
    chunk_size: u32,
}

impl ChunkPlan {
    /// The plan for a file of `size` bytes.
    pub fn new(size: u64, chunk_size: u32) -> Self {
        Self { size, chunk_size: chunk_size.max(1) }
    }

    /// Number of chunks (0 for an empty file).
    pub fn count(&self) -> u64 {
        self.size.div_ceil(u64::from(self.chunk_size))
    }

    /// Offset and plain length of chunk `index`, or `None` past the end.
    pub fn span(&self, index: u32) -> Option<(u64, u32)> {
        let offset = u64::from(index).checked_mul(u64::from(self.chunk_size))?;
        if offset >= self.size {
            return None;
        }
        // safe: the remainder is at most chunk_size, which is a u32
        let len = (self.size - offset).min(u64::from(self.chunk_size)) as u32;
        Some((offset, len))
    }
}

/// BLAKE3 of a chunk's plain bytes.
pub fn chunk_hash(plain: &[u8]) -> [u8; 32] {
    *blake3::hash(plain).as_bytes()
}

/// The file's root hash: BLAKE3 over the size and the chunk hashes in index order.
pub fn root_hash<'a>(size: u64, chunk_hashes: impl IntoIterator<Item = &'a [u8; 32]>) -> [u8; 32] {
    let mut hasher = RootHasher::new(size);
    for hash in chunk_hashes {
        hasher.update(hash);
    }
    hasher.finalize()
}

/// [`root_hash`] computed as chunk hashes become known, so that whoever computes it need
/// not keep every chunk hash of a file until the last one is in (the sender,
/// [`crate::send`]).
#[derive(Debug, Clone)]
pub struct RootHasher(blake3::Hasher);

impl RootHasher {
    /// Starts the root hash of a file of `size` bytes.
    pub fn new(size: u64) -> Self {
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"soku root v1");
        hasher.update(&size.to_le_bytes());
        Self(hasher)
    }

    /// Adds the next chunk hash; hashes must come in index order.
    pub fn update(&mut self, chunk_hash: &[u8; 32]) {
        self.0.update(chunk_hash);
    }

    /// The root hash over the chunk hashes added so far.
    pub fn finalize(&self) -> [u8; 32] {
        *self.0.finalize().as_bytes()
    }
}

/// Largest wire length we accept for a chunk of `plain_len` bytes: compression may not
/// grow a chunk beyond zstd's worst case (plain + plain/128 + a small constant).
pub fn max_wire_len(plain_len: u32, compressed: bool) -> u32 {
    if compressed {
        plain_len.saturating_add(plain_len / 128).saturating_add(1024)
    } else {
        plain_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_the_file_exactly() {
        let plan = ChunkPlan::new(10, 4);
        assert_eq!(plan.count(), 3);
        assert_eq!(plan.span(0), Some((0, 4)));
        assert_eq!(plan.span(2), Some((8, 2)));
        assert_eq!(plan.span(3), None);
        assert_eq!(ChunkPlan::new(0, 4).count(), 0);
        assert_eq!(ChunkPlan::new(8, 4).span(1), Some((4, 4)));
    }

    #[test]
    fn plan_handles_files_over_4_gib() {
        let size = 5u64 << 30;
        let plan = ChunkPlan::new(size, DEFAULT_CHUNK_SIZE);
        assert_eq!(plan.count(), 5 * 1024);
        let last = u32::try_from(plan.count() - 1).expect("fits");
        assert_eq!(
            plan.span(last),
            Some((size - u64::from(DEFAULT_CHUNK_SIZE), DEFAULT_CHUNK_SIZE))
        );
        assert_eq!(plan.span(u32::MAX), None);
    }

    #[test]
    fn root_hash_depends_on_order_and_size() {
        let (a, b) = (chunk_hash(b"a"), chunk_hash(b"b"));
        assert_ne!(root_hash(2, [&a, &b]), root_hash(2, [&b, &a]));
        assert_ne!(root_hash(2, [&a, &b]), root_hash(3, [&a, &b]));
    }

    #[test]
    fn root_hasher_matches_root_hash() {
        let (a, b) = (chunk_hash(b"a"), chunk_hash(b"b"));
        let mut hasher = RootHasher::new(2);
        hasher.update(&a);
        hasher.update(&b);
        assert_eq!(hasher.finalize(), root_hash(2, [&a, &b]));
        assert_eq!(RootHasher::new(0).finalize(), root_hash(0, []));
    }

    #[test]
    fn chunk_sizes_out_of_range_are_refused() {
        assert!(check_chunk_size(DEFAULT_CHUNK_SIZE).is_ok());
        assert!(check_chunk_size(0).is_err());
        assert!(check_chunk_size(MAX_CHUNK_SIZE + 1).is_err());
    }
}
