//! Telling a UDP rate limit from a slow path, from QUIC's own statistics, so that a
//! copy whose TLS-over-TCP connections are ready can move to them.
//!
//! Some networks police UDP to a few Mbit/s: packets beyond the rate are dropped at
//! once, never queued. QUIC's handshake gets through and the copy runs, at the
//! policer's rate. The signature is cheap to see and needs no probe traffic: a large
//! share of the data sender's packets lost while the RTT shows no queue. A slow path
//! drops only once its queue is full, so its losses come with queueing delay (and
//! soku's startup leaves on the delay before heavy loss); random loss on a healthy
//! path stays at a few per cent, which soku's controller rides through. Measured on
//! the project's emulator (100 Mbit/s x 50 ms, UDP policed to 5 Mbit/s): 33-39 % of
//! the sender's packets lost in the first 0.5 s and 21 % over 1.5 s, at an RTT within
//! 0.2-1 % of its minimum; with 3 % random loss on top, the same. Unpoliced, with 5 %
//! random loss, the share stays near 5 %.
//!
//! A copy that joins a queue other flows keep full sees heavy loss too, and its first
//! RTT samples already carry the queue, so its minimum does: eight copies at once over
//! 100 Mbit/s x 20 ms (`tests/e2e/many_e2e.rs`) once gave a latecomer 16 % loss at an RTT
//! of 43.0 ms against a minimum of 37.0. The queue still moves under it, so its RTT
//! wanders 10-35 % above that minimum where a policer's stays within 1 %; over 48
//! copies in three such runs no copy lost more than 13.4 % in a look. The thresholds
//! below keep both figures of that latecomer outside the signature.
//!
//! Whichever side sends the data watches its connection for [`WATCH_FOR`]; on the
//! signature it closes QUIC with [`POLICED`] and the reason, and the client moves the
//! copy to TCP, resuming what QUIC delivered. The client also looks for a shaper's
//! signature (a queue UDP alone waits in, `crate::carrier::shaping`), in either direction: its
//! RTT samples carry the queue both ways, since the server's acks wait in it too.

use std::time::Duration;

use soku_engine::events::PathReport;
use soku_transport::ResumePhase;

use crate::carrier::shaping;
use crate::carrier::udp_block::{self, TcpRoundTrips};

/// QUIC application close code: UDP looks rate-limited, move to TCP.
pub const POLICED: u32 = 3;
/// How long after the start of a connection the watch runs (a policer acts from the
/// first burst; later changes of the path are the controller's to follow).
pub const WATCH_FOR: Duration = Duration::from_secs(10);
/// How often the watch looks.
const LOOK_EVERY: Duration = Duration::from_millis(500);
/// Packets sent before a verdict: fewer say nothing about a share.
const MIN_PACKETS: u64 = 200;
/// Share of sent packets lost that marks a policer (four times the heaviest random
/// loss soku is benchmarked on, 5 %; above the 16 % of a latecomer to a full queue).
const POLICED_LOSS: f64 = 0.20;
/// A share lost at least this many times the path's loss floor is not the path's own.
const FLOOR_SHARE: f64 = 3.0;
/// The share lost that marks a policer while the path's loss floor is not known yet.
const UNKNOWN_FLOOR_LOSS: f64 = 0.30;
/// RTT within this factor of the minimum (plus [`RTT_SLACK`]): no queue at all, as
/// behind a policer, rather than a queue that moves.
const NO_QUEUE_FACTOR: f64 = 1.05;
/// Absolute slack for short paths, where scheduling noise exceeds half the RTT.
const RTT_SLACK: Duration = Duration::from_millis(2);
/// Looks in a row (two seconds) that must show a shaper's signature: a queue that
/// stands, not one round's burst.
const SHAPED_LOOKS: u32 = 4;

