//! The client's record of a remote `soku serve` that stayed after a copy
//! (`server/serve/kept.rs`): where it listens, its certificate's fingerprint, and the client
//! certificate and key it takes. The next copy to the same host, with the same ssh
//! configuration, reaches it over QUIC alone instead of opening an ssh session.
//!
//! - **Only with a shared login.** A record is made only for copies whose ssh login is
//!   shared (`client/launch/shared_login.rs`): the user who turns sharing off
//!   (`--no-share-login`, `-o ControlMaster=no`, their own ControlMaster) turns this off
//!   too. Its name is a hash of the master socket's (itself a hash of `ssh -G`'s whole
//!   configuration, the network namespace and the user), of the remote command, and of
//!   `--background`, which the server's controller took from the first copy's hello.
//! - **As private as ssh's control socket.** The file holds a key that lets its holder
//!   copy files as the remote user while the server stays: it lives in soku's private
//!   runtime directory (`client/private_dir.rs`), mode 0600, written whole or not at all.
//! - **Trusted only for a while.** It is valid until [`MARGIN`] before the server's idle
//!   time ends; an expired or unreadable record is removed. A copy that cannot reach the
//!   server within a few round trips removes it and opens an ssh session.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use soku_transport::{Fingerprint, Identity};

use crate::client::private_dir::soku_runtime_dir;

/// How much sooner than the server the client stops counting on it: the server's idle
/// time starts when its job ends, a little before the client's does.
const MARGIN: Duration = Duration::from_secs(10);
/// Largest record read (a record is about 1 KiB).
const MAX_RECORD: u64 = 16 * 1024;

/// A kept server, as the client reaches it.
pub struct KeptServer {
    /// Where its QUIC endpoint listens (the address the first copy reached).
    pub addr: SocketAddr,
    /// Its certificate's fingerprint.
    pub server: Fingerprint,
    /// The client certificate and key it takes.
    pub identity: Identity,
    /// The path's smallest RTT when the record was made: how long to wait for the
    /// handshake.
    pub min_rtt: Duration,
    /// Whether TLS over TCP got through when the first session raced it (`None`: it did
    /// not race, `--transport quic`): a copy that finds UDP rate-limited moves to TCP
    /// only if it does, as in any session (`carrier/policing.rs`).
    pub tcp_reachable: Option<bool>,
    /// It takes names that are not UTF-8 (`soku_proto::name`), as its protocol told the
    /// first session.
    pub byte_names: bool,
    /// The most descriptors it may hold open, as its hello said (`None`: it did not).
    pub open_files: Option<u64>,
}

impl KeptServer {
    /// How long a copy waits for the server's handshake before it opens an ssh session
    /// instead: a few round trips, at most two seconds.
    pub fn patience(&self) -> Duration {
        (self.min_rtt * 4 + Duration::from_millis(300)).min(Duration::from_secs(2))
    }
}

/// The file on disk.
#[derive(Serialize, Deserialize)]
struct Record {
    addr: SocketAddr,
    server: String,
    cert: Vec<u8>,
    key: Vec<u8>,
    min_rtt_us: u64,
    tcp_reachable: Option<bool>,
    /// Absent from an older soku's record: then not known, so names are sent as UTF-8.
    #[serde(default)]
    byte_names: bool,
    /// Until when the record holds, in milliseconds since the Unix epoch.
    until_ms: u64,
    /// Absent from an older soku's record (`None`).
    #[serde(default)]
    open_files: Option<u64>,
}

/// Where the record of one host's kept server is.
#[derive(Debug, Clone)]
pub struct KeptKey(PathBuf);

impl KeptKey {
    /// The record for copies through the shared login whose master socket is `socket`,
    /// starting the remote end with `command`; `None` without a private directory.
    pub fn new(socket: &Path, command: &[String], background: bool) -> Option<KeptKey> {
        let dir = soku_runtime_dir("kept").ok()?;
        let mut hasher = blake3::Hasher::new();
        hasher.update(socket.as_os_str().as_encoded_bytes()).update(&[0]);
        for word in command {
            hasher.update(word.as_bytes()).update(&[0]);
        }
        hasher.update(&[u8::from(background)]);
        Some(KeptKey(dir.join(&hasher.finalize().to_hex()[..24])))
    }

    /// The server, if a record holds now.
    pub fn recall(&self) -> Option<KeptServer> {
        let found = self.read(SystemTime::now());
        if found.is_none() {
            self.forget();
        }
        found
    }

