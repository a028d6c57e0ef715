//! Names as the file system spells them.
//!
//! On Unix a file name is bytes, any but `/` and NUL: UTF-8 or not (`café` written
//! by a Latin-1 program is `caf\xe9`). scp and rsync copy such names byte for byte, and
//! so does soku: a [`Name`] holds the bytes, and travels as a byte string, with the
//! framing of a `String` (postcard: a varint length, then the bytes) and without its
//! UTF-8 rule. A peer from before [`BYTE_NAMES_SINCE_VERSION`] decodes names as
//! strings, so a sender sends it only UTF-8 names (see `soku-engine`'s walk).
//!
//! This module is the one place that turns a name into the platform's [`OsStr`] and
//! back ([`Name::from_os`], [`Name::to_os`]); a port to a platform whose names are not
//! bytes changes these two, not their callers.
//!
//! For people a name is shown by [`Name`]'s `Display` (and [`shown`] for a local
//! path): UTF-8 as it is, each byte that is not as `\xNN`, the way `ui::visible`
//! shows another program's bytes. A name's own backslash is left as it is, as scp
//! leaves it.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The first protocol version whose peer takes names that are not UTF-8.
pub const BYTE_NAMES_SINCE_VERSION: u16 = 8;

/// A file name (or a path the user typed) as bytes.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Name(Vec<u8>);

impl Name {
    /// The name of these bytes.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Self {
        Name(bytes.into())
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The name as text, when it is UTF-8.
    pub fn to_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// Whether a peer from before [`BYTE_NAMES_SINCE_VERSION`] can decode it.
    pub fn is_utf8(&self) -> bool {
        self.to_str().is_some()
    }

    /// The name of a local file name or path; `None` where the platform's names are not
    /// bytes and this one cannot be spelled as UTF-8.
    pub fn from_os(name: &OsStr) -> Option<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            Some(Name(name.as_bytes().to_vec()))
        }
        #[cfg(not(unix))]
        {
            name.to_str().map(|s| Name(s.as_bytes().to_vec()))
        }
    }

    /// The local spelling of the name; `None` where the platform's names are not bytes
    /// and this one is not UTF-8.
    pub fn to_os(&self) -> Option<&OsStr> {
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            Some(OsStr::from_bytes(&self.0))
        }
        #[cfg(not(unix))]
        {
            self.to_str().map(OsStr::new)
        }
    }

    /// The name as text a glob can match, without losing a byte: each byte that is not
    /// UTF-8 becomes one character of its own (U+10FF00 plus the byte, in a private-use
    /// plane no file name needs), so `?` matches one such byte, as the shell's does.
    pub fn glob_text(&self) -> Cow<'_, str> {
        glob_text(&self.0)
    }
}

/// [`Name::glob_text`] of some bytes.
pub fn glob_text(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for &b in chunk.invalid() {
            // safe: 0x10FF00 + 0xFF is at most 0x10FFFF, a scalar value, never a surrogate
            out.push(char::from_u32(0x10_FF00 + u32::from(b)).unwrap_or('\u{fffd}'));
        }
    }
    Cow::Owned(out)
}

/// How bytes are shown to people: UTF-8 as it is, every other byte as `\xNN`.
pub fn shown_bytes(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    Cow::Owned(out)
}

/// A local path as it is shown to people (see the module documentation): where
/// `Path::display` would put U+FFFD for a byte that is not UTF-8, this writes `\xNN`,
/// so the line names the file exactly.
pub fn shown(path: &(impl AsRef<OsStr> + ?Sized)) -> String {
    let os = path.as_ref();
    match os.to_str() {
        Some(text) => text.to_string(),
        None => match Name::from_os(os) {
            Some(name) => shown_bytes(name.as_bytes()).into_owned(),
            None => os.to_string_lossy().into_owned(),
        },
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&shown_bytes(&self.0))
    }
}

impl fmt::Debug for Name {
    /// A UTF-8 name as a string's `Debug`; any other in quotes, each byte that is not
    /// UTF-8 as `\xNN` (a string's `Debug` would double its backslash).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_str() {
            Some(text) => write!(f, "{text:?}"),
            None => write!(f, "\"{}\"", shown_bytes(&self.0)),
        }
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Self {
        Name(text.as_bytes().to_vec())
    }
}

impl From<String> for Name {
    fn from(text: String) -> Self {
        Name(text.into_bytes())
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_byte_buf(NameVisitor)
    }
}

struct NameVisitor;

impl<'de> serde::de::Visitor<'de> for NameVisitor {
    type Value = Name;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a name as bytes")
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Name, E> {
        Ok(Name(v.to_vec()))
    }

    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Name, E> {
        Ok(Name(v))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Name, E> {
        Ok(Name(v.as_bytes().to_vec()))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Name, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(b) = seq.next_element::<u8>()? {
            bytes.push(b);
        }
        Ok(Name(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: a name framed differently from a `String`, which would break every
    /// peer from before byte names even for UTF-8 names.
    #[test]
    fn a_utf8_name_is_framed_as_a_string() {
        let name = Name::from("café.txt");
        let as_name = postcard::to_stdvec(&name).expect("encode");
        let as_string = postcard::to_stdvec(&"café.txt".to_string()).expect("encode");
        assert_eq!(as_name, as_string);
        let back: String = postcard::from_bytes(&as_name).expect("an old peer decodes it");
        assert_eq!(back, "café.txt");
        let from_string: Name = postcard::from_bytes(&as_string).expect("decode");
        assert_eq!(from_string, name);
    }

    /// Catches: bytes that are not UTF-8 changed, dropped or refused on the way.
    #[test]
    fn bytes_that_are_not_utf8_round_trip() {
        let name = Name::from_bytes(b"caf\xe9.txt".to_vec());
        let wire = postcard::to_stdvec(&name).expect("encode");
        assert_eq!(wire, b"\x08caf\xe9.txt");
        let back: Name = postcard::from_bytes(&wire).expect("decode");
        assert_eq!(back.as_bytes(), b"caf\xe9.txt");
        assert!(!back.is_utf8());
        assert!(postcard::from_bytes::<String>(&wire).is_err(), "an old peer refuses it");
    }

    #[test]
    fn names_are_shown_with_each_bad_byte_escaped() {
        assert_eq!(Name::from_bytes(b"caf\xe9.txt".to_vec()).to_string(), "caf\\xe9.txt");
        assert_eq!(Name::from_bytes(b"d\xff\xfe".to_vec()).to_string(), "d\\xff\\xfe");
        assert_eq!(Name::from("日本").to_string(), "日本");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            assert_eq!(shown(OsStr::from_bytes(b"/t/caf\xe9/x")), "/t/caf\\xe9/x");
        }
    }

    #[test]
    fn glob_text_keeps_every_byte_apart() {
        let a = Name::from_bytes(b"a\xe9".to_vec());
        let b = Name::from_bytes(b"a\xe8".to_vec());
        assert_ne!(a.glob_text(), b.glob_text());
        assert_eq!(a.glob_text().chars().count(), 2, "one character per byte");
        assert!(matches!(Name::from("plain").glob_text(), Cow::Borrowed("plain")));
    }
}
