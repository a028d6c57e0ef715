//! Typed events from the transfer engine. Only the binary's user interface turns them into
//! progress meters, summaries or JSON lines.

use std::time::Duration;

/// How often a running QUIC copy reports [`TransferEvent::PathSample`].
pub const PATH_SAMPLE_INTERVAL: Duration = Duration::from_millis(500);

/// Something the user may want to know about a running copy.
#[derive(Debug, Clone)]
pub enum TransferEvent {
    /// The data path is chosen.
    Connected {
        /// "QUIC to ...", "TLS/TCP to ..." or "the ssh channel", with detail.
        transport: String,
        /// Why this one and not QUIC, when it is not QUIC.
        reason: Option<String>,
    },
    /// The sender announced the whole job.
    Planned {
        /// Files to copy.
        files: u32,
        /// Their total size.
        bytes: u64,
    },
    /// A file entered the copy: announced by the sender, or created by the receiver
    /// (its local path on this side). `--report` lists them; the meter and `--json`
    /// do not, so a copy of a million files prints no more than before.
    File {
        /// Path on this side.
        path: String,
        /// Its size.
        bytes: u64,
    },
    /// Bytes the receiver has verified so far (cumulative).
    Verified {
        /// Verified bytes.
        bytes: u64,
    },
    /// Bytes that crossed the network in this session so far, cumulative within it
    /// (what the receiver held already does not count): on the sender the chunks handed
    /// to the transport (told as each is handed over, by concurrent tasks: a later
    /// event may carry a smaller figure, and the largest is the count), on the receiver
    /// the chunks verified. A session's
    /// `Finished` knows only its own figures; a copy that reconnects adds these up so
    /// that what an earlier session sent is not taken for what the target held.
    Sent {
        /// Bytes.
        bytes: u64,
    },
    /// Of the verified bytes, those the target held already when this session began
    /// (resume: proven by hash, not sent), cumulative within the session: told by the
    /// sender as the receiver's holdings are confirmed and by the receiver with its
    /// progress, so the meter can say how much of the copy was already there.
    Resumed {
        /// Bytes.
        bytes: u64,
    },
    /// One file failed on this side (its source could not be read, or its target not
    /// written); the copy goes on.
    FileFailed {
        /// Path on this side, as the user knows it.
        path: String,
        /// Why.
        message: String,
    },
    /// The receiving side could not store a file (the sender hears it from the
    /// receiver); the copy goes on.
    TargetFailed {
        /// The source, as the sender knows it.
        source: String,
        /// The receiver's line: its path, the problem, what to do.
        message: String,
    },
    /// The sending side could not read a file (the receiver hears it from the sender:
    /// a source missing, unreadable or changed during the copy); the copy goes on.
    SourceFailed {
        /// The file's target, as the receiver knows it (empty if it was never announced).
        target: String,
        /// The sender's line: its path, the problem, what to do.
        message: String,
    },
    /// The receiving side ran out of space and stopped the copy: what its target holds
    /// (the files whole, the partial files kept). The error that ends the copy follows.
    Unfinished {
        /// What the target holds.
        facts: soku_proto::message::Unfinished,
        /// Whether this side is the one that received (a download), or the peer told it.
        here: bool,
    },
    /// In a sync: a file not sent, and why (told on both sides; in a dry run, each file
    /// that would be sent, as [`soku_proto::sync::SkipReason::WouldSend`]).
    Skipped {
        /// Path on this side (the sender's source, or the receiver's target).
        path: String,
        /// Why.
        reason: soku_proto::sync::SkipReason,
    },
    /// In a sync with delete: a path at the target removed (in a dry run: that would be).
    Deleted {
        /// The path, relative to the target.
        path: String,
    },
    /// In a sync, just before [`TransferEvent::Finished`]: what happened to the files.
    SyncTotals {
        /// Files sent (whole or in part) and verified.
        sent: u32,
        /// Of those, files completed from chunks the target held (an interrupted copy's
        /// partial file, or a changed file of the same size compared by hash).
        resumed: u32,
        /// Files skipped (in a dry run: also those that would be sent).
        skipped: u32,
        /// Paths deleted at the target (in a dry run: that would be).
        deleted: u32,
    },
    /// A warning to show unless quiet.
    Warning(String),
    /// What soku did that the user should know of, not a problem (a binary it sent to
    /// the remote): shown unless quiet.
    Notice(String),
    /// The connection was lost; the copy reconnects after `wait` and resumes.
    Reconnecting {
        /// What happened, one line.
        reason: String,
        /// The attempt about to be made, from 1.
        attempt: u32,
        /// How long until it is made.
        wait: Duration,
    },
    /// What the QUIC path looked like from this side, just before it closed.
    PathStats(PathReport),
    /// The same figures while the copy runs, every [`PATH_SAMPLE_INTERVAL`]: how the
    /// congestion controller found its rate (`--json` shows them; the meter does not).
    PathSample(PathReport),
    /// The copy ended.
    Finished {
        /// Files verified and in place.
        files: u32,
        /// Bytes verified.
        bytes: u64,
        /// Files that failed.
        failures: u32,
        /// Of `bytes`, those the receiver held already when this session began
        /// (resume): not sent in it.
        resumed: u64,
        /// Wall time of the data transfer.
        elapsed: Duration,
    },
}

