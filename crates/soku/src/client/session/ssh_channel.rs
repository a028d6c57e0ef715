//! The data in the ssh channel itself (`soku_engine::link::stream`), after the hellos:
//! when neither UDP nor TCP gets through, or the user asked. Slow, but it goes wherever
//! ssh goes.

use soku_engine::events::{EventSink, TransferEvent};
use soku_engine::link::{self, Link};
use tokio::io::AsyncRead;

use super::side_channel::Halves;
use crate::cli::transport_mode::TransportMode;

/// Sets up the session over the channel; `why`: why not QUIC or TCP.
pub fn start<R>(why: &str, mode: TransportMode, channel: Halves<R>, events: &dyn EventSink) -> Link
where
    R: AsyncRead + Send + Unpin + 'static,
{
    if mode == TransportMode::Auto {
        events.event(TransferEvent::Warning(format!(
            "{why}; carrying the data over the ssh channel instead (slower)"
        )));
    }
    let link = link::stream::link(channel.reader, channel.writer);
    events.event(TransferEvent::Connected {
        transport: "the ssh channel".into(),
        reason: Some(why.to_string()),
    });
    link
}