/// The reason, if `report` (the data sender's side of a connection) shows a policer.
///
/// Heavy random loss shows the same share with no queue: at 20 % random loss this watch
/// once moved five copies of six to TCP, which ran at 0.4-13 % of the link there. Where
/// soku's controller runs, it tells the two apart, and its word decides:
/// - a policer found by its delivery rate, flat while a quarter and more of what was
///   sent above it was lost, and no loss when sent at that rate (`soku_cc::policer`);
/// - loss the path shows at every rate, its floor (`soku_cc::SokuCc::loss_floor`): a
///   share lost that is not three times the floor is the path's own, not a policer's.
///   Until the floor is known (four rounds of 50 packets; a slow policer's rounds may
///   never hold that many), a share of [`UNKNOWN_FLOOR_LOSS`]: what a policer at a
///   twentieth of the link drops in the first half second (33-41 % on the emulator),
///   and well above what 20 % random loss shows over the 200 packets a look needs.
pub fn looks_policed(report: &PathReport) -> Option<String> {
    let queue_free = report.rtt.as_secs_f64()
        <= report.min_rtt.as_secs_f64() * NO_QUEUE_FACTOR + RTT_SLACK.as_secs_f64();
    if let Some(rate) = report.model.and_then(|m| m.policed_bps).filter(|_| queue_free) {
        return Some(format!(
            "UDP looks rate-limited on this path: QUIC's delivery rate stayed at {:.1} Mbit/s \
             however much more was sent, with no queueing delay, and what was sent above it \
             was lost",
            rate as f64 / 1e6
        ));
    }
    if report.sent_packets < MIN_PACKETS {
        return None;
    }
    let lost = report.lost_packets as f64 / report.sent_packets as f64;
    let beyond_the_path = match report.model.map(|model| model.loss_floor) {
        Some(Some(floor)) => floor < lost / FLOOR_SHARE,
        Some(None) => lost >= UNKNOWN_FLOOR_LOSS,
        None => true,
    };
    (lost >= POLICED_LOSS && queue_free && beyond_the_path).then(|| {
        format!(
            "UDP looks rate-limited on this path: {:.0} % of {} QUIC packets lost with no \
             queueing delay (rtt {:.1} ms, min {:.1} ms)",
            lost * 100.0,
            report.sent_packets,
            report.rtt.as_secs_f64() * 1e3,
            report.min_rtt.as_secs_f64() * 1e3
        )
    })
}

/// Watches `conn` for [`WATCH_FOR`]; on a policer's signature closes it with
/// [`POLICED`] and returns the reason.
///
/// Packets sent under a careful-resume jump (`soku_cc::resume`) do not count while it is
/// out, nor after a retreat from a queue: a jump a slower path could not carry loses
/// much of itself in one round trip, with the queue already drained when the watch
/// looks, which is a policer's signature without one. Counting starts over once the
/// jump is judged, and, after such a retreat, once every packet sent before it is
/// acknowledged or declared lost (`soku_cc::resume::CarefulResume::retreat_settled`).
/// A jump that retreated without meeting a queue lost its packets as a policer drops
/// them: then they all count.
pub async fn watch(conn: quinn::Connection) -> Option<String> {
    watch_beside_tcp(conn, None).await
}

