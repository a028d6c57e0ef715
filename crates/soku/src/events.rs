//! Typed events from the transfer engine. Only the UI ([`crate::ui`]) turns them into
//! progress meters, summaries or JSON lines.

use std::time::Duration;

/// Something the user may want to know about a running copy.
#[derive(Debug, Clone)]
pub enum TransferEvent {
    /// The data path is chosen.
    Connected {
        /// "QUIC" or "ssh channel", with detail.
        transport: String,
    },
    /// The sender announced the whole job.
    Planned {
        /// Files to copy.
        files: u32,
        /// Their total size.
        bytes: u64,
    },
    /// Bytes the receiver has verified so far (cumulative).
    Verified {
        /// Verified bytes.
        bytes: u64,
    },
    /// One file failed; the copy goes on.
    FileFailed {
        /// Path as the user knows it.
        path: String,
        /// Why.
        message: String,
    },
    /// A warning to show unless quiet.
    Warning(String),
    /// The copy ended.
    Finished {
        /// Files verified and in place.
        files: u32,
        /// Bytes verified.
        bytes: u64,
        /// Files that failed.
        failures: u32,
        /// Wall time of the data transfer.
        elapsed: Duration,
    },
}

/// Where events go.
pub trait EventSink: Send + Sync {
    /// Takes one event. Must be cheap: it is called on the data path.
    fn event(&self, event: TransferEvent);
}

/// Drops everything (the server side: its stdout is the protocol channel).
#[derive(Debug, Default)]
pub struct Silent;

impl EventSink for Silent {
    fn event(&self, _event: TransferEvent) {}
}
