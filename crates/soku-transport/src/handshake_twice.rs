//! A client's handshake datagrams, sent twice (by the endpoint's socket, `gso.rs`).
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

use quinn::udp::Transmit;

/// The header form bit of a QUIC packet's first byte: set on long headers (RFC 9000
/// §17.2).
const LONG_HEADER: u8 = 0x80;

/// How many times a client sends `transmit`: twice for one datagram that starts with a
/// long-header packet, once for anything else.
pub(crate) fn copies(transmit: &Transmit<'_>) -> usize {
    let handshake = transmit.segment_size.is_none()
        && transmit.contents.first().is_some_and(|first| first & LONG_HEADER != 0);
    if handshake {
        2
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

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
    fn only_long_header_datagrams_go_twice() {
        assert_eq!(copies(&transmit(&[0xc3, 0, 0], None)), 2, "an Initial");
        assert_eq!(copies(&transmit(&[0xe1, 0, 0], None)), 2, "a Handshake packet");
        assert_eq!(copies(&transmit(&[0x41, 0, 0], None)), 1, "a 1-RTT packet");
        assert_eq!(copies(&transmit(&[0xc3; 2400], Some(1200))), 1, "a GSO batch");
        assert_eq!(copies(&transmit(&[], None)), 1);
    }
}
