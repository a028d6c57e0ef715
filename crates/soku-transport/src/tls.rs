//! rustls configurations for both sides: QUIC wraps them for quinn, the TCP transport
//! (`tcp.rs`) runs them over TLS 1.3 records. Either way each side presents its
//! ephemeral certificate and accepts only the peer's pinned one.

use std::sync::Arc;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::client::Resumption;
use rustls::server::NoServerSessionStorage;

use crate::cipher::{provider, quic_initial_suite};
use crate::pinning::{PinnedClientVerifier, PinnedServerVerifier};
use crate::{ClientPin, Fingerprint, Identity, TransportError};

/// ALPN protocol id of QUIC; bump with incompatible changes to what runs over the streams.
pub const ALPN: &[u8] = b"soku/1";
/// ALPN protocol id of TLS over TCP, so neither transport's peer mistakes the other.
pub const TCP_ALPN: &[u8] = b"soku-tcp/1";

/// Client TLS: presents `identity`, accepts only the server pinned by `server`.
pub(crate) fn client_tls(
    identity: &Identity,
    server: Fingerprint,
    cipher: Option<crate::Cipher>,
    alpn: &[u8],
) -> Result<rustls::ClientConfig, TransportError> {
    let provider = Arc::new(provider(cipher));
    let verifier = PinnedServerVerifier::new(server, provider.signature_verification_algorithms);
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_client_auth_cert(identity.cert_chain(), identity.private_key())?;
    tls.alpn_protocols = vec![alpn.to_vec()];
    // A resumed session skips the certificate exchange, and with it the pin check.
    // Certificates are per session anyway, so resumption would never help us.
    tls.resumption = Resumption::disabled();
    tls.enable_early_data = false;
    Ok(tls)
}

/// Server TLS: presents `identity`, demands the client pinned by `client`.
pub(crate) fn server_tls(
    identity: &Identity,
    client: ClientPin,
    cipher: Option<crate::Cipher>,
    alpn: &[u8],
) -> Result<rustls::ServerConfig, TransportError> {
    let provider = Arc::new(provider(cipher));
    let verifier = PinnedClientVerifier::new(client, provider.signature_verification_algorithms);
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(Arc::new(verifier))
        .with_single_cert(identity.cert_chain(), identity.private_key())?;
    tls.alpn_protocols = vec![alpn.to_vec()];
    // Same reason as the client: every handshake must show the pinned certificate.
    tls.session_storage = Arc::new(NoServerSessionStorage {});
    tls.send_tls13_tickets = 0;
    tls.max_early_data_size = 0;
    Ok(tls)
}

/// Client TLS for QUIC.
pub(crate) fn client_crypto(
    identity: &Identity,
    server: Fingerprint,
    cipher: Option<crate::Cipher>,
) -> Result<QuicClientConfig, TransportError> {
    let tls = client_tls(identity, server, cipher, ALPN)?;
    QuicClientConfig::with_initial(Arc::new(tls), quic_initial_suite()?)
        .map_err(|_| TransportError::NoInitialSuite)
}

/// Server TLS for QUIC.
pub(crate) fn server_crypto(
    identity: &Identity,
    client: ClientPin,
    cipher: Option<crate::Cipher>,
) -> Result<QuicServerConfig, TransportError> {
    let tls = server_tls(identity, client, cipher, ALPN)?;
    QuicServerConfig::with_initial(Arc::new(tls), quic_initial_suite()?)
        .map_err(|_| TransportError::NoInitialSuite)
}