    fn read(&self, now: SystemTime) -> Option<KeptServer> {
        use std::io::Read as _;
        let mut text = Vec::new();
        std::fs::File::open(&self.0).ok()?.take(MAX_RECORD).read_to_end(&mut text).ok()?;
        let record: Record = serde_json::from_slice(&text).ok()?;
        if millis_since_epoch(now)? >= record.until_ms {
            return None;
        }
        Some(KeptServer {
            addr: record.addr,
            server: record.server.parse().ok()?,
            identity: Identity::from_der(record.cert, record.key).ok()?,
            min_rtt: Duration::from_micros(record.min_rtt_us),
            tcp_reachable: record.tcp_reachable,
            byte_names: record.byte_names,
            open_files: record.open_files,
        })
    }

    /// Records `server`, which stays [`crate::client::launch::shared_login::PERSIST`] from now.
    pub fn remember(&self, server: &KeptServer) {
        let until = SystemTime::now() + crate::client::launch::shared_login::PERSIST - MARGIN;
        let Some(until_ms) = millis_since_epoch(until) else { return };
        let (cert, key) = server.identity.to_der();
        let record = Record {
            addr: server.addr,
            server: server.server.to_string(),
            cert,
            key,
            min_rtt_us: u64::try_from(server.min_rtt.as_micros()).unwrap_or(u64::MAX),
            tcp_reachable: server.tcp_reachable,
            byte_names: server.byte_names,
            until_ms,
            open_files: server.open_files,
        };
        let Ok(text) = serde_json::to_vec(&record) else { return };
        // Whole or not at all: a copy reading at the same time sees the old record or
        // the new one.
        let temp = self.0.with_extension(format!("tmp{}", std::process::id()));
        let written = crate::sys::private_file()
            .write(true)
            .create_new(true)
            .open(&temp)
            .and_then(|mut file| std::io::Write::write_all(&mut file, &text));
        if written.and_then(|()| std::fs::rename(&temp, &self.0)).is_err() {
            let _ = std::fs::remove_file(&temp);
        }
    }

    /// Removes the record (the server did not answer, or it expired).
    pub fn forget(&self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn millis_since_epoch(at: SystemTime) -> Option<u64> {
    u64::try_from(at.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> KeptServer {
        KeptServer {
            addr: "10.0.0.2:4433".parse().expect("addr"),
            server: Identity::generate().expect("identity").fingerprint(),
            identity: Identity::generate().expect("identity"),
            min_rtt: Duration::from_millis(100),
            tcp_reachable: Some(true),
            byte_names: true,
            open_files: Some(256),
        }
    }

    /// Unix only: Windows has no mode bits; the record's directory's access list keeps
    /// others out there.
    #[test]
    #[cfg(unix)]
    fn a_record_holds_until_its_time_and_only_its_user_reads_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let key = KeptKey(dir.path().join("k"));
        assert!(key.recall().is_none(), "nothing recorded yet");
        let kept = server();
        key.remember(&kept);
        let mode = std::fs::metadata(&key.0).expect("record").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let read = key.recall().expect("a fresh record holds");
        assert_eq!(read.addr, kept.addr);
        assert_eq!(read.server, kept.server);
        assert_eq!(read.identity.fingerprint(), kept.identity.fingerprint());
        assert_eq!(read.min_rtt, kept.min_rtt);
        assert_eq!(read.tcp_reachable, kept.tcp_reachable);
        assert_eq!(read.open_files, kept.open_files);
        let later = SystemTime::now() + crate::client::launch::shared_login::PERSIST;
        assert!(key.read(later).is_none(), "expired before the server's idle time ends");
    }

    /// A record an older soku wrote, without the server's open-file limit, still holds.
    #[test]
    fn a_record_without_the_servers_limit_holds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = KeptKey(dir.path().join("k"));
        key.remember(&server());
        let text = std::fs::read(&key.0).expect("record");
        let mut record: serde_json::Value = serde_json::from_slice(&text).expect("json");
        assert!(record.as_object_mut().expect("object").remove("open_files").is_some());
        std::fs::write(&key.0, serde_json::to_vec(&record).expect("json")).expect("write");
        let read = key.recall().expect("an older record holds");
        assert_eq!((read.open_files, read.tcp_reachable), (None, Some(true)));
    }

    #[test]
    fn a_damaged_record_is_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = KeptKey(dir.path().join("k"));
        std::fs::write(&key.0, b"{\"addr\":").expect("write");
        assert!(key.recall().is_none());
        assert!(!key.0.exists());
    }

    #[test]
    fn patience_is_a_few_round_trips_within_two_seconds() {
        let mut kept = server();
        assert_eq!(kept.patience(), Duration::from_millis(700));
        kept.min_rtt = Duration::from_secs(1);
        assert_eq!(kept.patience(), Duration::from_secs(2));
    }
}
