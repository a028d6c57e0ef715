//! The crate's one error type.

use std::io;

/// Everything that can go wrong while building endpoints or connecting.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// rcgen could not make the ephemeral certificate.
    #[error("cannot generate certificate: {0}")]
    CertGeneration(#[from] rcgen::Error),
    /// rustls refused our TLS configuration (key, protocol versions).
    #[error("tls configuration: {0}")]
    TlsConfig(#[from] rustls::Error),
    /// The crypto provider lacks the AES-128-GCM suite QUIC needs for Initial packets.
    #[error("no quic initial cipher suite available")]
    NoInitialSuite,
    /// `-c` named a cipher we do not offer.
    #[error("unknown cipher \"{0}\"; choose aes128-gcm, aes256-gcm or chacha20-poly1305")]
    UnknownCipher(String),
    /// A fingerprint was not 64 hex characters.
    #[error("bad fingerprint: expected 64 hex characters, got {0:?}")]
    BadFingerprint(String),
    /// Creating, tuning or binding the UDP socket failed.
    #[error("udp socket: {0}")]
    Socket(#[from] io::Error),
    /// Endpoints must be made inside a tokio runtime (quinn spawns its driver there).
    #[error("no tokio runtime: endpoints must be created inside one")]
    NoRuntime,
    /// quinn refused to start the connection (bad address, no client config).
    #[error("cannot start connection: {0}")]
    Connect(#[from] quinn::ConnectError),
    /// The TLS handshake failed: a certificate did not match its pin (ours or the peer's
    /// verdict), or the peers share no cipher suite or protocol.
    #[error("tls handshake failed: {0}")]
    Handshake(quinn::ConnectionError),
    /// The connection failed for a reason other than TLS (timeout, reset, closed).
    #[error("connection failed: {0}")]
    Connection(quinn::ConnectionError),
    /// A TCP socket, listener or connection failed (the TCP transport).
    #[error("tcp: {0}")]
    Tcp(io::Error),
    /// TLS over TCP failed: a certificate did not match its pin, or the peer went quiet.
    #[error("tls over tcp: {0}")]
    TcpHandshake(String),
    /// A kept identity (see `Identity::from_der`) does not hold a usable key.
    #[error("identity: {0}")]
    Identity(String),
    /// A client's handshake completed before its pin was set, and its certificate is
    /// not the pinned one (see [`ClientPin`](crate::ClientPin)).
    #[error("the client's certificate is not the one announced over ssh")]
    NotPinned,
    /// The endpoint was closed while waiting for a connection.
    #[error("endpoint closed")]
    EndpointClosed,
}

/// QUIC carries TLS alerts as transport error codes 0x0100-0x01ff (RFC 9001 §4.8).
const CRYPTO_ERROR_RANGE: std::ops::Range<u64> = 0x0100..0x0200;

impl From<quinn::ConnectionError> for TransportError {
    /// Sorts TLS failures (decided by us or by the peer) from every other failure, so the
    /// session layer can report "certificate refused" as a security event, not a timeout.
    fn from(err: quinn::ConnectionError) -> Self {
        let code = match &err {
            quinn::ConnectionError::TransportError(e) => Some(u64::from(e.code)),
            quinn::ConnectionError::ConnectionClosed(c) => Some(u64::from(c.error_code)),
            _ => None,
        };
        match code {
            Some(c) if CRYPTO_ERROR_RANGE.contains(&c) => TransportError::Handshake(err),
            _ => TransportError::Connection(err),
        }
    }
}
