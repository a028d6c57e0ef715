//! Careful resume: a new connection on a path an earlier copy measured starts near the
//! rate it found, instead of doubling up from ten packets (RFC 9959, "Convergence of
//! Congestion Control from Retained State").
//!
//! Startup from a 14.7 kB window needs about eight round trips to fill 100 Mbit/s at
//! 200 ms, and the copies soku is for repeat on the same paths. The application
//! remembers what a copy saw (the bandwidth it delivered and the min RTT) and hands it
//! to the next connection's controller through a [`HintSlot`]; the controller then
//! goes through RFC 9959's phases:
//!
//! - **Reconnaissance**: the first RTT sample (the handshake's) must confirm the path:
//!   within half to ten times the remembered min RTT. Otherwise the hint is ignored and
//!   startup runs as usual.
//! - **Unvalidated**: the window jumps to half the remembered bandwidth-delay product
//!   (RFC 9959's `jump_cwnd`, half of the saved window), which quinn paces out over a
//!   round trip. It does not grow from acks meanwhile.
//! - **Validating**: once a whole jump's worth of data is out, until every packet sent
//!   under it is acknowledged or lost. The window still does not grow. (RFC 9959 also
//!   ends the unvalidated phase a round trip after the jump; here the data often waits
//!   that long for the receiver's report of what it holds, and a jump judged on the
//!   few control packets sent meanwhile would prove nothing. An application that never
//!   fills the jump never sends more than it either.)
//! - **Normal**: if no more than the controller's loss threshold of those bytes were
//!   lost and startup did not see a queue build, startup goes on doubling from there.
//! - **Safe retreat**: otherwise startup ends at once and drain brings what is in
//!   flight down to one bandwidth-delay product of the rate actually delivered. The
//!   loss rule is applied as losses are reported, not only at the verdict: the first
//!   loss share over the threshold retreats. At most one jump (half a remembered BDP,
//!   sent over about one round trip) was in excess.
//!
//! Random loss alone does not count against a jump, for the same reason it does not
//! end startup (see [`crate::model`]): only a loss share above `loss_threshold` does.

use std::time::Duration;

use crate::hint::HintSlot;

/// What an earlier copy learned about a path, in the direction the data will flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RememberedPath {
    /// The rate the copy delivered, in bits per second.
    pub bandwidth_bps: u64,
    /// The smallest RTT it saw.
    pub min_rtt: Duration,
}

impl RememberedPath {
    /// Half the remembered bandwidth-delay product, in bytes: the jump.
    pub fn jump_window(&self) -> u64 {
        let bdp = u128::from(self.bandwidth_bps / 8) * self.min_rtt.as_nanos() / 1_000_000_000;
        u64::try_from(bdp / 2).unwrap_or(u64::MAX)
    }

    /// Whether `rtt`, measured on the new connection, says it is the same path: at
    /// least half and less than ten times the remembered min RTT.
    pub fn confirms(&self, rtt: Duration) -> bool {
        rtt >= self.min_rtt / 2 && rtt < self.min_rtt.saturating_mul(10)
    }
}

/// RFC 9959's phases, as this controller runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the first RTT sample.
    Reconnaissance,
    /// The window jumped; the jump is being sent.
    Unvalidated,
    /// The jump is out; waiting for its acks.
    Validating,
    /// The jump held (or there was none): the controller runs as usual.
    Normal,
    /// The path did not carry the jump: startup ended and drain took over.
    SafeRetreat,
}

impl Phase {
    /// A short lowercase name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Reconnaissance => "reconnaissance",
            Phase::Unvalidated => "unvalidated",
            Phase::Validating => "validating",
            Phase::Normal => "normal",
            Phase::SafeRetreat => "safe_retreat",
        }
    }
}

/// The careful-resume state of one connection.
#[derive(Debug, Clone)]
pub struct CarefulResume {
    hint: HintSlot,
    phase: Phase,
    jump: u64,
    /// Bytes sent under the jump, and the last packet number.
    sent: u64,
    last_pn: Option<u64>,
    /// Bytes acknowledged and lost while unvalidated or validating.
    acked: u64,
    lost: u64,
}

/// What [`CarefulResume::on_end_acks`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing changed.
    Pending,
    /// The jump held.
    Validated,
    /// The jump lost more than the threshold: retreat.
    Retreat,
}

