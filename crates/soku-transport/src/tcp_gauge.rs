//! How much of its sending time a TCP connection spent held back by a buffer rather
//! than by the network: its own send buffer, or the receiver's window.
//!
//! Linux keeps these as chronographs in `tcp_info` (since 4.10): `tcpi_busy_time`, the
//! time the connection had data to send; `tcpi_sndbuf_limited`, the part of it when
//! everything in the send buffer was in flight and the buffer could take no more; and
//! `tcpi_rwnd_limited`, the part the receiver's window stopped it. A striped link opens
//! another connection only when the ones in use are held back like this
//! (`soku_engine::link::striped`): more connections then raise the window, where on a
//! path they are not needed they only add flows that compete in the bottleneck's queue.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub use crate::sys::Chronographs;

/// How often a writing stream reads its socket's chronographs: a system call per
/// this much time, not per write.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// A connection's sending time and the part of it a buffer held back, in
/// microseconds, as last sampled by its [`Gauged`] stream.
#[derive(Debug, Default)]
pub struct SendTimes {
    busy_us: AtomicU64,
    held_us: AtomicU64,
}

impl SendTimes {
    /// (time with data to send, time of it held back by a buffer), in microseconds.
    pub fn busy_and_held(&self) -> (u64, u64) {
        (self.busy_us.load(Ordering::Relaxed), self.held_us.load(Ordering::Relaxed))
    }

    /// Stores a sample (the gauge does this as its stream writes).
    pub fn record(&self, busy_us: u64, held_us: u64) {
        self.busy_us.store(busy_us, Ordering::Relaxed);
        self.held_us.store(held_us, Ordering::Relaxed);
    }
}

/// A stream over a TCP socket that samples the socket's [`SendTimes`] as it writes.
pub struct Gauged<S> {
    inner: S,
    times: Arc<SendTimes>,
    sampled: Option<Instant>,
}

impl<S: Chronographs> Gauged<S> {
    /// Wraps `inner`, whose raw descriptor is the TCP socket; the times it samples come
    /// back beside it.
    pub fn new(inner: S) -> (Gauged<S>, Arc<SendTimes>) {
        let times = Arc::new(SendTimes::default());
        (Gauged { inner, times: times.clone(), sampled: None }, times)
    }

    fn sample(&mut self) {
        let now = Instant::now();
        if self.sampled.is_some_and(|at| now.duration_since(at) < SAMPLE_EVERY) {
            return;
        }
        self.sampled = Some(now);
        if let Ok((busy, held)) = self.inner.chronographs() {
            self.times.record(busy, held);
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Gauged<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Chronographs + Unpin> AsyncWrite for Gauged<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.sample();
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.sample();
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A connection whose receiver reads nothing fills the receiver's window: the
    /// sender's chronographs say it was held back, and the gauge reports it.
    #[tokio::test]
    async fn a_receiver_that_does_not_read_shows_as_held_back() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let (mut gauged, times) = Gauged::new(client);
        let block = vec![7u8; 64 << 10];
        // Write until the receiver's window and our buffer are full and a write blocks.
        let mut written = 0usize;
        for _ in 0..1024 {
            match tokio::time::timeout(Duration::from_millis(100), gauged.write_all(&block)).await {
                Ok(result) => {
                    result.unwrap();
                    written += block.len();
                }
                Err(_) => break,
            }
        }
        tokio::time::sleep(SAMPLE_EVERY * 3).await;
        // One more (small) write samples again; it may or may not fit.
        let _ = tokio::time::timeout(Duration::from_millis(100), gauged.write_all(b"x")).await;
        let (busy, held) = times.busy_and_held();
        assert!(written > 0, "nothing was written");
        assert!(busy > 0, "the connection had data to send, yet busy time is 0");
        assert!(held > 0, "a receiver that reads nothing must hold the sender back: {busy} us busy, {held} us held");
        // The gauged stream still carries the bytes.
        let mut first = vec![0u8; 16];
        server.read_exact(&mut first).await.unwrap();
        assert_eq!(first, vec![7u8; 16]);
    }
}
