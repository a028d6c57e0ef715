//! Bootstrap over the ssh channel: versions, the server's UDP port, and both sides'
//! certificate fingerprints, so QUIC can pin exactly those two certificates.
//!
//! The client speaks first (its hello waits in ssh's buffer until `soku serve` starts).
//! The server's stdout may carry noise from login scripts before the hello: the client
//! skips everything before [`MAGIC`](crate::MAGIC) with a [`HelloScanner`].

use serde::{Deserialize, Serialize};

use crate::{ProtoError, MAGIC, PROTOCOL_VERSIONS};

/// Most login noise we skip before giving up on a hello.
pub const MAX_NOISE: usize = 1 << 20;

/// The client's opening message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientHello {
    /// Oldest protocol version the client speaks.
    pub min_version: u16,
    /// Newest protocol version the client speaks.
    pub max_version: u16,
    /// SHA-256 of the client's ephemeral certificate.
    pub fingerprint: [u8; 32],
    /// Whether the client wants a QUIC endpoint (false: data over the ssh channel only).
    pub want_quic: bool,
}

/// The server's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerHello {
    /// The server is ready.
    Ready {
        /// The version the server speaks: its newest. The server answers before it has
        /// read the client's hello (that saves a round trip), so the client checks it
        /// ([`check_server_version`]) and the server checks the client's range.
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
    },
    /// The server cannot serve this client.
    Refused {
        /// Why, as one line for the user.
        reason: String,
    },
}

/// The client's choice of data transport, sent after it tried QUIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TransportChoice {
    /// The QUIC connection is up; the ssh channel stays open only to keep the server alive.
    Quic,
    /// QUIC did not get through: data and control move over the ssh channel.
    SshChannel,
}

impl ClientHello {
    /// A hello with this build's version range.
    pub fn new(fingerprint: [u8; 32], want_quic: bool) -> Self {
        Self {
            min_version: *PROTOCOL_VERSIONS.start(),
            max_version: *PROTOCOL_VERSIONS.end(),
            fingerprint,
            want_quic,
        }
    }

    /// The newest version both sides speak, or why there is none.
    pub fn negotiate(&self) -> Result<u16, ProtoError> {
        let lo = self.min_version.max(*PROTOCOL_VERSIONS.start());
        let hi = self.max_version.min(*PROTOCOL_VERSIONS.end());
        if lo <= hi {
            Ok(hi)
        } else {
            Err(ProtoError::VersionMismatch {
                remote_min: self.min_version,
                remote_max: self.max_version,
                local_min: *PROTOCOL_VERSIONS.start(),
                local_max: *PROTOCOL_VERSIONS.end(),
            })
        }
    }
}

/// The client's check of the version in a server's `Ready` hello.
pub fn check_server_version(version: u16) -> Result<(), ProtoError> {
    if PROTOCOL_VERSIONS.contains(&version) {
        Ok(())
    } else {
        Err(ProtoError::VersionMismatch {
            remote_min: version,
            remote_max: version,
            local_min: *PROTOCOL_VERSIONS.start(),
            local_max: *PROTOCOL_VERSIONS.end(),
        })
    }
}

/// Finds [`MAGIC`] in a byte stream, keeping what came before it (login noise) aside.
#[derive(Debug, Default)]
pub struct HelloScanner {
    seen: Vec<u8>,
}

/// What the scanner found.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan {
    /// No magic yet; feed more bytes.
    NeedMore,
    /// Found: the noise before the magic, and the bytes after it (start of the frames).
    Found {
        /// Bytes before the magic (shown to the user in verbose mode).
        noise: Vec<u8>,
        /// Bytes after the magic.
        rest: Vec<u8>,
    },
}

impl HelloScanner {
    /// Adds bytes from the server's stdout and looks for the magic.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Scan, ProtoError> {
        self.seen.extend_from_slice(bytes);
        if let Some(at) = self.seen.windows(MAGIC.len()).position(|w| w == MAGIC) {
            let rest = self.seen.split_off(at + MAGIC.len());
            self.seen.truncate(at);
            return Ok(Scan::Found { noise: std::mem::take(&mut self.seen), rest });
        }
        if self.seen.len() > MAX_NOISE {
            return Err(ProtoError::NoHello(MAX_NOISE));
        }
        Ok(Scan::NeedMore)
    }

    /// Everything seen so far (for error messages when the stream ends without a hello).
    pub fn seen(&self) -> &[u8] {
        &self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_noise_before_the_hello_is_skipped() {
        let mut wire = b"Welcome to host!\nlast login: yesterday\n".to_vec();
        wire.extend_from_slice(MAGIC);
        wire.extend_from_slice(b"frames");
        let mut scanner = HelloScanner::default();
        let mut result = Scan::NeedMore;
        for piece in wire.chunks(5) {
            result = scanner.feed(piece).expect("within limit");
            if result != Scan::NeedMore {
                break;
            }
        }
        let Scan::Found { noise, mut rest } = result else { panic!("magic not found") };
        assert_eq!(noise, b"Welcome to host!\nlast login: yesterday\n");
        // Bytes after the magic in the same piece are kept.
        rest.extend_from_slice(&wire[wire.len() - (b"frames".len() - rest.len())..]);
        assert_eq!(rest, b"frames");
    }

    #[test]
    fn endless_noise_is_an_error() {
        let mut scanner = HelloScanner::default();
        let block = vec![b'x'; 64 * 1024];
        let mut last = Ok(Scan::NeedMore);
        for _ in 0..20 {
            last = scanner.feed(&block);
            if last.is_err() {
                break;
            }
        }
        assert_eq!(last, Err(ProtoError::NoHello(MAX_NOISE)));
    }

    #[test]
    fn version_negotiation_picks_the_newest_common_version() {
        let hello = ClientHello::new([0; 32], true);
        assert_eq!(hello.negotiate(), Ok(*PROTOCOL_VERSIONS.end()));
        let future = ClientHello { min_version: 900, max_version: 901, ..hello };
        assert!(matches!(future.negotiate(), Err(ProtoError::VersionMismatch { .. })));
    }

    #[test]
    fn a_server_version_this_build_does_not_speak_is_refused_with_the_fix() {
        assert!(check_server_version(*PROTOCOL_VERSIONS.end()).is_ok());
        let old = PROTOCOL_VERSIONS.start() - 1;
        let message = check_server_version(old).unwrap_err().to_string();
        assert!(
            message.starts_with(&format!("remote speaks protocol versions {old}-{old}")),
            "{message}"
        );
        assert!(message.ends_with("install the same soku version on both hosts"), "{message}");
    }
}
