//! A client's handshake datagrams, sent twice.
//!
//! Before the handshake is done, a lost datagram costs a probe timeout, which quinn
//! times from the first RTT sample, or three times 333 ms before there is one (RFC 9002
//! §6.2): a lost first Initial cost a copy a second on the emulator, and a lost client
//! Finished more, since the server drops the client's data until the Finished comes
//! (quinn-proto drops short-header packets during the handshake) and a client doubles
//! its timeouts after one that fired early (`lab/2026-12-01-handshake-before-hello`,
//! `lab/2026-12-01-startup-floor`). Every datagram a client sends that starts with a
//! long-header packet (an Initial or a Handshake packet, and what is coalesced behind
//! it) leaves twice: with random loss both copies are lost at the square of the loss
//! rate. The server drops the second copy as a duplicate packet number. Three or four
//! such datagrams of at most 1 200 bytes make a handshake; the server's side is not
//! doubled, since before it has validated the client's address it may send only three
//! times what it received (RFC 9000 §8.1), and quinn counts that without our copies.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

/// The header form bit of a QUIC packet's first byte: set on long headers (RFC 9000
/// §17.2).
const LONG_HEADER: u8 = 0x80;

/// A client's socket whose handshake datagrams leave twice.
pub(crate) struct HandshakeTwice {
    inner: Arc<dyn AsyncUdpSocket>,
}

impl HandshakeTwice {
    pub(crate) fn new(inner: Arc<dyn AsyncUdpSocket>) -> Self {
        HandshakeTwice { inner }
    }
}

impl fmt::Debug for HandshakeTwice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandshakeTwice").field("inner", &self.inner).finish()
    }
}

/// Whether `transmit` is one datagram that starts with a long-header packet.
fn is_handshake(transmit: &Transmit<'_>) -> bool {
    transmit.segment_size.is_none()
        && transmit.contents.first().is_some_and(|first| first & LONG_HEADER != 0)
}

impl AsyncUdpSocket for HandshakeTwice {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        self.inner.try_send(transmit)?;
        if is_handshake(transmit) {
            // The first copy left: a second that cannot leave now is not worth a retry.
            let _ = self.inner.try_send(transmit);
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_recv(cx, bufs, meta)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transmit(contents: &[u8], segment_size: Option<usize>) -> Transmit<'_> {
        Transmit {
            destination: SocketAddr::from(([127, 0, 0, 1], 1)),
            ecn: None,
            contents,
            segment_size,
            src_ip: None,
        }
    }

    #[test]
    fn only_long_header_datagrams_are_handshake() {
        assert!(is_handshake(&transmit(&[0xc3, 0, 0], None)), "an Initial");
        assert!(is_handshake(&transmit(&[0xe1, 0, 0], None)), "a Handshake packet");
        assert!(!is_handshake(&transmit(&[0x41, 0, 0], None)), "a 1-RTT packet");
        assert!(!is_handshake(&transmit(&[0xc3; 2400], Some(1200))), "a GSO batch");
        assert!(!is_handshake(&transmit(&[], None)));
    }
}
