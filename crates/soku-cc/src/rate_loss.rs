//! Loss told apart by the rate it came with: do the rounds that sent more lose a larger
//! share than the rounds that sent less?
//!
//! Random loss takes the same share of a round whatever the round sent. A token-bucket
//! policer, or a bottleneck with almost no buffer, drops only what a round sends above
//! its rate: the rounds that send more lose more, and those under the rate lose
//! nothing. The probe-bw cycle and every cut and regrowth of the loss bound vary what
//! a round sends, so the question can be asked of the rounds a flow sends anyway, with
//! no queue to look at (a policer has none). PCC Vivace (Dong et al., "PCC Vivace:
//! Online-learning congestion control", NSDI 2018) reads the same thing as the
//! gradient of its loss against its sending rate; BBRv2 takes loss on probing up as
//! the ceiling of `inflight_hi` (draft-cardwell-iccrg-bbr-congestion-control-02
//! §4.5.10).
//!
//! The last [`ROUNDS`] rounds are put in two classes by the bytes each sent (delivered
//! plus lost: what left one round earlier, of which the round's acks and losses
//! tell), *top* for those a sixteenth above the median of their block of eight and
//! *below* for the rest, and the two loss
//! shares are compared as [`crate::queue_loss`] compares its classes: a finding needs
//! the top to lose a larger share by three standard deviations of sampling noise and
//! by the share below itself (twice it), and is given up once the top loses no more
//! than twice the share below. Random loss of any share shows no such difference: to
//! be found, the top class would have to lose twice what the path loses at random.
//! What a finding does to a round is `SokuCc::round_congested`'s to say.

use std::collections::VecDeque;

use crate::queue_loss::{judge, Counts};

/// Rounds compared: four probe-bw cycles, so each class holds rounds of every phase.
pub const ROUNDS: usize = 32;
/// A round is in the top class when it sent more than the median by this part of it
/// (a sixteenth): rounds that differ by a few packets are one rate, and a round that
/// reports a loss the round before it did not sent that much more, which put one such
/// round in the top class and found loss following the rate where it had only begun.
const TOP_MARGIN: u64 = 16;
/// Rounds are classed against the median of their own block of this many (a probe-bw
/// cycle), so that the two classes are rounds of the same few seconds: loss that
/// began (or a rate that changed) partway through the kept rounds would otherwise
/// put the lossy rounds in one class and the clean ones in the other, by time.
const BLOCK: usize = 8;

/// The rounds kept, and what they last showed.
#[derive(Debug, Clone, Default)]
pub struct RateLoss {
    /// Bytes sent (delivered plus lost) and lost, per round.
    rounds: VecDeque<(u64, u64)>,
    /// The share the rounds that sent less lose, while those that sent more are found
    /// to lose a larger one.
    found: Option<f64>,
}

impl RateLoss {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// A round ended that delivered `delivered` bytes and lost `lost`: keeps it among
    /// the last [`ROUNDS`] and compares the two classes again (`mtu` turns bytes into
    /// packets for the noise).
    pub fn on_round(&mut self, delivered: u64, lost: u64, mtu: u64) {
        if self.rounds.len() == ROUNDS {
            self.rounds.pop_front();
        }
        self.rounds.push_back((delivered.saturating_add(lost), lost));
        if self.rounds.len() < ROUNDS {
            return;
        }
        let mut counts = Counts::default();
        for block in self.rounds.make_contiguous().chunks(BLOCK) {
            let mut sent: Vec<u64> = block.iter().map(|&(sent, _)| sent).collect();
            sent.sort_unstable();
            let median = sent[sent.len() / 2];
            for &(sent, lost) in block {
                let acked = sent - lost;
                counts.add(&if sent > median + median / TOP_MARGIN {
                    Counts { acked_top: acked, lost_top: lost, ..Counts::default() }
                } else {
                    Counts { acked_below: acked, lost_below: lost, ..Counts::default() }
                });
            }
        }
        self.found = judge(&counts, mtu, self.found);
    }

    /// The loss share of the rounds that sent less, while the rounds that sent more
    /// are found to lose a larger share; `None` while loss does not rise with the
    /// rate as far as can be told.
    pub fn below_share(&self) -> Option<f64> {
        self.found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: u64 = 1000;

    /// `n` cycles of rounds sending `sizes` packets each, losing `lost(size)` of them.
    fn cycles(r: &mut RateLoss, n: usize, sizes: &[u64], lost: impl Fn(u64) -> u64) {
        for _ in 0..n {
            for &size in sizes {
                let l = lost(size);
                r.on_round((size - l) * MTU, l * MTU, MTU);
            }
        }
    }

    /// A probe-bw cycle's rounds: probing, draining, six cruising, with some spread.
    const CYCLE: [u64; 8] = [500, 300, 400, 410, 390, 405, 395, 400];

    #[test]
    fn random_loss_at_any_share_does_not_rise_with_the_rate() {
        for percent in [1, 5, 10, 20] {
            let mut r = RateLoss::new();
            cycles(&mut r, 8, &CYCLE, |size| size * percent / 100);
            assert_eq!(r.below_share(), None, "{percent} %");
        }
    }

    #[test]
    fn a_policer_drops_only_above_its_rate() {
        let mut r = RateLoss::new();
        // A policer passing 420 packets a round.
        cycles(&mut r, 8, &CYCLE, |size| size.saturating_sub(420));
        assert_eq!(r.below_share(), Some(0.0));
    }

    #[test]
    fn a_policer_shows_over_random_loss() {
        let mut r = RateLoss::new();
        cycles(&mut r, 8, &CYCLE, |size| size / 100 + size.saturating_sub(420));
        let below = r.below_share().expect("found");
        assert!((below - 0.01).abs() < 0.002, "{below}");
    }

    #[test]
    fn a_finding_goes_when_the_loss_no_longer_follows_the_rate() {
        let mut r = RateLoss::new();
        cycles(&mut r, 8, &CYCLE, |size| size.saturating_sub(420));
        assert!(r.below_share().is_some());
        cycles(&mut r, 8, &CYCLE, |size| size / 20);
        assert_eq!(r.below_share(), None);
    }

    #[test]
    fn loss_that_begins_partway_is_not_taken_for_loss_that_follows_the_rate() {
        let mut r = RateLoss::new();
        cycles(&mut r, 2, &CYCLE, |_| 0);
        // From here on 5 % random loss, and the rounds send a little more.
        let more: Vec<u64> = CYCLE.iter().map(|size| size + 30).collect();
        cycles(&mut r, 2, &more, |size| size / 20);
        assert_eq!(r.below_share(), None);
    }

    #[test]
    fn rounds_that_all_send_the_same_tell_nothing() {
        let mut r = RateLoss::new();
        cycles(&mut r, 8, &[400], |_| 40);
        assert_eq!(r.below_share(), None);
    }
}