impl CarefulResume {
    /// A connection that will consult `hint` at its first RTT sample; with `enabled`
    /// false (background mode) it never jumps.
    pub fn new(hint: HintSlot, enabled: bool) -> Self {
        Self {
            hint,
            phase: if enabled { Phase::Reconnaissance } else { Phase::Normal },
            jump: 0,
            sent: 0,
            last_pn: None,
            acked: 0,
            lost: 0,
        }
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The jump window, in bytes (0 if there was no jump).
    pub fn jump(&self) -> u64 {
        self.jump
    }

    /// Whether the jump is being sent or validated: the window neither grows from acks
    /// nor falls below the jump through the startup cap.
    pub fn in_jump(&self) -> bool {
        matches!(self.phase, Phase::Unvalidated | Phase::Validating)
    }

    /// At the first RTT sample: the window to jump to, if the hint confirms the path
    /// and its jump beats `window`.
    pub fn on_rtt_sample(&mut self, rtt: Duration, window: u64) -> Option<u64> {
        if self.phase != Phase::Reconnaissance {
            return None;
        }
        self.phase = Phase::Normal;
        let path = self.hint.remembered()?;
        let jump = path.jump_window();
        if !path.confirms(rtt) || jump <= window {
            return None;
        }
        self.phase = Phase::Unvalidated;
        self.jump = jump;
        Some(jump)
    }

    /// A packet was sent.
    pub fn on_sent(&mut self, bytes: u64, packet_number: u64) {
        if self.phase != Phase::Unvalidated {
            return;
        }
        self.sent += bytes;
        self.last_pn = Some(packet_number);
        if self.sent >= self.jump {
            self.phase = Phase::Validating;
        }
    }

    /// Bytes acknowledged.
    pub fn on_ack(&mut self, bytes: u64) {
        if self.in_jump() {
            self.acked += bytes;
        }
    }

    /// Bytes declared lost.
    pub fn on_loss(&mut self, bytes: u64) {
        if self.in_jump() {
            self.lost += bytes;
        }
    }

    /// After a batch of acks: judges the jump once all of it is acknowledged or lost. `loss_threshold`
    /// is the controller's; `min_loss` the fewest bytes lost that count.
    pub fn on_end_acks(
        &mut self,
        largest_acked: Option<u64>,
        loss_threshold: f64,
        min_loss: u64,
    ) -> Verdict {
        let Some(largest) = largest_acked else {
            return Verdict::Pending;
        };
        if self.phase != Phase::Validating || self.last_pn.is_none_or(|last| largest < last) {
            return Verdict::Pending;
        }
        if self.lost_too_much(loss_threshold, min_loss) {
            self.phase = Phase::SafeRetreat;
            Verdict::Retreat
        } else {
            self.phase = Phase::Normal;
            Verdict::Validated
        }
    }

    /// Whether the jump, while it is out or being validated, has already lost more
    /// than `loss_threshold` of what was judged so far (and at least `min_loss`): the
    /// same rule as the verdict, applied as losses come in.
    pub fn lost_too_much(&self, loss_threshold: f64, min_loss: u64) -> bool {
        self.in_jump()
            && self.lost >= min_loss
            && self.lost as f64 > loss_threshold * (self.acked + self.lost) as f64
    }

    /// Startup ended while the jump was out (a queue built, or a round lost too much):
    /// the path did not carry it.
    pub fn retreat(&mut self) {
        if self.in_jump() {
            self.phase = Phase::SafeRetreat;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hint::ConnectionHint;

    fn hint(path: RememberedPath) -> HintSlot {
        HintSlot::with(ConnectionHint { remembered: Some(path), background: false })
    }

    fn path(mbit: u64, rtt_ms: u64) -> RememberedPath {
        RememberedPath { bandwidth_bps: mbit * 1_000_000, min_rtt: Duration::from_millis(rtt_ms) }
    }

    #[test]
    fn the_jump_is_half_the_remembered_bdp() {
        // 100 Mbit/s x 200 ms = 2.5 MB.
        assert_eq!(path(100, 200).jump_window(), 1_250_000);
    }

    #[test]
    fn the_rtt_must_confirm_the_path() {
        let p = path(100, 200);
        assert!(p.confirms(Duration::from_millis(200)));
        assert!(p.confirms(Duration::from_millis(100)));
        assert!(p.confirms(Duration::from_millis(1999)));
        assert!(!p.confirms(Duration::from_millis(99)));
        assert!(!p.confirms(Duration::from_millis(2000)));
    }

    #[test]
    fn no_hint_no_jump() {
        let mut cr = CarefulResume::new(HintSlot::new(), true);
        assert_eq!(cr.on_rtt_sample(Duration::from_millis(200), 14_720), None);
        assert_eq!(cr.phase(), Phase::Normal);
    }

    #[test]
    fn background_never_jumps() {
        let mut cr = CarefulResume::new(hint(path(100, 200)), false);
        assert_eq!(cr.on_rtt_sample(Duration::from_millis(200), 14_720), None);
    }

    #[test]
    fn a_different_rtt_ignores_the_hint() {
        let mut cr = CarefulResume::new(hint(path(100, 200)), true);
        assert_eq!(cr.on_rtt_sample(Duration::from_millis(20), 14_720), None);
        assert_eq!(cr.phase(), Phase::Normal);
    }

    #[test]
    fn only_the_first_sample_decides() {
        let slot = HintSlot::new();
        let mut cr = CarefulResume::new(slot.clone(), true);
        assert_eq!(cr.on_rtt_sample(Duration::from_millis(200), 14_720), None);
        slot.set(ConnectionHint { remembered: Some(path(100, 200)), background: false });
        assert_eq!(cr.on_rtt_sample(Duration::from_millis(200), 14_720), None);
    }

    /// Sends the jump in 1000-byte packets numbered from 10; returns the last number.
    fn send_jump(cr: &mut CarefulResume) -> u64 {
        let mut pn = 10;
        while cr.phase() == Phase::Unvalidated {
            cr.on_sent(1000, pn);
            pn += 1;
        }
        pn - 1
    }

    #[test]
    fn a_clean_jump_validates_once_all_of_it_is_acknowledged() {
        let mut cr = CarefulResume::new(hint(path(100, 200)), true);
        assert_eq!(cr.on_rtt_sample(Duration::from_millis(210), 14_720), Some(1_250_000));
        let last = send_jump(&mut cr);
        assert_eq!(cr.phase(), Phase::Validating);
        cr.on_ack(600_000);
        cr.on_loss(10_000); // under 1 %: random loss
        assert_eq!(cr.on_end_acks(Some(last - 1), 0.1, 4000), Verdict::Pending);
        cr.on_ack(640_000);
        assert_eq!(cr.on_end_acks(Some(last), 0.1, 4000), Verdict::Validated);
        assert_eq!(cr.phase(), Phase::Normal);
        assert!(!cr.in_jump());
    }

    #[test]
    fn losses_count_against_the_jump_as_they_come() {
        let mut cr = CarefulResume::new(hint(path(100, 200)), true);
        assert!(!cr.lost_too_much(0.1, 4000), "no jump yet");
        cr.on_rtt_sample(Duration::from_millis(200), 14_720).expect("jump");
        cr.on_sent(600_000, 400);
        cr.on_ack(100_000);
        cr.on_loss(3_000);
        assert!(!cr.lost_too_much(0.1, 4000), "fewer than the fewest that count");
        cr.on_loss(9_000);
        assert!(cr.lost_too_much(0.1, 4000), "12 kB of 112 kB judged: over 10 %");
        cr.on_ack(1_000_000);
        assert!(!cr.lost_too_much(0.1, 4000), "random loss in a jump that holds");
        cr.retreat();
        assert!(!cr.lost_too_much(0.1, 4000), "out of the jump: nothing to judge");
    }

    #[test]
    fn heavy_loss_in_the_jump_retreats() {
        let mut cr = CarefulResume::new(hint(path(100, 200)), true);
        cr.on_rtt_sample(Duration::from_millis(200), 14_720);
        let last = send_jump(&mut cr);
        cr.on_ack(800_000);
        cr.on_loss(450_000);
        assert_eq!(cr.on_end_acks(Some(last), 0.1, 4000), Verdict::Retreat);
        assert_eq!(cr.phase(), Phase::SafeRetreat);
    }

    #[test]
    fn a_jump_is_judged_only_once_it_was_all_sent() {
        // An application that waits a round trip before sending its data: the few
        // packets meanwhile, acknowledged, do not validate the jump.
        let mut cr = CarefulResume::new(hint(path(100, 200)), true);
        cr.on_rtt_sample(Duration::from_millis(200), 14_720);
        cr.on_sent(100, 10);
        cr.on_ack(100);
        assert_eq!(cr.on_end_acks(Some(10), 0.1, 4000), Verdict::Pending);
        assert_eq!(cr.phase(), Phase::Unvalidated);
        let last = send_jump(&mut cr);
        cr.on_ack(1_250_000);
        assert_eq!(cr.on_end_acks(Some(last), 0.1, 4000), Verdict::Validated);
    }

    #[test]
    fn a_queue_in_the_jump_retreats() {
        let mut cr = CarefulResume::new(hint(path(100, 200)), true);
        cr.on_rtt_sample(Duration::from_millis(200), 14_720);
        cr.on_sent(1000, 10);
        cr.retreat();
        assert_eq!(cr.phase(), Phase::SafeRetreat);
    }
}
