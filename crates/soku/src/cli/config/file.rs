//! One config file: TOML, top-level keys for every host and `[host."PATTERNS"]` sections
//! for the hosts their ssh-style patterns match (see `pattern.rs`). Every key is checked
//! when the file is read; a mistake is reported with the file, the line and the key,
//! never replaced by a default.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use soku_proto::chunk::check_chunk_size;
use soku_transport::Cipher;
use toml::Spanned;

use super::error::ConfigError;
use super::pattern::HostPatterns;
use super::settings::{Origin, Set, Settings};
use crate::cli::size::parse_size;
use crate::cli::transport_mode::TransportMode;

/// A file as written: every key optional, nothing interpreted yet.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawSection {
    cipher: Option<Spanned<String>>,
    compress: Option<Spanned<bool>>,
    limit_kbps: Option<Spanned<u64>>,
    background: Option<Spanned<bool>>,
    transport: Option<Spanned<String>>,
    quic_timeout: Option<Spanned<f64>>,
    retry_for: Option<Spanned<u64>>,
    resume: Option<Spanned<bool>>,
    fsync: Option<Spanned<bool>>,
    share_login: Option<Spanned<bool>>,
    deploy: Option<Spanned<bool>>,
    chunk_size: Option<Spanned<toml::Value>>,
    remote_ports: Option<Spanned<String>>,
    remote_soku: Option<Spanned<String>>,
    ssh_program: Option<Spanned<String>>,
    /// Only at the top level: sections do not nest.
    host: Option<Spanned<BTreeMap<String, Spanned<RawSection>>>>,
}

/// A `[host."PATTERNS"]` section.
#[derive(Debug)]
struct HostSection {
    patterns: HostPatterns,
    settings: Settings,
}

/// A parsed, checked config file.
#[derive(Debug)]
pub struct ConfigFile {
    global: Settings,
    /// In file order: the first section that matches and sets a key wins (ssh_config's
    /// rule), so specific hosts go before wide patterns.
    hosts: Vec<HostSection>,
}

impl ConfigFile {
    /// Reads `path`; `Ok(None)` when there is no such file.
    pub fn read(path: &Path) -> Result<Option<ConfigFile>, ConfigError> {
        match read_text(path)? {
            Some(text) => ConfigFile::parse(path, &text).map(Some),
            None => Ok(None),
        }
    }

    /// Parses and checks `text`, read from `path` (named in errors and origins).
    pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigError> {
        let at = Locator { path, text };
        let mut raw: RawSection = toml::from_str(text).map_err(|e| at.toml_error(&e))?;
        let mut sections: Vec<(String, Spanned<RawSection>)> =
            raw.host.take().map(|h| h.into_inner().into_iter().collect()).unwrap_or_default();
        sections.sort_by_key(|(_, s)| s.span().start);
        let global = at.settings(raw, None)?;
        let mut hosts = Vec::with_capacity(sections.len());
        for (name, section) in sections {
            let span = section.span();
            let mut raw = section.into_inner();
            if let Some(nested) = raw.host.take() {
                return Err(at.invalid(nested.span(), "host", "host sections do not nest"));
            }
            let patterns = HostPatterns::parse(&name).ok_or_else(|| {
                at.invalid(
                    span.clone(),
                    "host",
                    &format!("{name:?} has no pattern a host could match"),
                )
            })?;
            hosts.push(HostSection { patterns, settings: at.settings(raw, Some(&name))? });
        }
        Ok(ConfigFile { global, hosts })
    }

    /// What this file sets for `host` (`None`: a local copy, top-level keys only).
    pub fn for_host(&self, host: Option<&str>) -> Settings {
        let mut settings = Settings::default();
        if let Some(host) = host {
            for section in self.hosts.iter().filter(|s| s.patterns.matches(host)) {
                settings = settings.over(section.settings.clone());
            }
        }
        settings.over(self.global.clone())
    }
}

