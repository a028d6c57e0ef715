//! Ephemeral per-session certificates and their SHA-256 fingerprints.

use std::fmt;
use std::str::FromStr;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::TransportError;

/// SHA-256 of a certificate's DER: what the two sides exchange over ssh and pin.
///
/// Shown and parsed as 64 lowercase hex characters (uppercase is accepted on input).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// Fingerprint of a DER-encoded certificate.
    pub fn of_der(der: &[u8]) -> Fingerprint {
        let digest = ring::digest::digest(&ring::digest::SHA256, der);
        let mut out = [0u8; 32];
        // safe: a SHA-256 digest is always 32 bytes, so copy_from_slice cannot panic.
        out.copy_from_slice(digest.as_ref());
        Fingerprint(out)
    }

    /// Compares without an early exit, so timing does not reveal how much of a forged
    /// fingerprint matched. ring deprecated its public `constant_time` helper (no
    /// promises about side channels), so we keep our own: XOR-fold all bytes, then test
    /// once; `black_box` stops the compiler from turning the fold into an early exit.
    pub(crate) fn ct_eq(&self, other: &Fingerprint) -> bool {
        let diff = self
            .0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |acc, (a, b)| acc | std::hint::black_box(a ^ b));
        std::hint::black_box(diff) == 0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl FromStr for Fingerprint {
    type Err = TransportError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || TransportError::BadFingerprint(s.chars().take(80).collect());
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        // safe: chunks_exact(2) yields slices of exactly 2 bytes, so [0] and [1] exist.
        for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
            let hi = hex_val(pair[0]).ok_or_else(bad)?;
            let lo = hex_val(pair[1]).ok_or_else(bad)?;
            *o = (hi << 4) | lo;
        }
        Ok(Fingerprint(out))
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// An ephemeral self-signed ECDSA P-256 certificate and its key, made once per session.
///
/// Nothing chains to a CA: the peer trusts it only because its fingerprint arrived over
/// the already-authenticated ssh channel. The key leaves the process only when a client
/// keeps it for its next copy to the kept server ([`Identity::to_der`]; soku writes
/// it to a file only the user can read, beside its ssh control sockets).
pub struct Identity {
    cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
    fingerprint: Fingerprint,
}

/// The name in the certificate and the SNI the client sends; never checked (we pin),
/// but TLS needs one.
pub(crate) const SERVER_NAME: &str = "soku";

impl Identity {
    /// Generates a fresh key pair and self-signed certificate.
    pub fn generate() -> Result<Identity, TransportError> {
        // rcgen's default key is ECDSA P-256 with SHA-256: fast to make, small to send,
        // and verifiable by ring.
        let certified = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])?;
        let cert = certified.cert.der().clone();
        let key = PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
        let fingerprint = Fingerprint::of_der(&cert);
        Ok(Identity { cert, key, fingerprint })
    }

    /// SHA-256 of this identity's certificate, to send to the peer over ssh.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// The certificate's DER.
    pub fn cert_der(&self) -> &[u8] {
        &self.cert
    }

    /// The certificate's and the key's DER (PKCS#8), for [`Identity::from_der`].
    pub fn to_der(&self) -> (Vec<u8>, Vec<u8>) {
        (self.cert.to_vec(), self.key.secret_pkcs8_der().to_vec())
    }

    /// An identity made earlier ([`Identity::to_der`]): the key must be one rustls can
    /// sign with, which is checked here rather than at the first handshake.
    pub fn from_der(cert: Vec<u8>, key: Vec<u8>) -> Result<Identity, TransportError> {
        let key = PrivatePkcs8KeyDer::from(key);
        rustls::crypto::ring::sign::any_supported_type(&PrivateKeyDer::Pkcs8(key.clone_key()))
            .map_err(|e| TransportError::Identity(format!("a kept key: {e}")))?;
        let cert = CertificateDer::from(cert);
        let fingerprint = Fingerprint::of_der(&cert);
        Ok(Identity { cert, key, fingerprint })
    }

    pub(crate) fn cert_chain(&self) -> Vec<CertificateDer<'static>> {
        vec![self.cert.clone()]
    }

    pub(crate) fn private_key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(self.key.clone_key())
    }
}

impl fmt::Debug for Identity {
    /// Never prints the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity").field("fingerprint", &self.fingerprint).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_hex_round_trip() {
        let fp = Fingerprint(std::array::from_fn(|i| (i * 9) as u8));
        let text = fp.to_string();
        assert_eq!(text.len(), 64);
        assert!(text.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        assert_eq!(text.parse::<Fingerprint>().unwrap(), fp);
        assert_eq!(text.to_uppercase().parse::<Fingerprint>().unwrap(), fp);
    }

    #[test]
    fn fingerprint_rejects_bad_hex() {
        let good = "ab".repeat(32);
        for bad in [
            String::new(),
            "ab".repeat(31),
            "ab".repeat(33),
            format!("{}g", &good[..63]),
            format!("{}é", &good[..62]),
            format!(" {}", &good[..63]),
        ] {
            let err = bad.parse::<Fingerprint>().unwrap_err();
            assert!(matches!(err, TransportError::BadFingerprint(_)), "{bad:?}");
        }
    }

    #[test]
    fn identity_fingerprint_is_sha256_of_der() {
        let id = Identity::generate().unwrap();
        let expected = ring::digest::digest(&ring::digest::SHA256, id.cert_der());
        assert_eq!(id.fingerprint().0.as_slice(), expected.as_ref());
        assert_ne!(Identity::generate().unwrap().fingerprint(), id.fingerprint());
    }

    #[test]
    fn constant_time_eq_agrees_with_eq() {
        let a = Fingerprint([7; 32]);
        let mut b = a;
        assert!(a.ct_eq(&b));
        b.0[31] ^= 1;
        assert!(!a.ct_eq(&b));
    }
}
