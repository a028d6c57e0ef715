//! The trailer after a partial file's bytes: the source's size and modification time
//! when the copy began (see [`super`]). The file-system work writes it when it creates a
//! partial file; resuming reads it back.

use std::fs::File;

use soku_proto::manifest::Meta;

/// Bytes of the trailer after a partial file's data.
pub const TRAILER_LEN: u64 = 40;
const TRAILER_MAGIC: &[u8; 8] = b"SOKUPRT1";

/// The source a partial file was started from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    /// The source's size.
    pub size: u64,
    /// Its modification time, seconds and nanoseconds.
    pub mtime: (i64, u32),
}

impl Trailer {
    /// The trailer for a file with this size and metadata.
    pub fn new(size: u64, meta: &Meta) -> Trailer {
        Trailer { size, mtime: (meta.mtime, meta.mtime_nsec) }
    }

    fn encode(&self) -> [u8; TRAILER_LEN as usize] {
        let mut out = [0u8; TRAILER_LEN as usize];
        out[..8].copy_from_slice(TRAILER_MAGIC);
        out[8..16].copy_from_slice(&self.size.to_le_bytes());
        out[16..24].copy_from_slice(&self.mtime.0.to_le_bytes());
        out[24..28].copy_from_slice(&self.mtime.1.to_le_bytes());
        let check = blake3::hash(&out[..32]);
        out[32..40].copy_from_slice(&check.as_bytes()[..8]);
        out
    }

    fn decode(bytes: &[u8; TRAILER_LEN as usize]) -> Option<Trailer> {
        let check = blake3::hash(&bytes[..32]);
        if &bytes[..8] != TRAILER_MAGIC || bytes[32..40] != check.as_bytes()[..8] {
            return None;
        }
        let u64_at = |at: usize| bytes[at..at + 8].try_into().ok().map(u64::from_le_bytes);
        let size = u64_at(8)?;
        let secs = i64::from_le_bytes(bytes[16..24].try_into().ok()?);
        let nsec = u32::from_le_bytes(bytes[24..28].try_into().ok()?);
        Some(Trailer { size, mtime: (secs, nsec) })
    }

    /// Writes the trailer after `size` bytes of `file`, which holds no more than that
    /// (a new file, or one just filled to `size`): the write itself extends it, leaving a
    /// hole where chunks are still to come, so no `ftruncate` is needed first.
    pub fn write_to(&self, file: &File) -> std::io::Result<()> {
        crate::sys::write_all_at(file, &self.encode(), self.size)
    }

    /// Reads the trailer of `file`, if it has a valid one.
    pub(super) fn read_from(file: &File) -> std::io::Result<Option<Trailer>> {
        let len = file.metadata()?.len();
        if len < TRAILER_LEN {
            return Ok(None);
        }
        let mut bytes = [0u8; TRAILER_LEN as usize];
        crate::sys::read_exact_at(file, &mut bytes, len - TRAILER_LEN)?;
        Ok(Trailer::decode(&bytes).filter(|t| t.size + TRAILER_LEN == len))
    }

    /// Why a partial file of `self` cannot continue a copy of `wanted`, if it cannot.
    pub(super) fn differs_from(&self, wanted: &Trailer) -> Option<String> {
        if self.size != wanted.size {
            Some(format!(
                "the source's size changed ({} -> {} bytes) since the interrupted copy",
                self.size, wanted.size
            ))
        } else if self.mtime != wanted.mtime {
            Some("the source was modified since the interrupted copy".into())
        } else {
            None
        }
    }
}
