//! A UDP socket for quinn with none of the extras quinn's own asks the system for, where
//! the system refuses them.
//!
//! quinn's socket (`quinn_udp`) turns on the don't-fragment bit, the packet's
//! destination address and its ECN bits, and fails to open where any of them is missing:
//! on Windows, `IP_RECVECN` came with Windows 10 1703, and Wine (8.0) answers
//! `WSAEOPNOTSUPP` for it. The copy would then leave QUIC for TCP. This socket sends and
//! receives one datagram per call with plain `sendto`/`recvfrom`, and tells quinn so:
//! one segment each way, no ECN (the controller does not use it), and datagrams that
//! may be fragmented (quinn's path MTU discovery then keeps to what arrives).

use std::fmt;
use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::io::ReadBuf;

/// A tokio UDP socket, one datagram per call.
pub(crate) struct PlainUdp {
    io: tokio::net::UdpSocket,
}

impl PlainUdp {
    /// Takes `socket` (non-blocking) into the current tokio runtime.
    pub(crate) fn new(socket: std::net::UdpSocket) -> io::Result<PlainUdp> {
        socket.set_nonblocking(true)?;
        Ok(PlainUdp { io: tokio::net::UdpSocket::from_std(socket)? })
    }
}

impl fmt::Debug for PlainUdp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainUdp").field("local", &self.io.local_addr().ok()).finish()
    }
}

impl AsyncUdpSocket for PlainUdp {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(Writable { socket: self, waiting: None })
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        self.io.try_send_to(transmit.contents, transmit.destination).map(|_| ())
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let (Some(buf), Some(slot)) = (bufs.first_mut(), meta.first_mut()) else {
            return Poll::Ready(Ok(0));
        };
        let mut read = ReadBuf::new(buf);
        let addr = ready!(self.io.poll_recv_from(cx, &mut read))?;
        let len = read.filled().len();
        *slot = RecvMeta { addr, len, stride: len, ecn: None, dst_ip: None };
        Poll::Ready(Ok(1))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }
}

type Waiting = Pin<Box<dyn Future<Output = io::Result<()>> + Send + Sync>>;

/// One task's wait for the socket to take a datagram again. tokio's `writable()` wakes
/// every task that waits, where `poll_send_ready` would wake only the last to ask.
struct Writable {
    socket: Arc<PlainUdp>,
    waiting: Option<Waiting>,
}

impl fmt::Debug for Writable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writable").field("waiting", &self.waiting.is_some()).finish()
    }
}

impl UdpPoller for Writable {
    fn poll_writable(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let socket = self.socket.clone();
        let waiting =
            self.waiting.get_or_insert_with(|| Box::pin(async move { socket.io.writable().await }));
        let result = ready!(waiting.as_mut().poll(cx));
        self.waiting = None;
        Poll::Ready(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: a datagram lost, cut or misaddressed on its way through the plain socket.
    #[tokio::test]
    async fn a_datagram_goes_through_with_its_sender() {
        let bind = |_| std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let (a, b) = (Arc::new(PlainUdp::new(bind(0)).expect("a")), bind(1));
        let to = b.local_addr().expect("addr");
        let payload = [7u8; 1200];
        let transmit = Transmit {
            destination: to,
            ecn: None,
            contents: &payload,
            segment_size: None,
            src_ip: None,
        };
        let mut poller = a.clone().create_io_poller();
        std::future::poll_fn(|cx| poller.as_mut().poll_writable(cx)).await.expect("writable");
        a.try_send(&transmit).expect("sent");
        let b = PlainUdp::new(b).expect("b");
        let mut buf = [0u8; 2000];
        let mut meta = [RecvMeta::default()];
        let n =
            std::future::poll_fn(|cx| b.poll_recv(cx, &mut [IoSliceMut::new(&mut buf)], &mut meta))
                .await
                .expect("received");
        assert_eq!(n, 1);
        assert_eq!(meta[0].len, 1200);
        assert_eq!(meta[0].addr, a.local_addr().expect("addr"));
        assert_eq!(&buf[..1200], &payload[..]);
    }
}
