//! Probing a path that stopped acknowledging, at a bounded interval.
//!
//! During a blackout nothing is acknowledged, so quinn's probe timeout (RFC 9002 §6.2.1)
//! doubles at every expiry, without a cap short of 2^16 (quinn-proto 0.11,
//! `MAX_BACKOFF_EXPONENT`). New data stays behind a congestion window full of packets
//! that are neither acknowledged nor declared lost (loss needs an acknowledgement,
//! §6.1), and quinn's keep-alive PING is itself held back by that window. So once the
//! path is back, nothing leaves until the next backed-off probe: after a 10 s blackout
//! on a 100 Mbit/s x 50 ms path data came back 0.9 to 12.6 s after the path did, and
//! after 40 s once not before the 60 s idle timeout ended the connection.
//!
//! [`StallProbe`] lets a small, fixed number of packets past the window once the
//! sender has waited [`STALL`] for an acknowledgement, again at most every
//! [`PROBE_EVERY`]: the probe interval stops growing there (one or two datagrams a
//! half second, a few kB/s on a path that carries nothing anyway). These packets are
//! probes in the sense of §6.2.4 (sent regardless of the window, ack-eliciting): the
//! first one the returning path carries is acknowledged, which resets quinn's backoff
//! (§6.2.1), declares the blackout's packets lost (§6.1; persistent congestion, §7.6,
//! collapses the window) and the copy goes on within about a round trip. Something
//! must still wake quinn to send them: `soku-transport` pings a connection that has
//! heard nothing for a while, and a peer's packet arriving does too.

use std::time::{Duration, Instant};

/// How long the sender waits for an acknowledgement of what it sent before it probes
/// on its own schedule (at least; three smoothed RTTs on a slower path).
pub const STALL: Duration = Duration::from_secs(1);

/// Between two probes of a stalled path (at least; one smoothed RTT on a slower path).
pub const PROBE_EVERY: Duration = Duration::from_millis(500);

/// Datagrams let past the window per probe.
pub const PROBE_PACKETS: u64 = 2;

/// Whether, and how far, the window opens for a probe of a path that stopped
/// acknowledging.
#[derive(Clone, Debug, Default)]
pub struct StallProbe {
    /// Since when an acknowledgement has been awaited: the last acknowledgement with
    /// bytes still in flight, or the first send after everything was acknowledged.
    awaiting_since: Option<Instant>,
    /// When the last packets left while a probe was allowed.
    probed_at: Option<Instant>,
    /// Bytes in flight as quinn counts them: its figure at the last acknowledgement,
    /// plus what was sent since, minus what was declared lost since.
    in_flight: u64,
    /// The latest smoothed RTT.
    srtt: Duration,
}

impl StallProbe {
    /// Something was sent (`bytes`, a whole batch of datagrams).
    pub fn on_sent(&mut self, now: Instant, bytes: u64) {
        if self.open(now) {
            self.probed_at = Some(now);
        }
        self.awaiting_since.get_or_insert(now);
        self.in_flight = self.in_flight.saturating_add(bytes);
    }

    /// Packets were newly acknowledged and quinn has `in_flight` bytes left in flight:
    /// the path delivers.
    pub fn on_acked(&mut self, now: Instant, in_flight: u64) {
        self.in_flight = in_flight;
        self.awaiting_since = (in_flight > 0).then_some(now);
        self.probed_at = None;
    }

    /// quinn's smoothed RTT, from an acknowledgement.
    pub fn on_rtt(&mut self, srtt: Duration) {
        self.srtt = srtt;
    }

    /// Bytes were declared lost: they are out of flight.
    pub fn on_lost(&mut self, bytes: u64) {
        self.in_flight = self.in_flight.saturating_sub(bytes);
    }

    /// The window to use at `now`: `window`, or, while a probe is due, enough above
    /// the bytes in flight for [`PROBE_PACKETS`] datagrams of `mtu` bytes (quinn sends
    /// a datagram only while in flight plus a whole datagram stays below the window).
    pub fn window(&self, window: u64, mtu: u64, now: Instant) -> u64 {
        if !self.open(now) {
            return window;
        }
        window.max(self.in_flight.saturating_add((PROBE_PACKETS + 1).saturating_mul(mtu)))
    }

