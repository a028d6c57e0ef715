//! The tunables a config file may set, each remembered with where its value came from,
//! so `soku config` can say why a copy runs as it does.

use std::fmt;
use std::ops::RangeInclusive;
use std::path::PathBuf;

use soku_proto::chunk::DEFAULT_CHUNK_SIZE;
use soku_transport::Cipher;

use crate::cli::args::{CopyArgs, SshArgs, DEFAULT_QUIC_TIMEOUT_SECS, DEFAULT_RETRY_FOR_SECS};
use crate::cli::transport_mode::TransportMode;
use crate::ui::human_bytes;

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// An option on the command line.
    CommandLine,
    /// A line of a config file, at its top level or in a `[host."PATTERNS"]` section.
    File { path: PathBuf, line: usize, section: Option<String> },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::CommandLine => f.write_str("command line"),
            Origin::File { path, line, section: None } => write!(f, "{}:{line}", path.display()),
            Origin::File { path, line, section: Some(s) } => {
                write!(f, "{}:{line} [host.{s:?}]", path.display())
            }
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Set<T> {
    pub value: T,
    pub origin: Origin,
}

impl<T> Set<T> {
    fn cli(value: T) -> Option<Set<T>> {
        Some(Set { value, origin: Origin::CommandLine })
    }
}

/// Every tunable, `None` where this layer says nothing. Keys in a file are these names
/// in kebab case (`quic-timeout`), the long option's name where the command line has one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub cipher: Option<Set<Cipher>>,
    pub compress: Option<Set<bool>>,
    pub limit_kbps: Option<Set<u64>>,
    pub background: Option<Set<bool>>,
    pub transport: Option<Set<TransportMode>>,
    pub quic_timeout: Option<Set<f64>>,
    pub retry_for: Option<Set<u64>>,
    pub resume: Option<Set<bool>>,
    pub fsync: Option<Set<bool>>,
    pub share_login: Option<Set<bool>>,
    pub deploy: Option<Set<bool>>,
    pub chunk_size: Option<Set<u32>>,
    pub remote_ports: Option<Set<RangeInclusive<u16>>>,
    pub remote_soku: Option<Set<String>>,
    pub ssh_program: Option<Set<String>>,
}

/// One line of `soku config`: key, effective value, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub key: &'static str,
    pub value: String,
    /// `None`: soku's own default.
    pub origin: Option<Origin>,
}

impl Settings {
    /// What the command line gave. A flag that can only switch something on (`-C`,
    /// `--no-fsync`) counts as given only when present.
    pub fn from_args(args: &CopyArgs) -> Settings {
        let on = |flag: bool, value: bool| if flag { Set::cli(value) } else { None };
        let transport =
            if args.force_ssh_channel { Some(TransportMode::Ssh) } else { args.transport };
        Settings {
            cipher: None, // parsed (and refused if unknown) by the copy itself
            compress: on(args.compress, true),
            limit_kbps: args.limit_kbps.and_then(Set::cli),
            background: on(args.background, true),
            transport: transport.and_then(Set::cli),
            quic_timeout: args.quic_timeout.and_then(Set::cli),
            retry_for: args.retry_for.and_then(Set::cli),
            resume: on(args.no_resume, false),
            fsync: on(args.no_fsync, false),
            share_login: on(args.no_share_login, false),
            chunk_size: args.chunk_size.and_then(Set::cli),
            ..Settings::from_ssh_args(&args.ssh)
        }
    }

    /// The ssh-side options of the command line (shared with `soku tunnel`).
    pub fn from_ssh_args(ssh: &SshArgs) -> Settings {
        Settings {
            remote_ports: ssh.remote_ports.clone().and_then(Set::cli),
            remote_soku: ssh.remote_soku.clone().and_then(Set::cli),
            ssh_program: ssh.ssh_program.clone().and_then(Set::cli),
            deploy: ssh.no_deploy.then(|| Set::cli(false)).flatten(),
            ..Settings::default()
        }
    }