/// Largest config file soku reads. Every key in a thousand host sections comes to
/// about 200 kB; a file beyond 1 MiB is something else saved under the name (a log, an
/// image), or a device that never ends, and reading on would only fill memory.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The text of the config file at `path`, if there is one: a regular file (through
/// symlinks) of at most [`MAX_CONFIG_BYTES`]. Opened without blocking, so that a FIFO
/// is refused rather than waited on for a writer; a device or a FIFO is named, never
/// read.
fn read_text(path: &Path) -> Result<Option<String>, ConfigError> {
    use std::io::Read as _;
    let failed = |source| ConfigError::Read { path: path.to_path_buf(), source };
    let file = crate::sys::open_without_waiting(path);
    let file = match file {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(failed(e)),
    };
    let kind = file.metadata().map_err(failed)?.file_type();
    let what = if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a directory")
    } else {
        Some(crate::sys::special_kind(kind).unwrap_or("not a regular file"))
    };
    if let Some(what) = what {
        return Err(ConfigError::NotRegular { path: path.to_path_buf(), what });
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut bytes).map_err(failed)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge { path: path.to_path_buf(), limit: MAX_CONFIG_BYTES });
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| failed(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// Turns byte offsets into `file:line` origins and errors.
struct Locator<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Locator<'_> {
    fn line(&self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        self.text.as_bytes()[..offset].iter().filter(|&&b| b == b'\n').count() + 1
    }

    fn invalid(&self, span: Range<usize>, key: &str, problem: &str) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_path_buf(),
            line: self.line(span.start),
            key: key.to_string(),
            problem: problem.to_string(),
        }
    }

    /// TOML's own errors (syntax, unknown keys, wrong types), with the key taken from the
    /// line the error points at.
    fn toml_error(&self, err: &toml::de::Error) -> ConfigError {
        let span = err.span().unwrap_or(0..0);
        let line_start =
            self.text[..span.start.min(self.text.len())].rfind('\n').map_or(0, |i| i + 1);
        let line_text = self.text[line_start..].lines().next().unwrap_or("");
        let key = line_text.split_once('=').map_or("", |(k, _)| k.trim()).trim_matches('"');
        let mut problem = err.message().trim().to_string();
        if problem.starts_with("unknown field") {
            problem = format!("{problem}; see `soku config` for the keys and their meaning");
        }
        self.invalid(span, key, &problem)
    }

    fn origin(&self, span: Range<usize>, section: Option<&str>) -> Origin {
        Origin::File {
            path: self.path.to_path_buf(),
            line: self.line(span.start),
            section: section.map(str::to_string),
        }
    }

    /// Checks every key of a section and types it.
    fn settings(&self, raw: RawSection, section: Option<&str>) -> Result<Settings, ConfigError> {
        Ok(Settings {
            cipher: self.checked(raw.cipher, section, "cipher", |s| {
                s.parse::<Cipher>().map_err(|_| {
                    "unknown cipher: use aes128-gcm, aes256-gcm or chacha20-poly1305".into()
                })
            })?,
            compress: self.plain(raw.compress, section),
            limit_kbps: self.checked(raw.limit_kbps, section, "limit-kbps", |k| {
                if *k == 0 {
                    Err("must be above 0 (leave it out for no limit)".into())
                } else {
                    Ok(*k)
                }
            })?,
            background: self.plain(raw.background, section),
            transport: self.checked(raw.transport, section, "transport", |s| {
                <TransportMode as clap::ValueEnum>::from_str(s, true)
                    .map_err(|_| "unknown transport: use auto, quic, tcp or ssh".into())
            })?,
            quic_timeout: self.checked(raw.quic_timeout, section, "quic-timeout", |s| {
                if (0.1..=600.0).contains(s) {
                    Ok(*s)
                } else {
                    Err("must be between 0.1 and 600 seconds".into())
                }
            })?,
            retry_for: self.plain(raw.retry_for, section),
            resume: self.plain(raw.resume, section),
            fsync: self.plain(raw.fsync, section),
            share_login: self.plain(raw.share_login, section),
            deploy: self.plain(raw.deploy, section),
            chunk_size: self.checked(raw.chunk_size, section, "chunk-size", chunk_size)?,
            remote_ports: self.checked(raw.remote_ports, section, "remote-ports", |s| {
                crate::server::ports::parse_range(s)
            })?,
            remote_soku: self.checked(raw.remote_soku, section, "remote-soku", |s| not_empty(s))?,
            ssh_program: self.checked(raw.ssh_program, section, "ssh-program", |s| not_empty(s))?,
        })
    }

    /// A key whose type is its whole check.
    fn plain<T>(&self, value: Option<Spanned<T>>, section: Option<&str>) -> Option<Set<T>> {
        value.map(|value| {
            let origin = self.origin(value.span(), section);
            Set { value: value.into_inner(), origin }
        })
    }

    fn checked<R, T>(
        &self,
        value: Option<Spanned<R>>,
        section: Option<&str>,
        key: &str,
        check: impl Fn(&R) -> Result<T, String>,
    ) -> Result<Option<Set<T>>, ConfigError> {
        let Some(value) = value else { return Ok(None) };
        match check(value.get_ref()) {
            Ok(typed) => Ok(Some(Set { value: typed, origin: self.origin(value.span(), section) })),
            Err(problem) => Err(self.invalid(value.span(), key, &problem)),
        }
    }
}