/// This side's view of the QUIC path at the end of a transfer: the figures a user needs
/// to judge the network (`-v` and `--json` show them). Loss counts only the packets this
/// side sent, so they describe the data direction on an upload.
#[derive(Debug, Clone, PartialEq)]
pub struct PathReport {
    /// Smoothed and minimum round-trip time.
    pub rtt: Duration,
    /// The path's propagation delay, without queues (see [`soku_transport::min_rtt`]).
    pub min_rtt: Duration,
    /// Path MTU found by discovery, in bytes of UDP payload.
    pub mtu: u16,
    /// Packets this side sent, and how many of them were declared lost.
    pub sent_packets: u64,
    /// See `sent_packets`.
    pub lost_packets: u64,
    /// Times the congestion controller reacted to loss.
    pub congestion_events: u64,
    /// The congestion window, in bytes.
    pub cwnd: u64,
    /// Times this side had data to send and the peer's flow control held it back: the
    /// DATA_BLOCKED and STREAM_DATA_BLOCKED frames it sent (RFC 9000, section 4.1). At
    /// high loss, holes waiting for retransmission keep the peer's windows from moving
    /// on; this says whether that ever stopped the sender.
    pub flow_blocked: u64,
    /// The congestion controller's own bandwidth and min-RTT estimates, if it has any.
    pub model: Option<soku_transport::PathModel>,
}

impl PathReport {
    /// Reads the figures from a live connection.
    pub fn from_connection(conn: &quinn::Connection) -> PathReport {
        // The model first: what it reports settled (careful resume's retreat) was
        // counted in the statistics read after it.
        let model = soku_transport::path_model(conn);
        let stats = conn.stats();
        let path = stats.path;
        PathReport {
            rtt: path.rtt,
            // soku-cc's estimate when it has one (see `soku_transport::min_rtt`).
            min_rtt: model.map_or(path.min_rtt, |m| m.min_rtt),
            mtu: path.current_mtu,
            sent_packets: path.sent_packets,
            lost_packets: path.lost_packets,
            congestion_events: path.congestion_events,
            cwnd: path.cwnd,
            flow_blocked: stats.frame_tx.data_blocked + stats.frame_tx.stream_data_blocked,
            model,
        }
    }

    /// Lost packets as a percentage of those sent.
    pub fn loss_percent(&self) -> f64 {
        if self.sent_packets == 0 {
            0.0
        } else {
            self.lost_packets as f64 * 100.0 / self.sent_packets as f64
        }
    }
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
