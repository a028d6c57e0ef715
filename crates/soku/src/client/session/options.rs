//! How a session is set up: the transport asked for, the timeouts, and what the
//! server is told in the client's hello.

use std::time::Duration;

use soku_proto::hello::{PathMemory, ReceivePreview};
use soku_transport::TransportOptions;

use crate::cli::transport_mode::TransportMode;

/// How to set the session up.
pub struct SessionOptions {
    /// Which data path to use (`--transport`).
    pub mode: TransportMode,
    /// Why an earlier session of this copy moved off QUIC (told with the new transport).
    pub switched: Option<String>,
    /// How long to wait for QUIC (and TCP) before the next choice.
    pub quic_timeout: Duration,
    /// The host name the user typed (used when the server does not know its address).
    pub host: String,
    /// Cipher, rate cap, and what an upload's controller resumes from.
    pub transport: TransportOptions,
    /// On a download: what the server's controller resumes from (see `client/path_memory.rs`).
    pub download_memory: Option<PathMemory>,
    /// `--background`: the data sender's controller yields to other traffic.
    pub background: bool,
    /// `soku diagnose`: ask the server to answer the transport choice over ssh, to
    /// time a round trip there.
    pub diagnose: bool,
    /// Through an existing shared ssh login: how long its master may take to bring the
    /// server's hello (see `client/launch/shared_login.rs`).
    pub attach_timeout: Option<Duration>,
    /// Where soku's own dialer of the ssh login leaves its error (see
    /// `client/launch/shared_login.rs`): read when ssh fails to start the remote end.
    pub dial_errors: Option<std::path::PathBuf>,
    /// With resume: what the receiving side is asked or told before the copy (see
    /// `crate::client::preview`).
    pub receive_preview: Option<ReceivePreview>,
    /// Ask the server to stay for the next copies (`server/serve/kept.rs`): a copy through a
    /// shared login.
    pub keep: bool,
    /// Where ssh connects to log in, when it connects to the host itself: a copy
    /// through a kept server times TCP handshakes there while QUIC is silent
    /// (`crate::carrier::tcp_probe`).
    pub login_at: Option<crate::carrier::tcp_probe::LoginAddress>,
    /// The remote soku the user named (`--remote-soku`), which a remote that cannot run
    /// it is told about; `None`: the remote looks for one (`client/launch/remote_soku.rs`).
    pub remote_soku: Option<String>,
    /// How long the peer may say nothing, not even a keep-alive, before the session
    /// takes it for stalled: while the client waits for the server's first words after
    /// its hello, and on the link (`Link::set_stall_limit`).
    pub stall: Duration,
    /// The oldest protocol version the job can run on (a sync's needs
    /// `soku_proto::sync::SYNC_SINCE_VERSION`): a server that speaks none so new is
    /// answered as one with no version in common, and is sent this soku if it may be.
    pub needs_version: u16,
}

impl SessionOptions {
    /// The options of a command that is not a copy (`soku tunnel`, `soku diagnose`), and
    /// what a copy starts from: default transport options, no path memory, not in the
    /// background, nothing asked of the server beyond the job.
    pub fn for_command(mode: TransportMode, host: String, quic_timeout: Duration) -> Self {
        SessionOptions {
            mode,
            switched: None,
            quic_timeout,
            host,
            transport: TransportOptions::default(),
            download_memory: None,
            background: false,
            diagnose: false,
            attach_timeout: None,
            dial_errors: None,
            receive_preview: None,
            keep: false,
            login_at: None,
            remote_soku: None,
            stall: soku_engine::link::DEFAULT_STALL_LIMIT,
            needs_version: *soku_proto::PROTOCOL_VERSIONS.start(),
        }
    }
}