    /// Each key from `self` where it is set, otherwise from `lower`.
    pub fn over(self, lower: Settings) -> Settings {
        Settings {
            cipher: self.cipher.or(lower.cipher),
            compress: self.compress.or(lower.compress),
            limit_kbps: self.limit_kbps.or(lower.limit_kbps),
            background: self.background.or(lower.background),
            transport: self.transport.or(lower.transport),
            quic_timeout: self.quic_timeout.or(lower.quic_timeout),
            retry_for: self.retry_for.or(lower.retry_for),
            resume: self.resume.or(lower.resume),
            fsync: self.fsync.or(lower.fsync),
            share_login: self.share_login.or(lower.share_login),
            deploy: self.deploy.or(lower.deploy),
            chunk_size: self.chunk_size.or(lower.chunk_size),
            remote_ports: self.remote_ports.or(lower.remote_ports),
            remote_soku: self.remote_soku.or(lower.remote_soku),
            ssh_program: self.ssh_program.or(lower.ssh_program),
        }
    }

    /// Writes the effective values into a copy's arguments; what no layer set stays as
    /// the command line left it (soku's defaults).
    pub fn apply_to(self, args: &mut CopyArgs) {
        if let Some(s) = &self.cipher {
            if args.cipher.is_none() {
                args.cipher = Some(s.value.name().to_string());
            }
        }
        args.compress = self.compress.as_ref().map_or(args.compress, |s| s.value);
        args.limit_kbps = self.limit_kbps.as_ref().map(|s| s.value).or(args.limit_kbps);
        args.background = self.background.as_ref().map_or(args.background, |s| s.value);
        args.transport = self.transport.as_ref().map(|s| s.value).or(args.transport);
        args.quic_timeout = self.quic_timeout.as_ref().map(|s| s.value).or(args.quic_timeout);
        args.retry_for = self.retry_for.as_ref().map(|s| s.value).or(args.retry_for);
        args.no_resume = self.resume.as_ref().map_or(args.no_resume, |s| !s.value);
        args.no_fsync = self.fsync.as_ref().map_or(args.no_fsync, |s| !s.value);
        args.no_share_login = self.share_login.as_ref().map_or(args.no_share_login, |s| !s.value);
        args.chunk_size = self.chunk_size.as_ref().map(|s| s.value).or(args.chunk_size);
        self.apply_to_ssh(&mut args.ssh);
    }

    /// Writes the ssh-side values (remote ports, remote soku, ssh program, deploy).
    pub fn apply_to_ssh(self, ssh: &mut SshArgs) {
        ssh.remote_ports = self.remote_ports.map(|s| s.value).or(ssh.remote_ports.take());
        ssh.remote_soku = self.remote_soku.map(|s| s.value).or(ssh.remote_soku.take());
        ssh.ssh_program = self.ssh_program.map(|s| s.value).or(ssh.ssh_program.take());
        ssh.no_deploy = self.deploy.map_or(ssh.no_deploy, |s| !s.value);
    }

