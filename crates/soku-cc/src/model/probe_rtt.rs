//! Probe-RTT (draft-cardwell-iccrg-bbr-congestion-control §4.3.4): when the min RTT
//! has grown old, half a BDP in flight for `probe_rtt_duration` and a round, and the
//! smallest RTT seen meanwhile becomes the min RTT.

use std::time::{Duration, Instant};

use super::{Mode, SokuCc};

/// Round trips of the min RTT that the min-RTT window spans at least.
///
/// BBR's min-RTT filter is ten seconds and its probe-RTT lasts 200 ms (the draft's
/// `MinRTTFilterLen`, `ProbeRTTDuration`, draft-cardwell-iccrg-bbr-congestion-control
/// §4.3.4), so on a short path a probe takes about 2 % of the time; BBRv2/v3 made the
/// probe cheaper for the same reason, draining to half a BDP instead of four packets.
/// But a probe lasts at least a round trip, and the window needs another round or so to
/// refill after it, so on a long path its cost grows with the RTT while the interval
/// stays ten seconds: at 100 Mbit/s x 1 s with 5 % loss the emulator saw a probe every
/// 12 s, each costing most of a second of the link, 5-8 % in all; probing every 60 s held
/// 92.9-93.0 Mbit/s against 85.9-87.7 (`lab/2026-11-30-one-second-ahead`). Forty round
/// trips keep a probe that costs about a round of the link near 2.5 % of the time, about
/// what it costs on a short path, and leave the ten seconds in force up to a 250 ms min
/// RTT, so those paths probe exactly when they did (fifty would have stretched 200 ms
/// paths, whose measured minimum lies a little above 200 ms). The price: a path whose
/// RTT grows is seen at the next probe, up to forty round trips later instead of ten
/// seconds (RFC 9002 §5.2 keeps its min_rtt for the connection's life and lets only a
/// persistent congestion reset it).
pub(super) const MIN_RTT_WINDOW_ROUNDS: u32 = 40;

/// The min-RTT window for a path whose min RTT is `min_rtt`: `window` (the configured
/// seconds), or [`MIN_RTT_WINDOW_ROUNDS`] round trips if that is longer.
pub(super) fn scaled_min_rtt_window(window: Duration, min_rtt: Duration) -> Duration {
    window.max(min_rtt.saturating_mul(MIN_RTT_WINDOW_ROUNDS))
}

/// Whether an RTT sample above the min RTT still confirms it: one within an eighth of
/// it (RFC 9406's threshold for a queue) refreshes the min RTT's stamp as a new minimum
/// would.
///
/// Probe-RTT drains the queue to see the path's own RTT, and finds out whether the path
/// got longer. A sample this close to the minimum shows both already: the queue was
/// nearly empty when it was taken, and the path is at most an eighth longer than the
/// min RTT says, which the window's 1.25 gain covers. BBR refreshes only on a sample at
/// or below the minimum, which a flow that empties its queue in every probe-bw cycle
/// meets only by chance once acks are jittered. On the emulator at 100 Mbit/s x 100 ms
/// with 10 % random loss a lone copy probed every ten seconds anyway, each probe half a
/// second at 60 Mbit/s; at 1 s x 5 % each probe took about 1.5 s at under half the link.
/// With this rule neither probed, and the copies gained about 1-1.5 points of the link
/// (`lab/2026-12-01-min-rtt-confirmed`). Flows that keep a queue standing (a deep
/// buffer's, soku flows draining at different times) see no such sample and probe as
/// before, and a flow beside a loss-based one in a shallow queue, whose probes also
/// re-judge that queue's loss, keeps BBR's rule ([`SokuCc::near_samples_confirm`]).
fn confirms_min_rtt(min_rtt: Duration, rtt: Duration) -> bool {
    rtt <= min_rtt + min_rtt / 8
}

impl SokuCc {
    /// Whether a sample near the min RTT may stand in for a probe-RTT
    /// ([`confirms_min_rtt`]). Not in background mode, whose probes tell it how much of
    /// its base delay is its own queue (`BACKGROUND_FIRST_PROBE` in `config.rs`): with
    /// near samples standing for them, a background flow beside CUBIC in a quarter-BDP
    /// buffer (path simulator, 100 ms) came back to 68 % of the link in the 3-8 s after
    /// CUBIC left in four seeds of eight, against 94.7-97.2 % in all eight
    /// (`background_beside_kernel_cubic_leaves_it_80_pct_and_comes_back`). Nor
    /// while the flow shares a shallow queue with a loss-based flow, where the probes
    /// also shake the loss bound that queue's overflow set: beside CUBIC in a quarter-BDP
    /// buffer with stalled acks (path simulator, 100 ms, seeds 1-8), soku kept 15-20 % of
    /// the two in four seeds when near samples stood for probes there, and 29-65 % in
    /// all eight with probes as BBR takes them
    /// (`beside_kernel_cubic_with_ack_stalls_soku_takes_30_to_70_pct`).
    fn near_samples_confirm(&self) -> bool {
        !self.config.background && self.coexist.is_none() && self.queue_loss.top_excess().is_none()
    }

    /// Refreshes the min RTT's stamp if `rtt`, a sample above the min RTT, confirms it.
    pub(super) fn confirm_min_rtt(&mut self, now: Instant, rtt: Duration) {
        if self.min_rtt.is_some_and(|m| confirms_min_rtt(m, rtt)) && self.near_samples_confirm() {
            self.min_rtt_stamp = now;
        }
    }

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
    /// or `first_min_rtt_window` before the connection's first probe once startup is
    /// over, each at least [`MIN_RTT_WINDOW_ROUNDS`] round trips. A background flow's
    /// short first window is not stretched: that probe is there to find, right after
    /// startup, how much of its base delay was its own queue (`config.rs`).
    pub(super) fn min_rtt_expiry(&self) -> Duration {
        let min_rtt = self.min_rtt.unwrap_or_default();
        if self.probe_rtts == 0 && self.filled_pipe {
            if self.config.background {
                self.config.first_min_rtt_window
            } else {
                scaled_min_rtt_window(self.config.first_min_rtt_window, min_rtt)
            }
        } else {
            scaled_min_rtt_window(self.config.min_rtt_window, min_rtt)
        }
    }

    pub(super) fn maybe_enter_probe_rtt(&mut self, now: Instant) {
        if self.mode == Mode::ProbeRtt || self.min_rtt.is_none() {
            return;
        }
        // Not while startup is still growing the window. The draft enters ProbeRTT from
        // any state, but a probe in startup throws away the doubling done so far:
        // startup takes the rounds to regrow the window from half a BDP, and on a long
        // path those rounds are seconds (at 1 s x 5 % loss on the emulator the min-RTT
        // window ran out 11 s into startup, the window fell from 5.4 to 1.8 MB and the
        // link was full at 18.8 s instead of about 13 s,
        // `lab/2026-11-30-one-second-ahead`). Startup's own rounds bound the wait: it
        // ends after three rounds without a quarter more bandwidth (the draft's
        // BBRCheckFullBWReached, §4.3.1.2), on loss or on a rising RTT, and an expired
        // min RTT is probed for as soon as it has. An app-limited startup may last as
        // long as the application wants, so it probes as before.
        if self.mode == Mode::Startup && !self.filled_pipe && !self.last_round_app_limited {
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
