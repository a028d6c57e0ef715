//! The data over TLS on TCP connections (`soku_engine::link::striped`), the ssh channel
//! beside it (`side_channel.rs`): when UDP does not get through, or the user asked.

use soku_engine::events::{EventSink, TransferEvent};
use soku_engine::link::Link;
use tokio::io::AsyncRead;

use super::choose::TcpWon;
use super::side_channel::{Halves, SideChannel};

/// A session whose data moves over TLS/TCP.
pub struct TcpCarrier {
    pub side: SideChannel,
    /// Why the data does not move over QUIC.
    pub fallback: String,
}

/// Sets up the TCP session that won the choice. `why`: why not QUIC, if it was tried;
/// `switched`: why an earlier session of this copy moved off QUIC (said then already).
pub fn start<R>(
    won: TcpWon,
    why: Option<String>,
    switched: Option<&String>,
    background: bool,
    channel: Halves<R>,
    events: &dyn EventSink,
) -> (TcpCarrier, Link)
where
    R: AsyncRead + Send + Unpin + 'static,
{
    let why = why.or_else(|| switched.cloned());
    let lanes = won.conns.lanes.len();
    if let (Some(why), None) = (&why, switched) {
        events.event(TransferEvent::Warning(format!("{why}; the data moves over TLS/TCP instead")));
    }
    if let Some(warning) = won.report.warning(lanes + 1) {
        events.event(TransferEvent::Warning(warning));
    }
    if background {
        events.event(TransferEvent::Warning(format!(
            "--background yields only over QUIC: over TLS/TCP the kernel's {} runs as for \
             any other connection",
            won.report.congestion
        )));
    }
    let link = won.conns.into_link(&won.report);
    events.event(TransferEvent::Connected {
        transport: format!(
            "TLS/TCP to {} ({lanes} data connection{}{}; {})",
            won.addr,
            if lanes == 1 { "" } else { "s" },
            if lanes > 1 && won.report.has_bbr() { ", used as needed" } else { "" },
            won.report.describe()
        ),
        reason: why.clone(),
    });
    let side = SideChannel::start(channel, None, false);
    let fallback = why.unwrap_or_else(|| "--transport tcp".into());
    (TcpCarrier { side, fallback }, link)
}
