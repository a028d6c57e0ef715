//! Positional reads of a whole range into a reusable buffer: the sender's chunks hashed
//! ahead, and the receiver's held bytes hashed or read back, all read this way.

use std::fs::File;

use crate::failure::SourceShrank;

/// Reads `len` bytes at `offset` into `buf` (replacing its content), straight into its
/// spare capacity: no zeroing first (that memset was ~1 % of a loopback copy's CPU).
pub(crate) fn read_exact_at(
    file: &File,
    len: usize,
    offset: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<()> {
    buf.clear();
    buf.reserve_exact(len);
    while buf.len() < len {
        let at = offset + buf.len() as u64;
        let n = crate::sys::read_into_spare(file, buf, at)?;
        if n == 0 {
            return Err(SourceShrank::io());
        }
    }
    // The allocator may have granted more capacity than asked; bytes read past the
    // chunk belong to the next one.
    buf.truncate(len);
    Ok(())
}