/// [`watch`], and on the client's side with round trips over TCP (`tcp`): for UDP
/// blocked under the copy (`crate::carrier::udp_block`), until the connection closes; when they
/// are ssh's pings (`crate::carrier::shaping`), also for a shaper's signature, QUIC in a queue
/// that ssh does not see, in [`SHAPED_LOOKS`] looks in a row.
pub async fn watch_beside_tcp(
    conn: quinn::Connection,
    tcp: Option<TcpRoundTrips>,
) -> Option<String> {
    let pings = tcp.as_ref().and_then(TcpRoundTrips::ssh_pings);
    let started = tokio::time::Instant::now();
    let mut baseline = (0, 0);
    let mut retreat_settled = false;
    let mut shaped_looks = 0;
    let mut silence = udp_block::Silence::new(&conn);
    while started.elapsed() < WATCH_FOR {
        tokio::time::sleep(LOOK_EVERY).await;
        if conn.close_reason().is_some() {
            return None;
        }
        let mut report = PathReport::from_connection(&conn);
        let now = tokio::time::Instant::now();
        if let Some(why) = tcp.as_ref().and_then(|tcp| silence.look(&conn, tcp)) {
            soku_transport::close(&conn, POLICED, why.as_bytes());
            return Some(why);
        }
        let settling = match report.model {
            Some(m) if matches!(m.resume, ResumePhase::Unvalidated | ResumePhase::Validating) => {
                true
            }
            Some(m) if m.resume == ResumePhase::SafeRetreat && !m.resume_lost_without_queue => {
                // The jump's packets are declared lost up to a few round trips of the
                // queue it built after the retreat; counting starts over at the first
                // look that finds them all counted, and judges from the look after. A
                // time allowance is not enough: four round trips at the retreat's RTT
                // once let 876 of them be counted after it, on a machine busy with
                // parallel builds.
                let settled_before =
                    std::mem::replace(&mut retreat_settled, m.resume_retreat_settled);
                !(settled_before && retreat_settled)
            }
            Some(m) if m.resume == ResumePhase::SafeRetreat => {
                // A jump lost at a full rate with no queue before the loss: a policer's
                // losses, which count from the connection's start. After the retreat
                // the controller runs at the policer's rate and loses too little for
                // the signature (6-7 % of the packets on the emulator, 100 Mbit/s x
                // 50 ms policed to 5 Mbit/s), so the jump is the evidence.
                baseline = (0, 0);
                false
            }
            _ => false,
        };
        if settling {
            baseline = (report.sent_packets, report.lost_packets);
            shaped_looks = 0;
            continue;
        }
        // QUIC's RTT stands still while it hears nothing (UDP cut under the copy): a
        // standing figure beside ssh's fresh ones is no queue.
        let hearing = silence.silent_for(now) < LOOK_EVERY;
        let shaped = pings
            .filter(|_| hearing)
            .and_then(|pings| pings.rtt(now))
            .and_then(|ssh| shaping::looks_shaped(&report, ssh));
        shaped_looks = if shaped.is_some() { shaped_looks + 1 } else { 0 };
        if let Some(why) = shaped.filter(|_| shaped_looks >= SHAPED_LOOKS) {
            soku_transport::close(&conn, POLICED, why.as_bytes());
            return Some(why);
        }
        report.sent_packets -= baseline.0.min(report.sent_packets);
        report.lost_packets -= baseline.1.min(report.lost_packets);
        if let Some(why) = looks_policed(&report) {
            soku_transport::close(&conn, POLICED, why.as_bytes());
            return Some(why);
        }
    }
    // From then on, with the round trips over TCP: UDP blocked under the copy.
    let why = udp_block::watch(&conn, tcp.as_ref()?, silence).await?;
    soku_transport::close(&conn, POLICED, why.as_bytes());
    Some(why)
}

/// The verdict of a [`watch`] task once the copy it watched has failed: the task may
/// still be returning it (it ends within one look once QUIC is closed), so it gets a
/// moment; a watch still looking at a live connection is stopped.
pub async fn verdict(mut watch: tokio::task::JoinHandle<Option<String>>) -> Option<String> {
    let done = tokio::time::timeout(2 * LOOK_EVERY, &mut watch).await;
    watch.abort();
    done.ok()?.ok().flatten()
}

