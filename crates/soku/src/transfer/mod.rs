//! The transfer engine: the sender and receiver that drive the sans-IO protocol over a
//! link (QUIC or the ssh channel) and the file system.
//!
//! # Layout
//! - [`walk`]: turning source paths into manifest entries.
//! - [`ahead`]: walking and hashing an upload's sources while ssh logs in.
//! - [`fsops`]: temporary files, safe directory creation, metadata, rename into place.
//! - [`codec`]: chunk reading, hashing and (optional) compression.
//! - [`send`]: the sender, and [`throttle`], its pace under scp's `-l`.
//! - [`receive`]: the receiver.

pub mod ahead;
pub mod codec;
pub mod compress_policy;
pub mod fsops;
pub mod receive;
pub mod send;
pub mod throttle;
pub mod walk;

/// Options that shape a copy, shared by both roles.
#[derive(Debug, Clone, Copy)]
pub struct CopyOptions {
    /// Copy directories (scp -r).
    pub recursive: bool,
    /// Preserve times and full mode (scp -p).
    pub preserve: bool,
    /// Compress chunks where it pays (scp -C).
    pub compress: bool,
    /// Chunk size in bytes.
    pub chunk_size: u32,
    /// The sender's rate limit in bits per second (scp -l).
    pub rate_limit_bps: Option<u64>,
}

/// A message's kind, for error messages (never its content: it may be large or hostile).
pub fn message_name(msg: &soku_proto::message::Message) -> &'static str {
    use soku_proto::message::Message as M;
    match msg {
        M::Request(_) => "a request",
        M::Plan { .. } => "a plan",
        M::Entry(_) => "a manifest entry",
        M::SourceError { .. } => "a source error",
        M::FileSummary { .. } => "a file summary",
        M::FileAborted { .. } => "a file abort",
        M::EndOfManifest { .. } => "an end of manifest",
        M::Progress { .. } => "a progress report",
        M::FileFailed { .. } => "a file failure",
        M::Finished { .. } => "a finish report",
        M::Fatal { .. } => "a fatal error",
        M::Chunk(_) => "a chunk",
    }
}

/// Locks `m`, also after a panic elsewhere poisoned it: the guarded data (counters,
/// tables) stays consistent between statements, and the copy reports the panic's
/// task failure itself.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
