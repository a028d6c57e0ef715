//! The server's hello: the version it picked from both ranges, its ports and its
//! certificate's fingerprint, and how an older server's hello is told apart.

use serde::{Deserialize, Serialize};
use std::ops::RangeInclusive;

use super::decode::{decode_hello, optional_field};
use super::version::negotiate;
use crate::{ProtoError, PROTOCOL_VERSIONS};

/// The server's answer. The server answers before it has read the client's hello (that
/// saves a round trip), so each side picks the version from the other's range itself
/// ([`negotiate`]): both get the same answer.
///
/// Hellos only ever grow at the end, and are read with [`decode_server_hello`], which
/// ignores bytes past the fields it knows (a newer peer's hello still tells an older
/// one which versions it speaks) and takes a later field an older server's hello ends
/// before as absent. (Protocol 2's hello is this one without `min_version`.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerHello {
    /// The server is ready.
    Ready {
        /// The newest protocol version the server speaks.
        version: u16,
        /// The UDP port the server listens on (0 if no QUIC endpoint).
        udp_port: u16,
        /// The server's own address as ssh saw it (from SSH_CONNECTION), if known.
        server_addr: Option<std::net::IpAddr>,
        /// SHA-256 of the server's ephemeral certificate.
        fingerprint: [u8; 32],
        /// The server's soku version, for messages.
        soku_version: String,
        /// Warnings for the user (e.g. the kernel capped the UDP receive buffer).
        warnings: Vec<String>,
        /// The oldest protocol version the server speaks (since protocol 3).
        min_version: u16,
        /// The TCP port the server listens on for TLS over TCP (0 if none; since 5).
        tcp_port: u16,
        /// The most descriptors the server may hold open (its soft limit, once raised
        /// as far as the hard limit allows), when it receives: the sender keeps the
        /// files it announces ahead within it, each a temporary file held open on the
        /// receiving side until it is complete. Absent from an older server's hello
        /// (none: the sender bounds them by its own limit alone).
        open_files: Option<u64>,
    },
}

/// The server's hello before `open_files` (protocols 5 to 7): what
/// [`decode_server_hello`] reads first, then each later field if the hello goes on.
#[derive(Debug, Deserialize)]
enum ServerHelloV7 {
    Ready {
        version: u16,
        udp_port: u16,
        server_addr: Option<std::net::IpAddr>,
        fingerprint: [u8; 32],
        soku_version: String,
        warnings: Vec<String>,
        min_version: u16,
        tcp_port: u16,
    },
}

/// The fields every server hello since protocol 2 starts with: an older server's hello
/// (protocol 2 lacks `min_version`, 3 and 4 lack `tcp_port`) is recognised by them, only
/// to say which side to upgrade.
#[derive(Debug, Deserialize)]
enum ServerHelloV2 {
    Ready {
        version: u16,
        _udp_port: u16,
        _server_addr: Option<std::net::IpAddr>,
        _fingerprint: [u8; 32],
        _soku_version: String,
        _warnings: Vec<String>,
    },
}

/// Decodes the server's hello: the fields every server since protocol 5 sends, then
/// each later field if the hello goes on that far, ignoring what a newer server added
/// after them. A protocol 2 server, whose hello lacks its oldest version, is a version
/// mismatch that names both versions.
pub fn decode_server_hello(payload: &[u8]) -> Result<ServerHello, ProtoError> {
    let err = match postcard::take_from_bytes::<ServerHelloV7>(payload) {
        Ok((old, rest)) => {
            let ServerHelloV7::Ready {
                version,
                udp_port,
                server_addr,
                fingerprint,
                soku_version,
                warnings,
                min_version,
                tcp_port,
            } = old;
            let (open_files, _) = optional_field::<Option<u64>>(rest)?;
            return Ok(ServerHello::Ready {
                version,
                udp_port,
                server_addr,
                fingerprint,
                soku_version,
                warnings,
                min_version,
                tcp_port,
                open_files: open_files.flatten(),
            });
        }
        Err(e) => ProtoError::Malformed(e.to_string()),
    };
    match decode_hello::<ServerHelloV2>(payload) {
        Ok(ServerHelloV2::Ready { version, .. }) => {
            negotiate(PROTOCOL_VERSIONS, version..=version, "the remote host").and(Err(err))
        }
        Err(_) => Err(err),
    }
}

impl ServerHello {
    /// The versions the server speaks.
    pub fn versions(&self) -> RangeInclusive<u16> {
        let ServerHello::Ready { min_version, version, .. } = self;
        *min_version..=*version
    }

    /// The client's choice: the newest version both this build and the server speak.
    pub fn negotiate(&self) -> Result<u16, ProtoError> {
        negotiate(PROTOCOL_VERSIONS, self.versions(), "the remote host")
    }
}