/// The reason the peer closed `conn` for a policer, if it did.
pub fn policed_by_peer(conn: &quinn::Connection) -> Option<String> {
    let quinn::ConnectionError::ApplicationClosed(close) = conn.close_reason()? else {
        return None;
    };
    (close.error_code == quinn::VarInt::from_u32(POLICED))
        .then(|| String::from_utf8_lossy(&close.reason).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(sent: u64, lost: u64, rtt_ms: f64, min_ms: f64) -> PathReport {
        PathReport {
            rtt: Duration::from_secs_f64(rtt_ms / 1e3),
            min_rtt: Duration::from_secs_f64(min_ms / 1e3),
            mtu: 1472,
            sent_packets: sent,
            lost_packets: lost,
            congestion_events: 0,
            cwnd: 0,
            flow_blocked: 0,
            model: None,
        }
    }

    /// Figures seen on the emulator (see the module docs) and their neighbours.
    #[test]
    fn a_policer_is_told_from_random_loss_and_from_a_full_queue() {
        // UDP policed to 5 Mbit/s at 100 Mbit/s x 50 ms: 0.5 s and 1.5 s in.
        assert!(looks_policed(&report(381, 135, 50.5, 50.3)).is_some());
        assert!(looks_policed(&report(843, 182, 50.8, 50.3)).is_some());
        // 5 % random loss, no queue: the controller's business.
        assert_eq!(looks_policed(&report(20_000, 1_000, 50.6, 50.3)), None);
        // Heavy loss behind a full queue (RTT doubled): a slow path, not a policer.
        assert_eq!(looks_policed(&report(2_000, 400, 101.0, 50.3)), None);
        // A latecomer to a queue that seven other copies keep full (seen in
        // `tests/e2e/many_e2e.rs`): its minimum carries the queue, but its RTT moves.
        assert_eq!(looks_policed(&report(246, 39, 43.0, 37.0)), None);
        // A policer on a 300 ms path with a few ms of jitter is still a policer.
        assert!(looks_policed(&report(600, 200, 309.0, 300.0)).is_some());
        // Too few packets to judge a share.
        assert_eq!(looks_policed(&report(40, 20, 50.3, 50.3)), None);
        // The reason carries the figures.
        let why = looks_policed(&report(381, 135, 50.5, 50.3)).unwrap();
        assert!(why.contains("35 % of 381 QUIC packets lost"), "{why}");
    }

    fn with_model(mut r: PathReport, floor: Option<f64>, policed_bps: Option<u64>) -> PathReport {
        r.model = Some(soku_transport::PathModel {
            bandwidth_bps: 50_000_000,
            min_rtt: r.min_rtt,
            phase: soku_transport::CcPhase::ProbeBw,
            resume: ResumePhase::Normal,
            resume_jump: 0,
            resume_lost_without_queue: false,
            resume_retreat_settled: false,
            background: false,
            rounds: 100,
            app_limited_rounds: 0,
            loss_floor: floor,
            policed_bps,
            queue: Default::default(),
        });
        r
    }

    /// With soku's controller the floor and its policer verdict decide: 20 % random
    /// loss with no queue is the path's (seen on the emulator at 100 Mbit/s x 100 ms:
    /// a floor of 17.4-18.9 %), a policer's share beyond a low floor is not.
    #[test]
    fn the_controller_tells_heavy_random_loss_from_a_policer() {
        let random = report(20_000, 4_000, 100.4, 100.2);
        assert_eq!(looks_policed(&with_model(random.clone(), Some(0.18), None)), None);
        assert_eq!(looks_policed(&with_model(random, None, None)), None, "floor not known yet");
        // A slow policer's first look, its floor not known (rounds of 20 packets).
        assert!(looks_policed(&with_model(report(396, 163, 50.7, 50.5), None, None)).is_some());
        assert_eq!(looks_policed(&with_model(report(606, 150, 50.7, 50.5), None, None)), None);
        let policed = report(843, 300, 50.8, 50.3);
        assert!(looks_policed(&with_model(policed.clone(), Some(0.02), None)).is_some());
        assert_eq!(looks_policed(&with_model(policed, Some(0.2), None)), None);
        // The controller found the policer: its word, with the rate, even after the
        // flow, held to that rate, lost little.
        let held = report(5_000, 400, 50.4, 50.3);
        let why = looks_policed(&with_model(held.clone(), None, Some(4_990_000))).unwrap();
        assert!(why.contains("4.99 Mbit/s") || why.contains("5.0 Mbit/s"), "{why}");
        // Not with a queue: a slow path's, whatever the controller holds to.
        let queued = report(5_000, 400, 90.0, 50.3);
        assert_eq!(looks_policed(&with_model(queued, None, Some(4_990_000))), None);
    }
}
