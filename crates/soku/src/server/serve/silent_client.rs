//! When a kept job takes its client for gone (`kept.rs`).
//!
//! A client killed, or cut off, sends no CONNECTION_CLOSE; one that closed may have lost
//! it (a close leaves once, and a client that exits right after cannot send it again
//! when a packet of ours shows it did not arrive). Its job would hold an upload's
//! partial files for the stall limit (two minutes), and the same command run again
//! would wait for them (`soku_engine::partial`). So a job ends:
//! - once nothing at all has come from its client for [`CLIENT_SILENCE`], three of the
//!   keep-alives a live client sends every 5 s (`soku_transport`'s config);
//! - when nudged (a session is about to take partial files, `nudge.rs`), as soon as its
//!   client does not answer: the job sends it an unreliable datagram, which a live
//!   client's QUIC acknowledges within a round trip and its ack delay (RFC 9000,
//!   section 13.2.1; RFC 9221, section 5), and ends when nothing came back within
//!   [`ANSWER_PATIENCE`], or four smoothed round trips where those are longer. A live
//!   client that moves data answers anyway, with its data or its acknowledgements.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;

/// How long a job hears nothing from its client before it takes it for gone.
pub const CLIENT_SILENCE: Duration = Duration::from_secs(15);
/// The shortest wait for a nudged job's client to answer: a busy client's runtime
/// may take a while to run its connection, and a live job ended by mistake costs its
/// client a reconnect.
const ANSWER_PATIENCE: Duration = Duration::from_secs(1);
/// How often the wait looks whether anything came.
const ANSWER_LOOK: Duration = Duration::from_millis(20);
/// QUIC close code of a job whose client went silent.
const GONE: u32 = 5;

/// Ends `conn` once its client has been silent for [`CLIENT_SILENCE`], or, when
/// `nudged`, does not answer at once (see the module documentation).
pub async fn end_when_silent(conn: quinn::Connection, nudged: Arc<Notify>) {
    let mut silence = crate::carrier::udp_block::Silence::new(&conn);
    loop {
        let was_nudged = tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => false,
            () = nudged.notified() => true,
        };
        if conn.close_reason().is_some() {
            return;
        }
        let gone = silence.update(&conn) >= CLIENT_SILENCE || (was_nudged && !answers(&conn).await);
        if gone {
            soku_transport::close(&conn, GONE, b"the client went silent");
            return;
        }
    }
}

/// Whether anything comes from the client within the patience after a datagram asks
/// for its acknowledgement. A datagram that cannot be sent (a peer that takes none)
/// asks nothing: the client counts as live, and [`CLIENT_SILENCE`] decides.
async fn answers(conn: &quinn::Connection) -> bool {
    let heard = conn.stats().udp_rx.datagrams;
    if conn.send_datagram(Bytes::from_static(&[0])).is_err() {
        return true;
    }
    let patience = ANSWER_PATIENCE.max(conn.rtt() * 4);
    let deadline = tokio::time::Instant::now() + patience;
    // Bounded by the deadline.
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(ANSWER_LOOK).await;
        if conn.stats().udp_rx.datagrams != heard || conn.close_reason().is_some() {
            return true;
        }
    }
    false
}
