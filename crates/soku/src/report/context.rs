//! What the page says beside the recorded events: the command, the direction, the
//! rate cap, this process's CPU and the server's summary.

use std::time::Duration;

use soku_proto::hello::ServerSummary;

/// What the page says beside the recorded events.
#[derive(Debug, Clone)]
pub struct Context {
    /// The command line, as typed.
    pub command: String,
    /// Whether this side sent the data (an upload).
    pub upload: bool,
    /// `-l`, bits per second.
    pub rate_limit_bps: Option<u64>,
    /// This process's CPU time over the whole copy, and the wall time.
    pub client_cpu: Duration,
    /// See `client_cpu`.
    pub client_wall: Duration,
    /// The server's summary, if it sent one (a server from before it does not; nor
    /// does any over the ssh channel, which carries the data itself).
    pub server: Option<ServerSummary>,
    /// When the copy started, seconds since the Unix epoch.
    pub started_unix: u64,
}
