//! Probe-RTT (draft-cardwell-iccrg-bbr-congestion-control §4.3.4): when the min RTT
//! has grown old, half a BDP in flight for `probe_rtt_duration` and a round, and the
//! smallest RTT seen meanwhile becomes the min RTT.

use std::time::{Duration, Instant};

use super::{Mode, SokuCc};

impl SokuCc {
    /// Takes the smallest RTT of a probe-RTT phase as the min RTT if it is lower, or if
    /// `min_rtt_raise_probes` phases in a row all saw more (the path got longer).
    ///
    /// BBR takes it whatever it is. But a flow that drains alone while other flows keep
    /// the bottleneck queue full measures their queue, and a min RTT raised by it makes
    /// the flow's BDP, and so its window and its share, too large until a later probe
    /// happens to drain with the others.
    pub(super) fn adopt_probe_rtt_min(&mut self, probed: Duration) {
        let known = self.min_rtt.unwrap_or(probed);
        if probed <= known || self.probe_rtts_above + 1 >= self.config.min_rtt_raise_probes {
            self.min_rtt = Some(probed);
            self.probe_rtts_above = 0;
        } else {
            self.probe_rtts_above += 1;
        }
    }

    /// How old the min RTT may grow before probe-RTT refreshes it: `min_rtt_window`,
    /// or `first_min_rtt_window` before the connection's first probe once startup is over.
    pub(super) fn min_rtt_expiry(&self) -> Duration {
        if self.probe_rtts == 0 && self.filled_pipe {
            self.config.first_min_rtt_window
        } else {
            self.config.min_rtt_window
        }
    }

    pub(super) fn maybe_enter_probe_rtt(&mut self, now: Instant) {
        if self.mode == Mode::ProbeRtt || self.min_rtt.is_none() {
            return;
        }
        // A flow that started inside another flow's standing queue takes that queue
        // for the path. Its min RTT then falls in steps, each time the other flow
        // drains a little (on the emulator, beside CUBIC at 50 ms: 79, 76, 73, 66, 60 ms
        // over 20 s), and each new minimum restarts the expiry. Its window stays sized
        // for the longer path, and it left CUBIC 6-29 % of the link. So once the
        // min RTT has fallen an eighth below what startup found (RFC 9406's queue
        // threshold), the first probe-RTT comes `first_min_rtt_window` after startup
        // whatever the minimums did. By then the flow's own window holds most of the
        // queue, and its own probe drains it: the first probe of each such flow found
        // the path's 50 ms. A lone flow's minimum comes from startup, before its own
        // queue builds, so its probes come when they did.
        let first_due = self.probe_rtts == 0
            && self.filled_pipe
            && self.min_rtt.is_some_and(|min| {
                let window = self.config.first_min_rtt_window;
                let (due, at_startup) = *self.first_probe_due.get_or_insert((now + window, min));
                min < at_startup - at_startup / 8 && now >= due
            });
        if first_due || now.saturating_duration_since(self.min_rtt_stamp) > self.min_rtt_expiry() {
            self.mode = Mode::ProbeRtt;
            self.probe_rtt_done = None;
            self.probe_rtt_min = None;
        }
    }

    pub(super) fn maybe_exit_probe_rtt(&mut self, now: Instant) {
        if self.mode != Mode::ProbeRtt {
            return;
        }
        match self.probe_rtt_done {
            None if self.in_flight <= self.probe_rtt_window() => {
                let until = now + self.config.probe_rtt_duration;
                self.probe_rtt_done = Some((until, self.delivery.round() + 1));
                // Only samples taken with the queue drained count.
                self.probe_rtt_min = None;
            }
            Some((until, round))
                if now >= until
                    && self.delivery.round() >= round
                    && !self.others_still_draining(now) =>
            {
                if let Some(m) = self.probe_rtt_min {
                    self.adopt_probe_rtt_min(m);
                }
                self.min_rtt_stamp = now;
                self.share_min_rtt(now, true);
                self.probe_rtt_done = None;
                self.probe_rtts = self.probe_rtts.saturating_add(1);
                self.probe_rtt_last_round = self.delivery.round() + 2;
                if self.filled_pipe {
                    self.mode = Mode::ProbeBw;
                    self.cycle_index = 2;
                } else {
                    self.mode = Mode::Startup;
                }
            }
            _ => {}
        }
    }
}
