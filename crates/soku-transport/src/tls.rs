//! rustls configurations for both sides: QUIC wraps them for quinn, the TCP transport
//! (`tcp.rs`) runs them over TLS 1.3 records. Either way each side presents its
//! ephemeral certificate and accepts only the peer's pinned one.

use std::sync::Arc;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::client::Resumption;
use rustls::server::NoServerSessionStorage;

use crate::cipher::{provider, quic_initial_suite};
use crate::pinning::{Early, PinnedClientVerifier, PinnedServerVerifier};
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

/// Server TLS: presents `identity`, demands the client pinned by `client`; a client
/// certificate that comes before the pin as `early` says.
pub(crate) fn server_tls(
    identity: &Identity,
    client: ClientPin,
    early: Early,
    cipher: Option<crate::Cipher>,
    alpn: &[u8],
) -> Result<rustls::ServerConfig, TransportError> {
    let provider = Arc::new(provider(cipher));
    let algorithms = provider.signature_verification_algorithms;
    let verifier = PinnedClientVerifier::new(client, early, algorithms);
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
    // A QUIC client whose certificate comes before its hello over ssh is checked as the
    // connection is accepted (`endpoint::accept_with`): the server answers its Initial
    // at once instead of after ssh's resend of a lost hello.
    let tls = server_tls(identity, client, Early::CheckedAfter, cipher, ALPN)?;
    QuicServerConfig::with_initial(Arc::new(tls), quic_initial_suite()?)
        .map_err(|_| TransportError::NoInitialSuite)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::SERVER_NAME;

    /// The suite a client and a server offering `client` and `server` agree on, from a
    /// handshake run in memory.
    fn negotiated(client: Option<crate::Cipher>, server: Option<crate::Cipher>) -> String {
        let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let client_cfg = client_tls(&c, s.fingerprint(), client, ALPN).unwrap();
        let server_cfg =
            server_tls(&s, c.fingerprint().into(), Early::Refused, server, ALPN).unwrap();
        let name = rustls::pki_types::ServerName::try_from(SERVER_NAME).unwrap();
        let mut cli = rustls::ClientConnection::new(Arc::new(client_cfg), name).unwrap();
        let mut srv = rustls::ServerConnection::new(Arc::new(server_cfg)).unwrap();
        // Bounded: a TLS 1.3 handshake takes two flights each way.
        for _ in 0..10 {
            let mut wire = Vec::new();
            cli.write_tls(&mut wire).unwrap();
            srv.read_tls(&mut wire.as_slice()).unwrap();
            srv.process_new_packets().unwrap();
            let mut wire = Vec::new();
            srv.write_tls(&mut wire).unwrap();
            cli.read_tls(&mut wire.as_slice()).unwrap();
            cli.process_new_packets().unwrap();
            if !cli.is_handshaking() && !srv.is_handshaking() {
                break;
            }
        }
        let suite = cli.negotiated_cipher_suite().expect("a suite");
        assert_eq!(Some(suite), srv.negotiated_cipher_suite());
        format!("{:?}", suite.suite())
    }

    #[test]
    fn the_default_is_aes128_gcm() {
        assert_eq!(negotiated(None, None), "TLS13_AES_128_GCM_SHA256");
    }
}
