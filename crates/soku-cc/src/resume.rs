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
//!   (RFC 9959's `jump_cwnd`, half of the saved window), in two steps. The first step
//!   is half the jump, which quinn paces out over most of a round trip; the second,
//!   the whole jump, is taken only once the first step's acks show no queue. A path
//!   slower than remembered answers the first step with a rising RTT, the first ack
//!   frames after one round trip; frames in a row whose RTT rose by a queue's threshold
//!   (RFC 9406's: an eighth of the RTT, 4..16 ms) retreat. The window does not grow
//!   from acks during the first step; from the second on, startup grows it as usual.
//!
//!   Why two steps: no signal comes back before one round trip, and the whole jump
//!   went out within 0.8 of one. A memory of ten times the path's rate jumps to five
//!   of its BDPs; in one step the path could take at most its BDP and its queue, and
//!   the other 3.2 BDPs were dropped before any ack arrived
//!   (`lab/2026-11-25-stale-memory`). In two, 2.5 BDPs go out before the
//!   first answer, and 0.3-0.8 BDP beyond a cold start were dropped on the emulator
//!   (`lab/2026-11-26-stale-memory-two-steps`). A memory that holds costs a
//!   fraction of a round trip: the second step follows as soon as an eighth of the
//!   first is acknowledged without a rise.
//! - **Validating**: once a whole jump's worth of data is out, until every packet sent
//!   under it is acknowledged or lost. (RFC 9959 also
//!   ends the unvalidated phase a round trip after the jump; here the data often waits
//!   that long for the receiver's report of what it holds, and a jump judged on the
//!   few control packets sent meanwhile would prove nothing. An application that never
//!   fills the jump never sends more than it either.)
//! - **Normal**: if no more than the controller's loss threshold of those bytes were
//!   lost and startup did not see a queue build, startup goes on doubling from there.
//! - **Safe retreat**: otherwise startup ends at once and drain brings what is in
//!   flight down to one bandwidth-delay product of the rate actually delivered. The
//!   loss rule is applied as losses are reported, not only at the verdict: the first
//!   loss share over the threshold retreats. At most the first step (a quarter of a
//!   remembered BDP, sent over most of a round trip) was in excess.
//!
//! Random loss alone does not count against a jump, for the same reason it does not
//! end startup (see [`crate::model`]): only a loss share above `loss_threshold` does.

use std::time::{Duration, Instant};

use crate::hint::HintSlot;
use crate::startup_delay::queue_rise;

/// Ack frames in a row over the threshold that retreat (one late timestamp does not),
/// and under it that take the second step.
const FRAMES_TO_DECIDE: u32 = 2;
/// How long, as a share of the RTT, the frames over the threshold must keep arriving
/// before they retreat: a queue keeps every ack late, a receiver or sender that stalls
/// does not for long. On the emulator at 200 ms a receiver busy with its first chunks
/// delayed the acks of a memory that held by 25-45 ms for 30 ms, and half of the copies
/// retreated from it. Waiting costs a stale memory nothing: the first step is out by
/// then, and nothing more is sent while the rise is judged ([`Step::Pause`]).
const RISE_SPAN_SHARE: u32 = 2;
/// The share of the first step that must be acknowledged before the second: on a path
/// ten times slower than remembered, the first eighth of the step already met a queue.
const FIRST_STEP_SHARE: u64 = 8;
/// Packets acknowledged after one that make it lost (RFC 9002 §6.1.1, kPacketThreshold,
/// quinn's default): once a packet this far past the last one sent before a retreat is
/// acknowledged, every packet sent before it is acknowledged or declared lost.
const PACKET_THRESHOLD: u64 = 3;

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
    /// The window allowed now: half the jump, then the whole jump.
    step: u64,
    /// The RTT the jump was confirmed against, the base for a rise.
    base_rtt: Duration,
    /// Ack frames in a row whose RTT rose over the threshold (and when the first of them
    /// arrived), and in a row that did not.
    rises: u32,
    rising_since: Option<Instant>,
    calm: u32,
    /// Whether the last ack frame judged came back risen by a queue's threshold (or
    /// startup confirmed a queue since), and whether the jump was retreated from on its
    /// losses while it had not (see [`CarefulResume::lost_without_queue`]).
    queue_now: bool,
    lost_without_queue: bool,
    /// Bytes sent under the jump, and the last packet number.
    sent: u64,
    last_pn: Option<u64>,
    /// The last packet number sent in any phase, the last one sent before the
    /// retreat, and the largest acknowledged (see [`CarefulResume::retreat_settled`]).
    last_sent_pn: Option<u64>,
    retreat_pn: Option<u64>,
    largest_acked: Option<u64>,
    /// Bytes acknowledged and lost while unvalidated or validating.
    acked: u64,
    lost: u64,
}