fn not_empty(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        Err("must not be empty (leave the key out for the default)".into())
    } else {
        Ok(s.to_string())
    }
}

/// `chunk-size = 4194304` or `chunk-size = "4MiB"` (K, M, G: powers of 1024).
fn chunk_size(value: &toml::Value) -> Result<u32, String> {
    let bytes = match value {
        toml::Value::Integer(n) => u64::try_from(*n).ok(),
        toml::Value::String(s) => parse_size(s),
        _ => None,
    };
    let bytes = bytes.ok_or("expected bytes, as a number or like \"4MiB\"")?;
    u32::try_from(bytes)
        .ok()
        .and_then(|b| check_chunk_size(b).ok())
        .ok_or_else(|| "must be between 16 KiB and 16 MiB".to_string())
}

/// The files soku reads, highest precedence first: the user's, then the system's.
pub fn default_paths() -> Vec<PathBuf> {
    let user_dir = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
    let mut paths: Vec<PathBuf> =
        user_dir.map(|d| d.join("soku/config.toml")).into_iter().collect();
    paths.push(PathBuf::from("/etc/soku/config.toml"));
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        ConfigFile::parse(Path::new("/home/u/.config/soku/config.toml"), text)
    }

    fn error(text: &str) -> String {
        parse(text).expect_err("must be refused").to_string()
    }

    #[test]
    fn an_empty_file_sets_nothing() {
        let file = parse("").expect("parses");
        assert_eq!(file.for_host(Some("any")), Settings::default());
    }

    #[test]
    fn every_key_is_read_and_typed() {
        let file = parse(
            "cipher = \"chacha20-poly1305\"\ncompress = true\nlimit-kbps = 50000\n\
             background = true\ntransport = \"tcp\"\nquic-timeout = 2\nretry-for = 60\n\
             resume = false\nfsync = false\nshare-login = false\nchunk-size = \"4MiB\"\n\
             remote-ports = \"40000-40100\"\nremote-soku = \"/opt/soku\"\nssh-program = \"myssh\"\n",
        )
        .expect("parses");
        let s = file.for_host(None);
        assert_eq!(s.cipher.map(|s| s.value), Some(Cipher::Chacha20Poly1305));
        assert_eq!(s.compress.map(|s| s.value), Some(true));
        assert_eq!(s.limit_kbps.map(|s| s.value), Some(50_000));
        assert_eq!(s.background.map(|s| s.value), Some(true));
        assert_eq!(s.transport.map(|s| s.value), Some(TransportMode::Tcp));
        assert_eq!(s.quic_timeout.map(|s| s.value), Some(2.0));
        assert_eq!(s.retry_for.map(|s| s.value), Some(60));
        assert_eq!(s.resume.map(|s| s.value), Some(false));
        assert_eq!(s.fsync.map(|s| s.value), Some(false));
        assert_eq!(s.share_login.map(|s| s.value), Some(false));
        assert_eq!(s.chunk_size.map(|s| s.value), Some(4 << 20));
        assert_eq!(s.remote_ports.map(|s| s.value), Some(40000..=40100));
        assert_eq!(s.remote_soku.map(|s| s.value).as_deref(), Some("/opt/soku"));
        let ssh = s.ssh_program.expect("set");
        assert_eq!(ssh.value, "myssh");
        assert_eq!(
            ssh.origin,
            Origin::File {
                path: "/home/u/.config/soku/config.toml".into(),
                line: 14,
                section: None
            }
        );
    }

    #[test]
    fn host_sections_beat_the_top_level_and_the_first_match_wins() {
        let file = parse(
            "transport = \"quic\"\nretry-for = 5\n\n\
             [host.\"db.lab\"]\ntransport = \"tcp\"\n\n\
             [host.\"*.lab !bad.lab\"]\ntransport = \"ssh\"\ncompress = true\n",
        )
        .expect("parses");
        let db = file.for_host(Some("db.lab"));
        let t = db.transport.expect("set");
        assert_eq!(t.value, TransportMode::Tcp, "the first matching section wins");
        assert_eq!(
            t.origin,
            Origin::File {
                path: "/home/u/.config/soku/config.toml".into(),
                line: 5,
                section: Some("db.lab".into())
            }
        );
        assert_eq!(db.compress.map(|s| s.value), Some(true), "later sections fill other keys");
        assert_eq!(db.retry_for.map(|s| s.value), Some(5), "the top level fills the rest");
        let web = file.for_host(Some("WEB.lab"));
        assert_eq!(web.transport.map(|s| s.value), Some(TransportMode::Ssh));
        let bad = file.for_host(Some("bad.lab"));
        assert_eq!(bad.transport.map(|s| s.value), Some(TransportMode::Quic));
        assert!(bad.compress.is_none());
        assert_eq!(file.for_host(None).transport.map(|s| s.value), Some(TransportMode::Quic));
    }

    #[test]
    fn section_order_is_the_file_order_not_the_names_order() {
        let file =
            parse("[host.\"z*\"]\nretry-for = 1\n[host.\"*\"]\nretry-for = 2\n").expect("parses");
        assert_eq!(file.for_host(Some("zed")).retry_for.map(|s| s.value), Some(1));
    }

    #[test]
    fn an_unknown_key_names_file_line_and_key() {
        let msg = error("compress = true\n\ncompresion = true\n");
        assert!(msg.starts_with("/home/u/.config/soku/config.toml:3: compresion:"), "{msg}");
        assert!(msg.contains("unknown field"), "{msg}");
    }

    #[test]
    fn a_wrong_type_names_file_line_and_key() {
        let msg = error("\ncompress = \"yes\"\n");
        assert!(msg.starts_with("/home/u/.config/soku/config.toml:2: compress:"), "{msg}");
    }

    #[test]
    fn a_bad_value_names_file_line_and_key() {
        for (text, key, needle) in [
            ("transport = \"udp\"", "transport", "auto, quic, tcp or ssh"),
            ("cipher = \"rot13\"", "cipher", "aes128-gcm"),
            ("chunk-size = \"1GiB\"", "chunk-size", "16 KiB and 16 MiB"),
            ("chunk-size = \"lots\"", "chunk-size", "expected bytes"),
            ("remote-ports = \"9-1\"", "remote-ports", "above the last"),
            ("quic-timeout = 0", "quic-timeout", "between 0.1 and 600"),
            ("limit-kbps = 0", "limit-kbps", "above 0"),
            ("remote-soku = \" \"", "remote-soku", "must not be empty"),
        ] {
            let msg = error(&format!("# comment\n[host.\"h\"]\n{text}\n"));
            let want = format!("/home/u/.config/soku/config.toml:3: {key}: ");
            assert!(msg.starts_with(&want) && msg.contains(needle), "{text}: {msg}");
        }
    }

    #[test]
    fn a_syntax_error_names_file_and_line() {
        let msg = error("compress = true\nretry-for = = 3\n");
        assert!(msg.starts_with("/home/u/.config/soku/config.toml:2:"), "{msg}");
    }

    #[test]
    fn sections_do_not_nest_and_need_a_pattern() {
        assert!(error("[host.\"a\".host.\"b\"]\nfsync = true\n").contains("do not nest"));
        assert!(error("[host.\"!a\"]\nfsync = true\n").contains("no pattern"));
    }

    #[test]
    fn the_user_file_comes_before_the_system_file() {
        let paths = default_paths();
        assert_eq!(paths.last().map(PathBuf::as_path), Some(Path::new("/etc/soku/config.toml")));
    }
}
