//! The TLS 1.3 cipher suites `-c` can choose, and the crypto provider built from them.

use std::fmt;
use std::str::FromStr;

use rustls::crypto::ring::cipher_suite;
use rustls::crypto::CryptoProvider;
use rustls::SupportedCipherSuite;

use crate::TransportError;

/// A TLS 1.3 AEAD suite, selectable with `-c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cipher {
    /// TLS_AES_128_GCM_SHA256: the default; fastest with AES-NI (7.8 GB/s/core in ring here).
    Aes128Gcm,
    /// TLS_AES_256_GCM_SHA384.
    Aes256Gcm,
    /// TLS_CHACHA20_POLY1305_SHA256: for CPUs without AES instructions.
    Chacha20Poly1305,
}

impl Cipher {
    /// Every suite, in our order of preference (used when `-c` is not given).
    pub const ALL: [Cipher; 3] = [Cipher::Aes128Gcm, Cipher::Aes256Gcm, Cipher::Chacha20Poly1305];

    /// The canonical `-c` name.
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes128Gcm => "aes128-gcm",
            Cipher::Aes256Gcm => "aes256-gcm",
            Cipher::Chacha20Poly1305 => "chacha20-poly1305",
        }
    }

    /// The ring provider's implementation of this suite.
    pub(crate) fn suite(self) -> SupportedCipherSuite {
        match self {
            Cipher::Aes128Gcm => cipher_suite::TLS13_AES_128_GCM_SHA256,
            Cipher::Aes256Gcm => cipher_suite::TLS13_AES_256_GCM_SHA384,
            Cipher::Chacha20Poly1305 => cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
        }
    }
}

impl fmt::Display for Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Cipher {
    type Err = TransportError;

    /// Accepts our names and OpenSSH's (`aes128-gcm@openssh.com`, ...), so a `-c` that
    /// worked with scp keeps working.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let base = s.strip_suffix("@openssh.com").unwrap_or(s);
        Cipher::ALL
            .into_iter()
            .find(|c| c.name() == base)
            .ok_or_else(|| TransportError::UnknownCipher(s.to_string()))
    }
}

/// The ring provider restricted to TLS 1.3 suites: only `cipher` when given, otherwise
/// all three with AES-128-GCM first. Key exchange groups and signature algorithms stay
/// ring's defaults.
pub(crate) fn provider(cipher: Option<Cipher>) -> CryptoProvider {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = match cipher {
        Some(c) => vec![c.suite()],
        None => Cipher::ALL.iter().map(|c| c.suite()).collect(),
    };
    provider
}

/// QUIC protects Initial packets with AES-128-GCM whatever suite the handshake then
/// picks (RFC 9001 §5.2), so quinn needs this suite even when `-c` excludes it from TLS.
pub(crate) fn quic_initial_suite() -> Result<rustls::quic::Suite, TransportError> {
    cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|s| s.quic_suite())
        .ok_or(TransportError::NoInitialSuite)
}

/// How fast this host seals with `cipher` on one core, bytes per second: ring's AEAD
/// (the implementation rustls's ring provider, and so QUIC's packet protection and TLS
/// over TCP, use) over 64 KiB records for about `budget`. At least one pass runs, so a
/// slow host still gets a number.
pub fn seal_speed(cipher: Cipher, budget: std::time::Duration) -> u64 {
    use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
    let algorithm = match cipher {
        Cipher::Aes128Gcm => &aead::AES_128_GCM,
        Cipher::Aes256Gcm => &aead::AES_256_GCM,
        Cipher::Chacha20Poly1305 => &aead::CHACHA20_POLY1305,
    };
    let key_bytes = [7u8; 32];
    let Ok(unbound) = UnboundKey::new(algorithm, &key_bytes[..algorithm.key_len()]) else {
        return 0;
    };
    let key = LessSafeKey::new(unbound);
    let mut record = vec![0x5au8; 64 * 1024];
    let started = std::time::Instant::now();
    let mut sealed = 0u64;
    let mut counter = 0u64;
    // Bounded: at most 64 Ki records (4 GiB) even if the clock stood still.
    while counter < 65_536 && (counter == 0 || started.elapsed() < budget) {
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&counter.to_be_bytes());
        counter += 1;
        let nonce = Nonce::assume_unique_for_key(nonce);
        if key.seal_in_place_separate_tag(nonce, Aad::empty(), &mut record).is_err() {
            return 0;
        }
        sealed += record.len() as u64;
    }
    let secs = started.elapsed().as_secs_f64().max(1e-6);
    (sealed as f64 / secs) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cipher_seals_at_some_speed() {
        for c in Cipher::ALL {
            assert!(seal_speed(c, std::time::Duration::from_millis(5)) > 0, "{c}");
        }
    }

    #[test]
    fn names_parse_in_both_spellings() {
        for c in Cipher::ALL {
            assert_eq!(c.name().parse::<Cipher>().unwrap(), c);
            assert_eq!(format!("{c}@openssh.com").parse::<Cipher>().unwrap(), c);
        }
    }

    #[test]
    fn unknown_name_is_refused_with_the_choices() {
        let err = "aes128-ctr".parse::<Cipher>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown cipher \"aes128-ctr\"; choose aes128-gcm, aes256-gcm or chacha20-poly1305"
        );
        assert!("".parse::<Cipher>().is_err());
        assert!("@openssh.com".parse::<Cipher>().is_err());
    }

    #[test]
    fn provider_is_restricted_to_the_chosen_suite() {
        for c in Cipher::ALL {
            let suites: Vec<_> =
                provider(Some(c)).cipher_suites.iter().map(|s| s.suite()).collect();
            assert_eq!(suites, vec![c.suite().suite()]);
        }
        let default: Vec<_> = provider(None).cipher_suites.iter().map(|s| s.suite()).collect();
        assert_eq!(default[0], rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
        assert_eq!(default.len(), 3);
        assert!(provider(None).cipher_suites.iter().all(|s| s.tls13().is_some()));
    }
}
