//! Frames on a byte stream: the readers of control frames and chunks (the writer is
//! [`super::control_writer`]).

use soku_proto::chunk::ChunkHeader;
use soku_proto::frame::{self, MAX_CONTROL_FRAME, PREFIX_LEN};
use soku_proto::message::Message;
use soku_proto::ProtoError;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use super::{ChunkMemory, Inbound};
use crate::page_buf::PageBuf;
use crate::LinkError;

/// Reads one control frame; `Ok(None)` at a clean end of stream.
pub async fn read_message<R: AsyncRead + Unpin>(
    input: &mut R,
) -> Result<Option<Message>, LinkError> {
    read_frame(input, MAX_CONTROL_FRAME).await
}

/// Reads one frame of at most `limit` bytes; `Ok(None)` at a clean end of stream.
pub async fn read_frame<R: AsyncRead + Unpin, T: serde::de::DeserializeOwned>(
    input: &mut R,
    limit: usize,
) -> Result<Option<T>, LinkError> {
    let mut prefix = [0u8; PREFIX_LEN];
    let mut got = 0;
    while got < PREFIX_LEN {
        let n = input.read(&mut prefix[got..]).await?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(ProtoError::Truncated.into());
        }
        got += n;
    }
    let len = frame::payload_len(prefix, limit)?;
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload).await.map_err(truncated)?;
    Ok(Some(frame::decode_payload(&payload)?))
}

fn truncated(e: std::io::Error) -> LinkError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        ProtoError::Truncated.into()
    } else {
        e.into()
    }
}

/// Bytes of an arriving chunk hashed at a time (see [`read_bytes`]): large enough for
/// BLAKE3's wide SIMD paths, small enough to be hashed from this core's cache.
const HASH_PIECE: usize = 64 << 10;

/// Reads exactly `len` bytes (a chunk's wire bytes), starting on a page boundary (see
/// [`PageBuf`]). The buffer is reserved, not zeroed: reads fill its spare capacity
/// directly, which saves a memset per chunk.
///
/// With `hash` (a chunk sent as it is, whose wire bytes are its plain bytes), also
/// their BLAKE3 hash, taken piece by piece as they arrive, while each piece is still in
/// the cache of the core that copied it in. Hashing the whole chunk later, on the
/// blocking thread that writes it, read it back from memory: the receiver hashed at
/// about 4 GB/s there against 5.8 GB/s for the sender hashing a chunk it had just read
/// (`lab/2026-11-26-cpu-where`).
pub async fn read_bytes<R: AsyncRead + Unpin>(
    input: &mut R,
    len: u32,
    hash: bool,
) -> Result<(PageBuf, Option<[u8; 32]>), LinkError> {
    let len = len as usize;
    let mut data = PageBuf::with_room(len);
    // `appending` holds the padding up to the page boundary before the bytes.
    let start = data.appending().len();
    let mut hasher = hash.then(blake3::Hasher::new);
    let mut hashed = start;
    let mut input = (&mut *input).take(len as u64);
    loop {
        let buf = data.appending();
        let read = input.read_buf(buf).await?;
        let filled = buf.len();
        let done = read == 0 || filled - start == len;
        if let Some(hasher) = hasher.as_mut() {
            if done || filled - hashed >= HASH_PIECE {
                hasher.update(&buf[hashed..filled]);
                hashed = filled;
            }
        }
        if done {
            break;
        }
    }
    if data.len() != len {
        return Err(ProtoError::Truncated.into());
    }
    Ok((data, hasher.map(|h| *h.finalize().as_bytes())))
}

/// Reads control frames from `input` into `inbox` until the stream ends. With
/// `chunks`, a [`Message::Chunk`] header is followed by the chunk's bytes (an ordered
/// byte stream); without, it is passed on as a control message (for the role to refuse).
pub(crate) async fn read_loop<R: AsyncRead + Unpin>(
    mut input: R,
    inbox: mpsc::Sender<Result<Inbound, LinkError>>,
    chunks: Option<ChunkMemory>,
) {
    loop {
        let inbound = match read_message(&mut input).await {
            Ok(None) => Ok(Inbound::Closed),
            Ok(Some(Message::Chunk(header))) if chunks.is_some() => {
                let Some(memory) = &chunks else { return };
                read_chunk_body(&mut input, memory, &header).await.map(Inbound::Chunk)
            }
            Ok(Some(msg)) => Ok(Inbound::Control(msg)),
            Err(e) => Err(e),
        };
        let last = !matches!(inbound, Ok(Inbound::Control(_) | Inbound::Chunk(_)));
        if inbox.send(inbound).await.is_err() || last {
            return;
        }
    }
}

/// Reads the bytes of the chunk whose header was just read.
pub(crate) async fn read_chunk_body<R: AsyncRead + Unpin>(
    input: &mut R,
    memory: &ChunkMemory,
    header: &ChunkHeader,
) -> Result<super::Incoming, LinkError> {
    let slot = memory.admit(header).await?;
    let (wire, hash) = read_bytes(input, header.wire_len, !header.compressed).await?;
    Ok(slot.fill(wire, hash))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page_buf::PAGE;
    use tokio::io::AsyncWriteExt;

    /// `bytes` through a pipe `piece` bytes at a time (as a QUIC stream hands a chunk
    /// over, a few datagrams per read), read back as a chunk of `len` bytes.
    async fn read_in_pieces(
        bytes: Vec<u8>,
        piece: usize,
        len: u32,
        hash: bool,
    ) -> Result<(PageBuf, Option<[u8; 32]>), LinkError> {
        let (mut tx, mut rx) = tokio::io::duplex(piece);
        let writer = tokio::spawn(async move {
            for p in bytes.chunks(piece) {
                tx.write_all(p).await?;
            }
            std::io::Result::Ok(())
        });
        let got = read_bytes(&mut rx, len, hash).await;
        drop(rx);
        let _ = writer.await;
        got
    }

    #[tokio::test]
    async fn a_chunk_read_in_pieces_is_hashed_as_a_whole() {
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let len = bytes.len() as u32;
        let whole = *blake3::hash(&bytes).as_bytes();
        for piece in [1_000, 65_536, 300_000] {
            let (data, hash) = read_in_pieces(bytes.clone(), piece, len, true).await.unwrap();
            assert_eq!(data.bytes(), &bytes[..], "{piece}-byte pieces");
            assert_eq!(hash, Some(whole), "{piece}-byte pieces");
            assert_eq!(data.bytes().as_ptr() as usize % PAGE, 0, "not on a page boundary");
        }
        let (data, hash) = read_in_pieces(bytes.clone(), 4_096, len, false).await.unwrap();
        assert_eq!((data.bytes(), hash), (&bytes[..], None));
    }

    #[tokio::test]
    async fn a_chunk_cut_short_is_refused() {
        let got = read_in_pieces(vec![5; 10_000], 1_000, 20_000, true).await;
        assert!(matches!(got, Err(LinkError::Protocol(ProtoError::Truncated))), "{got:?}");
    }
}
