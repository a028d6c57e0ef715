//! Relaying one TCP connection over one bidirectional QUIC stream, both ways at once.
//!
//! - Half-close carries across: TCP end of input finishes the QUIC stream, and the QUIC
//!   stream's end shuts down the TCP connection's write side. Each direction ends on
//!   its own, so protocols that close one way first (rsync, `ssh host cmd < file`) work.
//! - A failure anywhere aborts both directions: the QUIC stream is reset and stopped,
//!   and the TCP connection is reset (`SO_LINGER` 0), so neither end mistakes a broken
//!   connection for a clean end of data.
//! - Every read is forwarded at once: large buffers take what a bulk transfer has
//!   queued, and a lone keystroke goes out alone, compressed or not.

use quinn::{ReadError, RecvStream, SendStream, VarInt, WriteError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use super::code;
use super::codec::{Compressor, Decompressor};

/// Bytes read from the TCP socket at once (and largest QUIC read).
const BUF: usize = 128 * 1024;

/// How one relayed connection failed.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// Reading from the TCP connection failed.
    #[error("reading from the tcp connection: {0}")]
    TcpRead(std::io::Error),
    /// Writing to the TCP connection failed.
    #[error("writing to the tcp connection: {0}")]
    TcpWrite(std::io::Error),
    /// The peer reset or stopped the QUIC stream with this code.
    #[error("the other end aborted the stream (code {0})")]
    PeerAbort(VarInt),
    /// The QUIC connection or stream failed.
    #[error("quic stream: {0}")]
    Quic(String),
    /// The compressed stream from the peer is invalid or was cut short.
    #[error("compressed stream: {0}")]
    Codec(std::io::Error),
}

impl From<WriteError> for RelayError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Stopped(code) => RelayError::PeerAbort(code),
            other => RelayError::Quic(other.to_string()),
        }
    }
}

impl From<ReadError> for RelayError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Reset(code) => RelayError::PeerAbort(code),
            other => RelayError::Quic(other.to_string()),
        }
    }
}

/// What a finished relay carried, in plain (uncompressed) bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    /// From the TCP connection into the tunnel.
    pub sent: u64,
    /// From the tunnel out to the TCP connection.
    pub received: u64,
}

/// Relays `tcp` over (`send`, `recv`) until both directions end; with `compress`, each
/// direction is one zstd stream.
pub async fn relay(
    tcp: TcpStream,
    mut send: SendStream,
    mut recv: RecvStream,
    compress: bool,
) -> Result<Totals, RelayError> {
    let (mut tcp_in, mut tcp_out) = tcp.into_split();
    let result = tokio::try_join!(
        tcp_to_quic(&mut tcp_in, &mut send, compress),
        quic_to_tcp(&mut recv, &mut tcp_out, compress),
    );
    match result {
        Ok((sent, received)) => Ok(Totals { sent, received }),
        Err(err) => {
            // Either may be closed already; the other end learns of the failure either way.
            let _ = send.reset(code::RELAY_FAILED);
            let _ = recv.stop(code::RELAY_FAILED);
            if let Ok(tcp) = tcp_in.reunite(tcp_out) {
                let _ = tcp.set_zero_linger();
            }
            Err(err)
        }
    }
}

/// One direction: TCP into the QUIC stream; finishes the stream at TCP end of input.
async fn tcp_to_quic(
    tcp: &mut OwnedReadHalf,
    send: &mut SendStream,
    compress: bool,
) -> Result<u64, RelayError> {
    let mut buf = vec![0u8; BUF];
    let mut compressor =
        if compress { Some(Compressor::new().map_err(RelayError::Codec)?) } else { None };
    let mut wire = Vec::new();
    let mut total = 0u64;
    loop {
        let n = tcp.read(&mut buf).await.map_err(RelayError::TcpRead)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        match &mut compressor {
            None => send.write_all(&buf[..n]).await?,
            Some(compressor) => {
                wire.clear();
                compressor.push(&buf[..n], &mut wire).map_err(RelayError::Codec)?;
                send.write_all(&wire).await?;
            }
        }
    }
    if let Some(compressor) = &mut compressor {
        wire.clear();
        compressor.finish(&mut wire).map_err(RelayError::Codec)?;
        send.write_all(&wire).await?;
    }
    send.finish().map_err(|e| RelayError::Quic(e.to_string()))?;
    Ok(total)
}

/// The other direction: the QUIC stream out to TCP; shuts down TCP's write side at the
/// stream's end.
async fn quic_to_tcp(
    recv: &mut RecvStream,
    tcp: &mut OwnedWriteHalf,
    compress: bool,
) -> Result<u64, RelayError> {
    let mut decompressor =
        if compress { Some(Decompressor::new().map_err(RelayError::Codec)?) } else { None };
    let mut plain = if compress { vec![0u8; BUF] } else { Vec::new() };
    let mut total = 0u64;
    while let Some(chunk) = recv.read_chunk(BUF, true).await? {
        let Some(decompressor) = &mut decompressor else {
            tcp.write_all(&chunk.bytes).await.map_err(RelayError::TcpWrite)?;
            total += chunk.bytes.len() as u64;
            continue;
        };
        let mut input = &chunk.bytes[..];
        loop {
            let (used, made) = decompressor.step(input, &mut plain).map_err(RelayError::Codec)?;
            input = &input[used..];
            if made > 0 {
                // Bounded: at most one buffer of output per step, written before the next.
                tcp.write_all(&plain[..made]).await.map_err(RelayError::TcpWrite)?;
                total += made as u64;
            }
            if input.is_empty() && made < plain.len() {
                break;
            }
            if used == 0 && made == 0 {
                return Err(RelayError::Codec(std::io::Error::other("decoder made no progress")));
            }
        }
    }
    if decompressor.as_ref().is_some_and(|d| !d.is_complete()) {
        return Err(RelayError::Codec(std::io::Error::other("the stream ended mid-frame")));
    }
    tcp.shutdown().await.map_err(RelayError::TcpWrite)?;
    Ok(total)
}
