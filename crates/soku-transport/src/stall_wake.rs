//! Waking a connection whose path has gone silent, so that its congestion controller's
//! stall probes (`soku_cc::stall`) leave on time.
//!
//! quinn sends only when its connection task is woken: by a timer, a datagram in, or the
//! application. During a blackout none of them comes often: the probe timer backs off
//! exponentially (RFC 9002 §6.2.1), the keep-alive timer is armed again only by a
//! received packet (quinn-proto 0.11, `reset_keep_alive`), and the copy's writers wait on
//! a window that nothing empties. [`wake_when_silent`] wakes the connection every
//! [`WAKE_EVERY`] while nothing arrives, so a controller that lets a probe past its
//! window gets to send one then, and the first probe the returning path carries is
//! acknowledged within a round trip.

use std::time::Duration;

use quinn::VarInt;

use crate::config::MAX_UNI_STREAMS;

/// Between two wakes of a connection that hears nothing: the stall probes' interval.
pub const WAKE_EVERY: Duration = soku_cc::stall::PROBE_EVERY;

/// Wakes its connection while the path is silent, until dropped or the connection
/// closes.
#[derive(Debug)]
pub struct SilenceWake(tokio::task::JoinHandle<()>);

impl Drop for SilenceWake {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts waking `conn` whenever no datagram arrived for a [`WAKE_EVERY`]: keep the
/// returned guard as long as the connection. Needs a tokio runtime.
pub fn wake_when_silent(conn: &quinn::Connection) -> SilenceWake {
    let conn = conn.clone();
    SilenceWake(tokio::spawn(async move {
        let mut tick = tokio::time::interval(WAKE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut heard = conn.stats().udp_rx.datagrams;
        loop {
            tick.tick().await;
            if conn.close_reason().is_some() {
                return;
            }
            let now_heard = conn.stats().udp_rx.datagrams;
            if now_heard == heard {
                // quinn 0.11 has no public ping: setting the stream limit to the value
                // it already has changes nothing but wakes the connection task, which
                // then sends what its controller lets out.
                conn.set_max_concurrent_uni_streams(VarInt::from_u32(MAX_UNI_STREAMS));
            }
            heard = now_heard;
        }
    }))
}
