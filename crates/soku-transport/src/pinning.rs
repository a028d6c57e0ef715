//! Certificate verifiers that trust exactly one fingerprint each.
//!
//! Both sides learned the peer's fingerprint over ssh, so there is no CA, no name check
//! and no trust on first use: a certificate is acceptable iff SHA-256 of its DER equals
//! the pin. The pin alone is not enough, though: the peer must also prove it holds the
//! certificate's key, which TLS 1.3 does with the CertificateVerify signature. We check
//! that signature with ring's algorithms exactly as a CA-based verifier would.

use std::fmt;
use std::sync::{Arc, OnceLock};

use tokio::sync::Notify;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, OtherError, PeerIncompatible,
    SignatureScheme,
};

use crate::Fingerprint;

/// The error rustls reports (and turns into a bad_certificate alert) on a pin mismatch.
struct PinMismatch {
    expected: Fingerprint,
    got: Fingerprint,
}

impl fmt::Display for PinMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "certificate fingerprint {} does not match the pinned {}",
            self.got, self.expected
        )
    }
}

/// rustls prints `CertificateError::Other` with `{:?}`, so Debug carries the readable text.
impl fmt::Debug for PinMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for PinMismatch {}

/// The client certificate a server accepts, which may be learned after its endpoint is
/// up: `soku serve` announces its UDP port before it reads the client's hello (ssh
/// forwards the client's first bytes only once the remote command has started, so
/// waiting for them cost a round trip). The client's QUIC handshake and its hello over
/// ssh then arrive at about the same time, and the hello may come later still when TCP
/// resends it.
///
/// What a certificate that comes before the pin meets depends on the verifier
/// ([`Early`]): over QUIC it completes the handshake provisionally and
/// [`crate::accept`] holds the connection back until the pin, then keeps it only if
/// the certificate matches; over TCP it is refused like a wrong one.
#[derive(Debug, Clone, Default)]
pub struct ClientPin(Arc<PinCell>);

#[derive(Debug, Default)]
struct PinCell {
    fingerprint: OnceLock<Fingerprint>,
    set: Notify,
}

impl ClientPin {
    /// A pin to be set later with [`ClientPin::set`].
    pub fn unset() -> Self {
        Self::default()
    }

    /// Pins `fingerprint`. A pin never changes: false if a different one is already set.
    pub fn set(&self, fingerprint: Fingerprint) -> bool {
        let pinned = *self.0.fingerprint.get_or_init(|| fingerprint);
        self.0.set.notify_waiters();
        pinned.ct_eq(&fingerprint)
    }

    /// The pinned fingerprint, once it is set.
    pub async fn pinned(&self) -> Fingerprint {
        loop {
            let set = self.0.set.notified();
            tokio::pin!(set);
            // Registered before the look, so a `set` in between is not missed.
            set.as_mut().enable();
            if let Some(fingerprint) = self.0.fingerprint.get() {
                return *fingerprint;
            }
            set.await;
        }
    }
}

impl From<Fingerprint> for ClientPin {
    fn from(fingerprint: Fingerprint) -> Self {
        ClientPin(Arc::new(PinCell {
            fingerprint: OnceLock::from(fingerprint),
            set: Notify::new(),
        }))
    }
}

/// What a server's verifier does with a client certificate that arrives before the pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Early {
    /// Refuses it, as a certificate that does not match.
    Refused,
    /// Lets the handshake complete; whoever takes the connection checks the certificate
    /// against the pin before using it ([`crate::accept`]). TLS 1.3 still makes the
    /// client prove it holds the certificate's key (CertificateVerify).
    CheckedAfter,
}

/// The check shared by both verifiers.
#[derive(Debug)]
struct Pin {
    expected: ClientPin,
    algorithms: WebPkiSupportedAlgorithms,
}

impl Pin {
    fn check(&self, end_entity: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        let Some(expected) = self.expected.0.fingerprint.get() else {
            return Err(rustls::Error::General(
                "a certificate arrived before its fingerprint did over ssh".into(),
            ));
        };
        // Intermediates are ignored: the pin names the end-entity certificate itself.
        let got = Fingerprint::of_der(end_entity);
        if got.ct_eq(expected) {
            Ok(())
        } else {
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                PinMismatch { expected: *expected, got },
            )))))
        }
    }

    fn verify_tls13(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// QUIC is TLS 1.3 only (RFC 9001 §4.2), and so is soku over TCP: a TLS 1.2 signature
/// means something is wrong.
fn refuse_tls12() -> Result<HandshakeSignatureValid, rustls::Error> {
    Err(rustls::Error::PeerIncompatible(PeerIncompatible::Tls13RequiredForQuic))
}

/// Client side: accepts only the server whose fingerprint came over ssh.
#[derive(Debug)]
pub(crate) struct PinnedServerVerifier(Pin);

impl PinnedServerVerifier {
    pub(crate) fn new(server: Fingerprint, algorithms: WebPkiSupportedAlgorithms) -> Self {
        PinnedServerVerifier(Pin { expected: server.into(), algorithms })
    }
}

impl ServerCertVerifier for PinnedServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // No name or validity-period check: the certificate lives for one session and
        // its identity is the pin, not a name.
        self.0.check(end_entity)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        refuse_tls12()
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.schemes()
    }
}

/// Server side: demands a client certificate and accepts only the pinned one; one that
/// comes before the pin as `early` says.
#[derive(Debug)]
pub(crate) struct PinnedClientVerifier {
    pin: Pin,
    early: Early,
}

impl PinnedClientVerifier {
    pub(crate) fn new(
        client: ClientPin,
        early: Early,
        algorithms: WebPkiSupportedAlgorithms,
    ) -> Self {
        PinnedClientVerifier { pin: Pin { expected: client, algorithms }, early }
    }
}

impl ClientCertVerifier for PinnedClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    /// Mandatory: a client without a certificate is as foreign as one with the wrong one.
    fn client_auth_mandatory(&self) -> bool {
        true
    }

    /// No CA names to hint: the client has exactly one certificate to offer.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if self.early == Early::CheckedAfter && self.pin.expected.0.fingerprint.get().is_none() {
            return Ok(ClientCertVerified::assertion());
        }
        self.pin.check(end_entity)?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        refuse_tls12()
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.pin.verify_tls13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.pin.schemes()
    }
}
