//! The socket a quinn endpoint writes through: GSO batches kept within what one UDP
//! send may carry, and on a client the handshake datagrams sent twice
//! (`handshake_twice.rs`).
//!
//! quinn hands the socket batches of up to 10 packets of the current path MTU, sent with
//! one `sendmsg` (GSO). One send carries at most 65 507 bytes of UDP payload (IPv4), so
//! from ~6 550-byte packets on a full batch is refused with EMSGSIZE; quinn's MTU
//! discovery reads the refusals as a black hole and drops to 1 200 bytes (seen on
//! loopback with the bound at 9 000 and 16 000). Splitting such a batch into sends that
//! fit lets discovery use the real MTU of loopback and of jumbo-frame networks.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

use crate::handshake_twice;

/// The most UDP payload one send carries: 65 535 minus the IPv4 and UDP headers (IPv6
/// allows 20 bytes more; the smaller bound serves both).
pub(crate) const MAX_SEND_PAYLOAD: usize = 65_535 - 20 - 8;

/// quinn's socket, with oversized GSO batches split into sends that fit, and on a
/// client each handshake datagram sent twice.
pub(crate) struct EndpointSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    client: bool,
}

impl EndpointSocket {
    /// `inner` for a client endpoint (`client`) or a server's.
    pub(crate) fn new(inner: Arc<dyn AsyncUdpSocket>, client: bool) -> Self {
        EndpointSocket { inner, client }
    }

    /// Sends `transmit`, split into pieces that fit one send.
    fn send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        let segment = match transmit.segment_size {
            Some(segment) if transmit.contents.len() > MAX_SEND_PAYLOAD => segment,
            _ => return self.inner.try_send(transmit),
        };
        // If a later piece would block, quinn retries the whole transmit: the pieces
        // already sent arrive twice, and QUIC drops duplicate packets. Rare (a full
        // socket buffer) and harmless, unlike losing them.
        for piece in pieces(transmit.contents, segment) {
            self.inner.try_send(&Transmit {
                destination: transmit.destination,
                ecn: transmit.ecn,
                contents: piece,
                segment_size: (piece.len() > segment).then_some(segment),
                src_ip: transmit.src_ip,
            })?;
        }
        Ok(())
    }
}

impl fmt::Debug for EndpointSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointSocket")
            .field("inner", &self.inner)
            .field("client", &self.client)
            .finish()
    }
}

/// The sends one transmit becomes: whole segments, at most [`MAX_SEND_PAYLOAD`] each.
/// Only the last segment of a GSO send may be short, and it is the transmit's last.
fn pieces(contents: &[u8], segment: usize) -> impl Iterator<Item = &[u8]> {
    let per_send = (MAX_SEND_PAYLOAD / segment.max(1)).max(1) * segment.max(1);
    contents.chunks(per_send)
}

impl AsyncUdpSocket for EndpointSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        self.send(transmit)?;
        if self.client && handshake_twice::copies(transmit) > 1 {
            // The first copy left: a second that cannot leave now is not worth a retry.
            let _ = self.send(transmit);
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

    #[test]
    fn pieces_hold_whole_segments_and_fit_one_send() {
        for segment in [1200, 1472, 6000, 9000, 16000, 65_000] {
            for count in [1, 2, 9, 10] {
                let contents = vec![0u8; segment * count - 7];
                let got: Vec<&[u8]> = pieces(&contents, segment).collect();
                assert_eq!(got.iter().map(|p| p.len()).sum::<usize>(), contents.len());
                for (i, piece) in got.iter().enumerate() {
                    assert!(piece.len() <= MAX_SEND_PAYLOAD.max(segment), "{segment} x {count}");
                    if i + 1 < got.len() {
                        assert_eq!(piece.len() % segment, 0, "only the last piece ends short");
                    }
                }
            }
        }
    }
}