/// What an ack frame's RTT told the jump ([`CarefulResume::on_frame_rtt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing changed.
    Hold,
    /// The window may be this: the whole jump once the first step carried without a
    /// queue, or the step again once a rise went away.
    Window(u64),
    /// The RTT rose and the rise is not yet judged: send nothing more meanwhile (the
    /// window falls to what is in flight), so that waiting to judge costs the path
    /// nothing.
    Pause,
    /// A queue rose behind the jump: retreat.
    Retreat,
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
            step: 0,
            base_rtt: Duration::ZERO,
            rises: 0,
            rising_since: None,
            calm: 0,
            queue_now: false,
            lost_without_queue: false,
            sent: 0,
            last_pn: None,
            last_sent_pn: None,
            retreat_pn: None,
            largest_acked: None,
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

    /// Whether the jump was retreated from on its losses while its acks came back with
    /// no queue: its packets were dropped at a rate the path carried without queueing,
    /// which is how a UDP policer drops (the application's policing watch then counts
    /// them). A slower path with a buffer fills its queue before it drops, so the ack
    /// frame that reports its losses, for packets sent after them, carries that queue.
    pub fn lost_without_queue(&self) -> bool {
        self.lost_without_queue
    }

    /// Whether, after a retreat, every packet sent before it has been acknowledged or
    /// declared lost: the jump's losses are all counted. They are declared up to a few
    /// round trips of the queue the jump built after the retreat (seen: 3 s of them at
    /// 200 ms, with the RTT at 400 ms), and a share of losses counted from before that
    /// point is the jump's, not the path's.
    pub fn retreat_settled(&self) -> bool {
        self.phase == Phase::SafeRetreat
            && self.retreat_pn.is_none_or(|last| {
                self.largest_acked >= Some(last.saturating_add(PACKET_THRESHOLD))
            })
    }

    /// Startup confirmed a queue while the jump was out.
    pub fn on_queue_confirmed(&mut self) {
        self.queue_now = true;
    }

    /// The window the jump allows now: its first step, then all of it (0 without one).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Whether the window must not grow from acks: during the jump's first step. Once
    /// the first step's acks showed no queue, startup grows from the whole jump as
    /// usual while its losses still judge it.
    pub fn holds_growth(&self) -> bool {
        self.in_jump() && self.step < self.jump
    }

    /// Whether the jump is being sent or validated: the window does not fall below the
    /// jump's step through the startup cap.
    pub fn in_jump(&self) -> bool {
        matches!(self.phase, Phase::Unvalidated | Phase::Validating)
    }

    /// At the first RTT sample once the hint is known: the window of the jump's first
    /// step, if the hint confirms the path and its jump beats `window`. A server learns
    /// the hint from the client's hello over ssh, which may come after the handshake's
    /// samples (see `soku_transport::ClientPin`); a jump that startup has outgrown by
    /// then is not taken.
    pub fn on_rtt_sample(&mut self, rtt: Duration, window: u64) -> Option<u64> {
        if self.phase != Phase::Reconnaissance {
            return None;
        }
        let hint = self.hint.get()?;
        self.phase = Phase::Normal;
        let path = hint.remembered?;
        let jump = path.jump_window();
        if !path.confirms(rtt) || jump <= window {
            return None;
        }
        self.phase = Phase::Unvalidated;
        self.jump = jump;
        self.step = (jump / 2).max(window);
        self.base_rtt = rtt.min(path.min_rtt);
        Some(self.step)
    }

    /// The smallest RTT of one ack frame, arrived at `now`, while the jump is out: two
    /// or more frames in a row risen by a queue's threshold over the RTT the jump was
    /// confirmed against, arriving over half an RTT or more, retreat
    /// (not once startup grew `window` past the whole jump); two without the rise, once
    /// an eighth of the first step is acknowledged, take the second step. `min_rtt` is
    /// the controller's, which may have fallen since.
    pub fn on_frame_rtt(
        &mut self,
        now: Instant,
        rtt: Duration,
        min_rtt: Duration,
        window: u64,
    ) -> Step {
        // Until an eighth of the step is out, the frames acknowledge the handshake and
        // the few control packets before the data, whose acks wait for the receiver's
        // ack delay: late, and no sign of a queue.
        if !self.in_jump() || self.sent < self.step / FIRST_STEP_SHARE {
            return Step::Hold;
        }
        if window > self.jump {
            // Startup grew past the whole jump: a queue now is startup's to find (its
            // own exit, `crate::startup_delay`, waits for two rounds of it and a
            // bandwidth estimate that caught up; leaving at the first rise drained a
            // 200 ms path to a third of its rate).
            self.rises = 0;
            self.rising_since = None;
            return Step::Hold;
        }
        let base = self.base_rtt.min(min_rtt);
        let rise = queue_rise(base);
        self.queue_now = rtt > base + rise;
        if self.queue_now {
            self.calm = 0;
            self.rises += 1;
            let since = *self.rising_since.get_or_insert(now);
            let span = rise.max(base / RISE_SPAN_SHARE);
            if self.rises >= FRAMES_TO_DECIDE && now.saturating_duration_since(since) >= span {
                self.enter_retreat();
                return Step::Retreat;
            }
            return Step::Pause;
        }
        let paused = self.rises > 0;
        self.rises = 0;
        self.rising_since = None;
        self.calm += 1;
        if self.step < self.jump
            && self.calm >= FRAMES_TO_DECIDE
            && self.acked >= self.step / FIRST_STEP_SHARE
        {
            self.step = self.jump;
            return Step::Window(self.step);
        }
        if paused {
            return Step::Window(self.step);
        }
        Step::Hold
    }

    /// A packet was sent.
    pub fn on_sent(&mut self, bytes: u64, packet_number: u64) {
        self.last_sent_pn = Some(packet_number);
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
        self.largest_acked = self.largest_acked.max(Some(largest));
        if self.phase != Phase::Validating || self.last_pn.is_none_or(|last| largest < last) {
            return Verdict::Pending;
        }
        if self.lost_too_much(loss_threshold, min_loss) {
            self.retreat_on_loss();
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

    /// The jump lost more than the threshold ([`CarefulResume::lost_too_much`]): the
    /// path did not carry it. quinn judges an ack frame's RTT (`on_end_acks`) before
    /// the losses it reveals, so the frame that reported them was judged already.
    pub fn retreat_on_loss(&mut self) {
        if self.in_jump() {
            self.enter_retreat();
            self.lost_without_queue = !self.queue_now;
        }
    }

    /// Startup ended while the jump was out (a queue built, or a round lost too much):
    /// the path did not carry it.
    pub fn retreat(&mut self) {
        if self.in_jump() {
            self.enter_retreat();
        }
    }

    fn enter_retreat(&mut self) {
        self.phase = Phase::SafeRetreat;
        self.retreat_pn = self.last_sent_pn;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hint::{ConnectionHint, RememberedPath};

    /// A clock for ack frames, 200 ms apart (longer than half of any RTT here).
    fn tick() -> Instant {
        use std::cell::Cell;
        thread_local!(static FRAMES: Cell<u32> = const { Cell::new(0) });
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let n = FRAMES.with(|f| {
            f.set(f.get() + 1);
            f.get()
        });
        *START.get_or_init(Instant::now) + Duration::from_millis(200) * n
    }

    /// A window no larger than the jump.
    const W: u64 = 600_000;

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
    fn no_memory_no_jump() {
        let mut cr = CarefulResume::new(HintSlot::with(ConnectionHint::default()), true);
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

    /// A server's hint comes with the client's hello over ssh, after the handshake's
    /// first samples when TCP resent the hello: the first sample once it is there
    /// decides, and only that one.
    #[test]
    fn the_first_sample_after_the_hint_decides() {
        let slot = HintSlot::new();
        let mut cr = CarefulResume::new(slot.clone(), true);
        assert_eq!(cr.on_rtt_sample(Duration::from_millis(200), 14_720), None);
        assert_eq!(cr.phase(), Phase::Reconnaissance);
        slot.set(ConnectionHint { remembered: Some(path(100, 200)), background: false });
        assert_eq!(cr.on_rtt_sample(Duration::from_millis(200), 14_720), Some(625_000));
        assert_eq!(cr.on_rtt_sample(Duration::from_millis(200), 14_720), None);

        // A hint that comes once startup has outgrown its jump is not taken.
        let slot = HintSlot::new();
        let mut cr = CarefulResume::new(slot.clone(), true);
        assert_eq!(cr.on_rtt_sample(Duration::from_millis(200), 14_720), None);
        slot.set(ConnectionHint { remembered: Some(path(100, 200)), background: false });
        assert_eq!(cr.on_rtt_sample(Duration::from_millis(200), 2_000_000), None);
        assert_eq!(cr.phase(), Phase::Normal);
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
        assert_eq!(cr.on_rtt_sample(Duration::from_millis(210), 14_720), Some(625_000));
        cr.on_sent(100_000, 9);
        cr.on_ack(100_000);
        let ms = Duration::from_millis;
        assert_eq!(cr.on_frame_rtt(tick(), ms(203), ms(200), W), Step::Hold);
        assert_eq!(cr.on_frame_rtt(tick(), ms(201), ms(200), W), Step::Window(1_250_000));
        let last = send_jump(&mut cr);
        assert_eq!(cr.phase(), Phase::Validating);
        cr.on_ack(500_000);
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
        assert!(cr.lost_without_queue(), "no ack frame showed a queue");
    }

    #[test]
    fn a_retreat_settles_once_a_packet_three_past_its_last_is_acknowledged() {
        let ms = Duration::from_millis;
        let mut cr = CarefulResume::new(hint(path(1000, 200)), true);
        cr.on_rtt_sample(ms(200), 14_720).expect("jump");
        assert!(!cr.retreat_settled(), "no retreat yet");
        cr.on_sent(3_000_000, 2000);
        cr.on_ack(30_000);
        cr.on_frame_rtt(tick(), ms(230), ms(200), W);
        assert_eq!(cr.on_frame_rtt(tick(), ms(240), ms(200), W), Step::Retreat);
        // Sent after the retreat: not the jump's.
        cr.on_sent(1000, 2001);
        cr.on_sent(1000, 2002);
        cr.on_sent(1000, 2003);
        assert!(!cr.retreat_settled(), "nothing acknowledged since");
        assert_eq!(cr.on_end_acks(Some(2002), 0.1, 4000), Verdict::Pending);
        assert!(!cr.retreat_settled(), "packet 2000 may still be declared lost");
        cr.on_end_acks(Some(1990), 0.1, 4000);
        cr.on_end_acks(Some(2003), 0.1, 4000);
        assert!(cr.retreat_settled(), "2003 acknowledged: 2000 and all before it are settled");
        cr.on_end_acks(Some(1995), 0.1, 4000);
        assert!(cr.retreat_settled(), "an older ack frame does not unsettle it");
    }

    #[test]
    fn losses_behind_acks_with_no_queue_are_told_from_losses_behind_a_queue() {
        let ms = Duration::from_millis;
        for (last_frame_ms, without_queue) in [(201, true), (260, false)] {
            let mut cr = CarefulResume::new(hint(path(100, 200)), true);
            cr.on_rtt_sample(ms(200), 14_720).expect("jump");
            cr.on_sent(600_000, 400);
            cr.on_ack(100_000);
            assert_eq!(cr.on_frame_rtt(tick(), ms(201), ms(200), W), Step::Hold);
            cr.on_frame_rtt(tick(), ms(last_frame_ms), ms(200), W);
            cr.on_loss(50_000);
            assert!(cr.lost_too_much(0.1, 4000));
            cr.retreat_on_loss();
            assert_eq!(cr.phase(), Phase::SafeRetreat);
            assert_eq!(cr.lost_without_queue(), without_queue, "last frame at {last_frame_ms} ms");
        }
    }

    #[test]
    fn a_queue_startup_confirmed_is_a_queue_for_the_losses_after_it() {
        let mut cr = CarefulResume::new(hint(path(100, 200)), true);
        cr.on_rtt_sample(Duration::from_millis(200), 14_720).expect("jump");
        cr.on_sent(600_000, 400);
        cr.on_queue_confirmed();
        cr.on_loss(50_000);
        cr.retreat_on_loss();
        assert!(!cr.lost_without_queue());
    }

    #[test]
    fn a_retreat_from_a_rise_or_from_startup_is_not_one_without_a_queue() {
        let ms = Duration::from_millis;
        let mut cr = CarefulResume::new(hint(path(1000, 200)), true);
        cr.on_rtt_sample(ms(200), 14_720).expect("jump");
        cr.on_sent(3_000_000, 2000);
        cr.on_ack(30_000);
        cr.on_frame_rtt(tick(), ms(230), ms(200), W);
        assert_eq!(cr.on_frame_rtt(tick(), ms(240), ms(200), W), Step::Retreat);
        assert!(!cr.lost_without_queue());
        let mut cr = CarefulResume::new(hint(path(100, 200)), true);
        cr.on_rtt_sample(ms(200), 14_720).expect("jump");
        cr.retreat();
        assert!(!cr.lost_without_queue(), "a collapse or a full pipe says nothing of a policer");
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

    #[test]
    fn the_jump_goes_out_in_two_steps_the_second_once_the_first_met_no_queue() {
        let ms = Duration::from_millis;
        let mut cr = CarefulResume::new(hint(path(100, 200)), true);
        assert_eq!(cr.on_rtt_sample(ms(200), 14_720), Some(625_000), "half the jump first");
        assert!(cr.holds_growth());
        cr.on_sent(625_000, 500);
        assert_eq!(cr.phase(), Phase::Unvalidated, "the first step is not the whole jump");
        cr.on_ack(50_000);
        assert_eq!(cr.on_frame_rtt(tick(), ms(200), ms(200), W), Step::Hold);
        assert_eq!(
            cr.on_frame_rtt(tick(), ms(200), ms(200), W),
            Step::Hold,
            "under an eighth acked"
        );
        cr.on_ack(40_000);
        assert_eq!(
            cr.on_frame_rtt(tick(), ms(215), ms(200), W),
            Step::Window(1_250_000),
            "15 ms < 16"
        );
        assert_eq!(cr.step(), 1_250_000);
        assert!(!cr.holds_growth(), "startup grows from the whole jump");
        assert!(cr.in_jump(), "still judged");
        assert_eq!(cr.on_frame_rtt(tick(), ms(200), ms(200), W), Step::Hold);
    }

    #[test]
    fn a_queue_behind_the_first_step_retreats_after_two_frames() {
        let ms = Duration::from_millis;
        let mut cr = CarefulResume::new(hint(path(1000, 200)), true);
        assert_eq!(cr.on_rtt_sample(ms(200), 14_720), Some(6_250_000));
        cr.on_sent(3_000_000, 2000);
        cr.on_ack(15_000);
        assert_eq!(cr.on_frame_rtt(tick(), ms(201), ms(200), W), Step::Hold);
        cr.on_ack(15_000);
        assert_eq!(
            cr.on_frame_rtt(tick(), ms(230), ms(200), W),
            Step::Pause,
            "one late frame is not a queue, but nothing more goes out until it is judged"
        );
        assert_eq!(
            cr.on_frame_rtt(tick(), ms(201), ms(200), W),
            Step::Window(6_250_000),
            "the rise went away: the step again"
        );
        assert_eq!(cr.on_frame_rtt(tick(), ms(230), ms(200), W), Step::Pause);
        assert_eq!(cr.on_frame_rtt(tick(), ms(240), ms(200), W), Step::Retreat);
        assert_eq!(cr.phase(), Phase::SafeRetreat);
        assert_eq!(cr.step(), 6_250_000, "the second step was never taken");
        assert_eq!(
            cr.on_frame_rtt(tick(), ms(200), ms(200), W),
            Step::Hold,
            "nothing left to judge"
        );
    }

    #[test]
    fn the_rise_threshold_is_an_eighth_of_the_rtt_within_4_to_16_ms() {
        let ms = Duration::from_millis;
        for (rtt, under, over) in [(20, 23, 25), (80, 89, 91), (300, 315, 317)] {
            let mut cr = CarefulResume::new(hint(path(100, rtt)), true);
            let step = cr.on_rtt_sample(ms(rtt), 1000).expect("jump");
            cr.on_sent(step, 10);
            assert_eq!(cr.on_frame_rtt(tick(), ms(under), ms(rtt), 1000), Step::Hold);
            assert_eq!(
                cr.on_frame_rtt(tick(), ms(under), ms(rtt), 1000),
                Step::Hold,
                "{rtt} ms: {under} is no rise"
            );
            assert_eq!(cr.on_frame_rtt(tick(), ms(over), ms(rtt), 1000), Step::Pause);
            assert_eq!(
                cr.on_frame_rtt(tick(), ms(over), ms(rtt), 1000),
                Step::Retreat,
                "{rtt} ms: {over} is"
            );
        }
    }

    #[test]
    fn once_startup_grew_past_the_jump_a_queue_is_startups_to_find() {
        let ms = Duration::from_millis;
        let mut cr = CarefulResume::new(hint(path(100, 200)), true);
        cr.on_rtt_sample(ms(200), 14_720).expect("jump");
        cr.on_sent(100_000, 9);
        cr.on_ack(100_000);
        cr.on_frame_rtt(tick(), ms(200), ms(200), W);
        assert_eq!(cr.on_frame_rtt(tick(), ms(200), ms(200), W), Step::Window(1_250_000));
        for _ in 0..4 {
            assert_eq!(cr.on_frame_rtt(tick(), ms(230), ms(200), 2_000_000), Step::Hold);
        }
        assert!(cr.in_jump(), "still judged by its losses and its verdict");
    }

    #[test]
    fn late_acks_for_less_than_half_an_rtt_are_not_a_queue() {
        let ms = Duration::from_millis;
        let mut cr = CarefulResume::new(hint(path(100, 200)), true);
        let step = cr.on_rtt_sample(ms(200), 14_720).expect("jump");
        let t = Instant::now();
        assert_eq!(cr.on_frame_rtt(t, ms(240), ms(200), W), Step::Hold, "no data out yet");
        cr.on_sent(step, 10);
        // A receiver busy for 60 ms: its acks 25-45 ms late.
        for (i, late) in [25u64, 40, 45, 30, 26].into_iter().enumerate() {
            let at = t + ms(15 * i as u64);
            assert_eq!(cr.on_frame_rtt(at, ms(200 + late), ms(200), W), Step::Pause, "frame {i}");
        }
        // A queue: late frames arriving for 100 ms and more.
        assert_eq!(cr.on_frame_rtt(t + ms(70), ms(201), ms(200), W), Step::Window(625_000));
        assert_eq!(cr.on_frame_rtt(t + ms(80), ms(230), ms(200), W), Step::Pause);
        assert_eq!(cr.on_frame_rtt(t + ms(150), ms(250), ms(200), W), Step::Pause, "70 ms < 100");
        assert_eq!(cr.on_frame_rtt(t + ms(180), ms(260), ms(200), W), Step::Retreat);
    }
}
