//! Frames on a byte stream: the control writer every link uses, and the readers of
//! control frames and chunks.
//!
//! Outgoing control messages go through one writer task per link, so any task may send
//! without holding a lock across an await; what is queued is batched into one write, so
//! a small frame never waits alone for an ACK (the small-packet problem: a separate
//! short `write` meets Nagle's algorithm and delayed ACKs, RFC 896 and RFC 1122 4.2.3.2).

use bytes::Bytes;
use soku_proto::chunk::ChunkHeader;
use soku_proto::frame::{self, MAX_CONTROL_FRAME, PREFIX_LEN};
use soku_proto::message::Message;
use soku_proto::ProtoError;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::{ChunkMemory, Inbound};
use crate::page_buf::PageBuf;
use crate::LinkError;

/// Outgoing messages queued before senders wait.
const OUTBOX: usize = 64;
/// Bytes batched into one write at most.
const BATCH: usize = 64 * 1024;
/// After this long with nothing to write, the writer sends a [`Message::KeepAlive`], so
/// the peer can tell a side that is busy (hashing a large partial file, pacing a slow
/// `-l` copy) from one that stalled ([`super::Link::set_stall_limit`]).
pub const KEEPALIVE_EVERY: std::time::Duration = std::time::Duration::from_secs(15);

/// Something for the writer task.
enum Outbound {
    /// A control message.
    Control(Message),
    /// A chunk, interleaved with control messages (ordered byte streams only); the
    /// sender, if any, hears when its bytes are written.
    Chunk(ChunkHeader, Bytes, Option<oneshot::Sender<()>>),
    /// Write what is queued, flush, end the stream, and say so.
    Finish(oneshot::Sender<Result<(), LinkError>>),
}

/// The sending end of a writer task; cheap to clone.
#[derive(Debug, Clone)]
pub struct ControlWriter(mpsc::Sender<Outbound>);

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outbound::Control(msg) => write!(f, "Control({})", msg.kind()),
            Outbound::Chunk(header, ..) => write!(f, "Chunk({}/{})", header.file, header.index),
            Outbound::Finish(_) => write!(f, "Finish"),
        }
    }
}

impl ControlWriter {
    /// Starts the writer task on `out`; the caller owns the task.
    pub fn start<W: AsyncWrite + Send + Unpin + 'static>(
        out: W,
    ) -> (ControlWriter, impl std::future::Future<Output = ()> + Send + 'static) {
        let (tx, rx) = mpsc::channel(OUTBOX);
        (ControlWriter(tx), write_loop(out, rx))
    }

    /// Queues a control message.
    pub async fn control(&self, msg: Message) -> Result<(), LinkError> {
        self.0.send(Outbound::Control(msg)).await.map_err(|_| LinkError::Closed)
    }

    /// Queues a chunk: its header frame, then its wire bytes.
    pub async fn chunk(&self, header: ChunkHeader, wire: Bytes) -> Result<(), LinkError> {
        self.0.send(Outbound::Chunk(header, wire, None)).await.map_err(|_| LinkError::Closed)
    }

    /// Queues a chunk and waits until its bytes are written to the stream (into the
    /// kernel's socket buffer), so a sender holds no more chunks than it keeps in flight.
    pub async fn chunk_written(&self, header: ChunkHeader, wire: Bytes) -> Result<(), LinkError> {
        let (done, written) = oneshot::channel();
        let item = Outbound::Chunk(header, wire, Some(done));
        self.0.send(item).await.map_err(|_| LinkError::Closed)?;
        written.await.map_err(|_| LinkError::Closed)
    }

    /// Writes everything queued, ends the stream, and waits until that is done.
    pub async fn finish(&self) -> Result<(), LinkError> {
        let (done, wait) = oneshot::channel();
        self.0.send(Outbound::Finish(done)).await.map_err(|_| LinkError::Closed)?;
        wait.await.map_err(|_| LinkError::Closed)?
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(mut out: W, mut rx: mpsc::Receiver<Outbound>) {
    let mut buf = Vec::with_capacity(BATCH);
    let mut failed: Option<String> = None;
    loop {
        let first = match tokio::time::timeout(KEEPALIVE_EVERY, rx.recv()).await {
            Ok(Some(first)) => first,
            Ok(None) => return,
            Err(_) => Outbound::Control(Message::KeepAlive),
        };
        let mut next = Some(first);
        let mut finish = None;
        // Batch what is queued into one write: small frames never wait alone.
        while let Some(item) = next.take() {
            if failed.is_none() {
                if let Err(e) = queue(&mut out, &mut buf, item, &mut finish).await {
                    failed = Some(e.to_string());
                }
            } else if let Outbound::Finish(done) = item {
                finish = Some(done);
            }
            if finish.is_none() && buf.len() < BATCH {
                next = rx.try_recv().ok();
            }
        }
        if failed.is_none() {
            let written = async {
                out.write_all(&buf).await?;
                out.flush().await
            }
            .await;
            if let Err(e) = written {
                failed = Some(e.to_string());
            }
        }
        buf.clear();
        if let Some(done) = finish {
            let result = match &failed {
                Some(e) => Err(LinkError::Lost(e.clone())),
                None => out.shutdown().await.map_err(LinkError::from),
            };
            let _ = done.send(result);
            return;
        }
    }
}

/// Adds one item to the batch (writing the batch out first for a chunk's bytes).
async fn queue<W: AsyncWrite + Unpin>(
    out: &mut W,
    buf: &mut Vec<u8>,
    item: Outbound,
    finish: &mut Option<oneshot::Sender<Result<(), LinkError>>>,
) -> Result<(), LinkError> {
    match item {
        Outbound::Control(msg) => frame::encode(&msg, buf)?,
        Outbound::Chunk(header, data, written) => {
            frame::encode(&Message::Chunk(header), buf)?;
            out.write_all(buf).await?;
            buf.clear();
            out.write_all(&data).await?;
            if let Some(written) = written {
                let _ = written.send(());
            }
        }
        Outbound::Finish(done) => *finish = Some(done),
    }
    Ok(())
}

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