    /// Whether a probe is due: the path has been silent for the stall time, and the
    /// last probe is at least the probe interval old.
    fn open(&self, now: Instant) -> bool {
        let stall = STALL.max(self.srtt.saturating_mul(3));
        let every = PROBE_EVERY.max(self.srtt);
        let stalled =
            self.awaiting_since.is_some_and(|t| now.saturating_duration_since(t) >= stall);
        stalled && self.probed_at.is_none_or(|t| now.saturating_duration_since(t) >= every)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: u64 = 1452;
    const WINDOW: u64 = 400 * MTU;
    const RTT: Duration = Duration::from_millis(50);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A sender with a full window when the path goes dark at `t0`.
    fn stalled_at(t0: Instant) -> StallProbe {
        let mut probe = StallProbe::default();
        probe.on_sent(t0 - ms(100), WINDOW);
        probe.on_rtt(RTT);
        probe.on_acked(t0, WINDOW - 10 * MTU);
        probe.on_sent(t0, 10 * MTU);
        probe
    }

    #[test]
    fn a_path_that_acknowledges_keeps_its_window() {
        let t0 = Instant::now();
        let mut probe = stalled_at(t0);
        // Acks every 25 ms for ten seconds: never stalled.
        for i in 1..400 {
            let now = t0 + ms(25 * i);
            assert_eq!(probe.window(WINDOW, MTU, now), WINDOW);
            probe.on_acked(now, WINDOW - MTU);
            probe.on_sent(now, MTU);
        }
    }

    #[test]
    fn a_silent_path_is_probed_every_half_second_with_two_datagrams() {
        let t0 = Instant::now();
        let mut probe = stalled_at(t0);
        assert_eq!(probe.window(WINDOW, MTU, t0 + ms(999)), WINDOW, "not stalled yet");
        let mut in_flight = WINDOW;
        let mut probes = Vec::new();
        for i in 0..=60 {
            let now = t0 + ms(1000 + 100 * i);
            let window = probe.window(WINDOW, MTU, now);
            if window > WINDOW {
                // Room for two more datagrams above what is in flight, not three.
                assert!(in_flight + 2 * MTU < window && in_flight + 3 * MTU >= window);
                probes.push(now - t0);
                probe.on_sent(now, 2 * MTU);
                in_flight += 2 * MTU;
                assert_eq!(probe.window(WINDOW, MTU, now), WINDOW, "one probe per interval");
            }
        }
        let expected: Vec<Duration> = (0..=12).map(|i| ms(1000 + 500 * i)).collect();
        assert_eq!(probes, expected, "every 500 ms from 1 s of silence on, for 6 s");
    }

    #[test]
    fn an_acknowledgement_ends_the_probing() {
        let t0 = Instant::now();
        let mut probe = stalled_at(t0);
        let back = t0 + ms(10_000);
        assert!(probe.window(WINDOW, MTU, back) > WINDOW);
        probe.on_sent(back, 2 * MTU);
        // The probe is acknowledged: quinn declares the blackout's packets lost.
        probe.on_acked(back + RTT, WINDOW);
        probe.on_lost(WINDOW);
        // The retransmissions fill the collapsed window.
        probe.on_sent(back + RTT, 4 * MTU);
        assert_eq!(probe.window(4 * MTU, MTU, back + RTT), 4 * MTU);
        assert_eq!(probe.window(4 * MTU, MTU, back + ms(800)), 4 * MTU, "a fresh wait");
        assert!(probe.window(4 * MTU, MTU, back + ms(1050)) > 4 * MTU);
    }

    #[test]
    fn nothing_in_flight_is_no_stall() {
        let t0 = Instant::now();
        let mut probe = StallProbe::default();
        probe.on_sent(t0, MTU);
        probe.on_acked(t0 + RTT, 0);
        assert_eq!(probe.window(WINDOW, MTU, t0 + ms(60_000)), WINDOW, "idle, not stalled");
        // The first send after idle starts the wait (a window that send filled).
        probe.on_sent(t0 + ms(60_000), 2 * MTU);
        assert_eq!(probe.window(2 * MTU, MTU, t0 + ms(60_500)), 2 * MTU);
        assert_eq!(probe.window(2 * MTU, MTU, t0 + ms(61_000)), 5 * MTU);
    }

    #[test]
    fn a_slow_path_waits_longer() {
        let t0 = Instant::now();
        let mut probe = StallProbe::default();
        probe.on_sent(t0, WINDOW);
        probe.on_rtt(ms(600));
        probe.on_acked(t0, WINDOW);
        assert_eq!(probe.window(WINDOW, MTU, t0 + ms(1700)), WINDOW, "three RTTs: 1.8 s");
        let first = t0 + ms(1800);
        assert!(probe.window(WINDOW, MTU, first) > WINDOW);
        probe.on_sent(first, MTU);
        assert_eq!(probe.window(WINDOW, MTU, first + ms(599)), WINDOW, "one RTT apart");
        assert!(probe.window(WINDOW, MTU, first + ms(600)) > WINDOW);
    }
}
