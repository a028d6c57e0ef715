//! `-c`: scp passes it to ssh, which encrypts scp's data; soku's data goes over QUIC or
//! TLS with a cipher of its own. A name of soku's picks the data's cipher; a name of
//! ssh's (scripts keep `-c aes128-ctr`) goes to ssh for the login, as scp's does, and
//! the data keeps soku's cipher of the same algorithm, or soku's default.

use soku_transport::Cipher;

/// The ciphers OpenSSH's client takes for `-c` (ssh -Q cipher, OpenSSH 9).
const SSH_CIPHERS: [&str; 10] = [
    "3des-cbc",
    "aes128-cbc",
    "aes192-cbc",
    "aes256-cbc",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
];

/// What `-c` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CipherChoice {
    /// The data's cipher; `None`: soku's default.
    pub data: Option<Cipher>,
    /// Passed to ssh as `-c`, for the login.
    pub login: Option<String>,
}

impl CipherChoice {
    /// Reads `-c NAME`; an error names both kinds of cipher.
    pub fn parse(name: &str) -> Result<CipherChoice, String> {
        if !name.contains('@') && !name.contains(',') {
            if let Ok(cipher) = name.parse::<Cipher>() {
                return Ok(CipherChoice { data: Some(cipher), login: None });
            }
        }
        let items: Vec<&str> = name.split(',').collect();
        if items.iter().all(|item| SSH_CIPHERS.contains(item)) {
            let data = items.iter().find_map(|item| item.parse::<Cipher>().ok());
            return Ok(CipherChoice { data, login: Some(name.to_string()) });
        }
        Err(format!(
            "unknown cipher {name:?}: soku's for the data are aes128-gcm, aes256-gcm and \
             chacha20-poly1305; an ssh cipher for the login is one of {}",
            SSH_CIPHERS.join(", ")
        ))
    }

    /// The line `-v` prints when ssh got the cipher: what protects what.
    pub fn said(&self) -> Option<String> {
        let login = self.login.as_ref()?;
        let data = self.data.map_or("soku's default cipher".to_string(), |c| c.name().to_string());
        Some(format!("-c {login}: ssh logs in with it; the data is encrypted with {data}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_soku_name_picks_the_data_cipher_and_an_ssh_name_goes_to_ssh() {
        let soku = CipherChoice::parse("chacha20-poly1305").expect("soku's");
        assert_eq!(soku, CipherChoice { data: Some(Cipher::Chacha20Poly1305), login: None });
        assert_eq!(soku.said(), None);
        let ctr = CipherChoice::parse("aes128-ctr").expect("ssh's");
        assert_eq!(ctr, CipherChoice { data: None, login: Some("aes128-ctr".into()) });
        assert!(ctr.said().expect("said").contains("soku's default"));
        // The same algorithm for the data, when soku has it.
        let gcm = CipherChoice::parse("aes256-ctr,aes256-gcm@openssh.com").expect("ssh's");
        assert_eq!(gcm.data, Some(Cipher::Aes256Gcm));
        assert_eq!(gcm.login.as_deref(), Some("aes256-ctr,aes256-gcm@openssh.com"));
    }

    #[test]
    fn an_unknown_name_is_refused_naming_both_kinds() {
        for name in ["rot13", "aes128-ctr,rot13", "", "aes128-gcm,aes256-gcm"] {
            let err = CipherChoice::parse(name).expect_err(name);
            assert!(err.contains("aes128-gcm") && err.contains("aes128-ctr"), "{err}");
        }
    }
}