    /// Every key with its effective value, soku's default where nothing set it.
    pub fn rows(&self) -> Vec<Row> {
        fn row<T>(
            key: &'static str,
            set: &Option<Set<T>>,
            show: impl Fn(&T) -> String,
            default: &str,
        ) -> Row {
            match set {
                Some(s) => Row { key, value: show(&s.value), origin: Some(s.origin.clone()) },
                None => Row { key, value: default.to_string(), origin: None },
            }
        }
        let yes_no = |b: &bool| if *b { "yes" } else { "no" }.to_string();
        let secs = |s: &f64| format!("{s} s");
        vec![
            row("cipher", &self.cipher, |c| c.name().to_string(), "negotiated (aes128-gcm first)"),
            row("compress", &self.compress, yes_no, "no"),
            row("limit-kbps", &self.limit_kbps, |k| format!("{k} Kbit/s"), "none"),
            row("background", &self.background, yes_no, "no"),
            row("transport", &self.transport, |t| t.name().to_string(), "auto"),
            row("quic-timeout", &self.quic_timeout, secs, &secs(&DEFAULT_QUIC_TIMEOUT_SECS)),
            row(
                "retry-for",
                &self.retry_for,
                |s| format!("{s} s"),
                &format!("{DEFAULT_RETRY_FOR_SECS} s"),
            ),
            row("resume", &self.resume, yes_no, "yes"),
            row("fsync", &self.fsync, yes_no, "yes"),
            row("share-login", &self.share_login, yes_no, "yes"),
            row("deploy", &self.deploy, yes_no, "yes"),
            row(
                "chunk-size",
                &self.chunk_size,
                |c| human_bytes(u64::from(*c)),
                &human_bytes(u64::from(DEFAULT_CHUNK_SIZE)),
            ),
            row(
                "remote-ports",
                &self.remote_ports,
                |r| format!("{}-{}", r.start(), r.end()),
                "any free port",
            ),
            row(
                "remote-soku",
                &self.remote_soku,
                String::clone,
                "soku (the remote PATH, ~/.local/bin, ~/.cargo/bin, ~/bin)",
            ),
            row("ssh-program", &self.ssh_program, String::clone, "ssh"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(line: usize) -> Origin {
        Origin::File { path: "/c.toml".into(), line, section: None }
    }

    #[test]
    fn upper_layer_wins_key_by_key() {
        let upper = Settings {
            compress: Some(Set { value: true, origin: Origin::CommandLine }),
            ..Settings::default()
        };
        let lower = Settings {
            compress: Some(Set { value: false, origin: file(1) }),
            retry_for: Some(Set { value: 9, origin: file(2) }),
            ..Settings::default()
        };
        let both = upper.over(lower);
        assert_eq!(both.compress.map(|s| (s.value, s.origin)), Some((true, Origin::CommandLine)));
        assert_eq!(both.retry_for.map(|s| (s.value, s.origin)), Some((9, file(2))));
    }

    #[test]
    fn command_line_flags_count_only_when_given() {
        let args = CopyArgs::default();
        assert_eq!(Settings::from_args(&args), Settings::default());
        let args = CopyArgs { no_fsync: true, force_ssh_channel: true, ..CopyArgs::default() };
        let s = Settings::from_args(&args);
        assert_eq!(s.fsync.map(|s| s.value), Some(false));
        assert_eq!(s.transport.map(|s| s.value), Some(TransportMode::Ssh));
        assert!(s.compress.is_none() && s.resume.is_none());
    }

    #[test]
    fn applied_settings_reach_the_arguments() {
        let settings = Settings {
            cipher: Some(Set { value: Cipher::Chacha20Poly1305, origin: file(1) }),
            resume: Some(Set { value: false, origin: file(2) }),
            remote_soku: Some(Set { value: "/opt/soku".into(), origin: file(3) }),
            ..Settings::default()
        };
        let mut args = CopyArgs::default();
        settings.apply_to(&mut args);
        assert_eq!(args.cipher.as_deref(), Some("chacha20-poly1305"));
        assert!(args.no_resume);
        assert_eq!(args.ssh.remote_soku.as_deref(), Some("/opt/soku"));
        assert!(!args.no_fsync && args.transport.is_none());
    }

    #[test]
    fn rows_show_defaults_and_origins() {
        let settings = Settings {
            limit_kbps: Some(Set { value: 5000, origin: file(7) }),
            ..Settings::default()
        };
        let rows = settings.rows();
        let limit = rows.iter().find(|r| r.key == "limit-kbps").expect("row");
        assert_eq!((limit.value.as_str(), limit.origin.clone()), ("5000 Kbit/s", Some(file(7))));
        let transport = rows.iter().find(|r| r.key == "transport").expect("row");
        assert_eq!((transport.value.as_str(), transport.origin.clone()), ("auto", None));
    }
}
