//! The verdict: from what was measured on a path ([`PathFacts`]) to what limits a copy
//! there and what to do about it, in plain words. A pure function, so the same verdict
//! can be shown by `soku diagnose` and by a copy's report, and tested on made-up facts.
//!
//! The copy judged is an upload (this host's file system to the remote's), the one
//! whose both ends diagnose measures; the download direction's rate, loss and buffers
//! are judged too, as findings that are not the limit.

use serde::Serialize;

use super::facts::{Direction, LossPattern, PathFacts, Side};
use super::units::{bytes, bytes_rate, rate};

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// UDP does not get through; soku uses TLS over TCP.
    UdpBlocked,
    /// Neither UDP nor TCP gets through; soku uses the ssh channel.
    NoDirectPath,
    /// The path's bottleneck rate.
    Link,
    /// Loss while the RTT stays near its minimum.
    RandomLoss,
    /// Loss when a queue fills.
    QueueLoss,
    /// A host's UDP receive buffer.
    RecvBuffer,
    /// A host's UDP send buffer.
    SendBuffer,
    /// The remote file system's write speed.
    RemoteDisk,
    /// The local file system's read speed.
    LocalDisk,
    /// Encryption speed on one core.
    Cipher,
    /// Packets that arrive out of order.
    Reordering,
}

/// One thing the verdict says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// What it is about.
    pub kind: Kind,
    /// Whether this is what limits an upload on this path (one finding at most).
    pub limit: bool,
    /// The sentence for a person: the fact, and what to do.
    pub text: String,
}

/// The whole verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// What limits an upload on this path, if anything was measured.
    pub limit: Option<Kind>,
    /// The rate soku should reach on an upload, bits per second.
    pub soku_bps: Option<u64>,
    /// The rate scp would reach, bits per second (see [`scp_estimate`]).
    pub scp_bps: Option<u64>,
    /// Everything worth saying, the limit first.
    pub findings: Vec<Finding>,
}

/// OpenSSH's channel window (`CHAN_SES_WINDOW_DEFAULT`, 2 MiB): scp has at most this
/// much unacknowledged per round trip, whatever TCP could carry (docs/bench.md).
pub const SCP_WINDOW: u64 = 2 << 20;
/// TCP's segment payload on a 1500-byte path, for the loss bound in [`scp_estimate`].
const TCP_MSS: f64 = 1448.0;
/// Least loss worth a finding: 0.2 % of packets (fewer is within what a controller's
/// own probing costs).
const LOSS_WORTH_SAYING: f64 = 0.002;
/// Least reordering worth a finding: 1 % of the probe's tags.
const REORDERING_WORTH_SAYING: f64 = 0.01;
/// Fewest receive-buffer drops that say the buffer overflowed (a few may be one
/// scheduling hiccup), and the least share of the probe's packets.
const OVERFLOW_DROPS: u64 = 10;
const OVERFLOW_SHARE: f64 = 0.001;

/// The verdict on `facts`.
pub fn verdict(facts: &PathFacts) -> Verdict {
    let rtt = rtt_secs(facts);
    let needed = buffer_needed(facts, rtt);
    let remote_name = facts.remote.as_ref().map_or_else(|| facts.host.clone(), |r| r.name.clone());
    let mut limits: Vec<(Kind, u64, String)> = Vec::new();
    let mut notes: Vec<Finding> = Vec::new();

    // The path itself, or the buffer that held the probe back.
    match (&facts.upload, facts.udp) {
        (_, false) => {}
        (Some(up), true) if up.rate_bps > 0 => {
            let overflowed = facts.remote.as_ref().filter(|r| overflow(up, r, needed));
            match overflowed {
                Some(remote) => limits.push((
                    Kind::RecvBuffer,
                    up.rate_bps,
                    recv_buffer_text(remote, needed, up.received.rcvbuf_errors, up.rate_bps),
                )),
                None => limits.push((Kind::Link, up.rate_bps, link_text(facts, &remote_name))),
            }
        }
        _ => {}
    }
    if let Some(disk) = facts.remote.as_ref().and_then(|r| r.facts.disk.as_ref()) {
        if disk.error.is_none() && disk.bytes_per_sec > 0 {
            let text = format!(
                "the remote disk ({} on {remote_name}) writes at {}: it is the limit; \
                 copy to a faster file system there, or use --no-fsync if a power cut \
                 losing the last files is acceptable",
                disk.path,
                bytes_rate(disk.bytes_per_sec)
            );
            limits.push((Kind::RemoteDisk, disk.bytes_per_sec.saturating_mul(8), text));
        } else if let Some(error) = &disk.error {
            notes.push(note(
                Kind::RemoteDisk,
                format!("could not test the remote disk at {}: {error}", disk.path),
            ));
        }
    }
    if let Some(disk) = &facts.local.facts.disk {
        if disk.error.is_none() && disk.bytes_per_sec > 0 {
            let text = format!(
                "the local disk ({}) reads at {}: it is the limit",
                disk.path,
                bytes_rate(disk.bytes_per_sec)
            );
            limits.push((Kind::LocalDisk, disk.bytes_per_sec.saturating_mul(8), text));
        }
    }
    let sides = std::iter::once(&facts.local).chain(facts.remote.as_ref());
    if let Some(slow) =
        sides.filter(|s| s.facts.aes_gcm_bps > 0).min_by_key(|s| s.facts.aes_gcm_bps)
    {
        let text = format!(
            "encryption is the limit: AES-GCM seals at {} on one core of {} ({} cores); \
             a faster CPU, or chacha20-poly1305 with -c if it is faster there ({})",
            bytes_rate(slow.facts.aes_gcm_bps),
            slow.name,
            slow.facts.cores,
            bytes_rate(slow.facts.chacha_bps),
        );
        limits.push((Kind::Cipher, slow.facts.aes_gcm_bps.saturating_mul(8), text));
    }

    let mut findings = Vec::new();
    let mut limit = None;
    let mut soku_bps = None;
    if !facts.udp {
        let (kind, text) = if facts.tcp == Some(false) {
            (
                Kind::NoDirectPath,
                "neither UDP nor TCP reaches soku's ports on the remote host: soku will carry \
                 the data over the ssh channel, at about scp's speed; open a UDP port range \
                 in the firewall and pass it with --remote-ports"
                    .to_string(),
            )
        } else {
            (
                Kind::UdpBlocked,
                "UDP is blocked (no QUIC handshake): soku will use TLS over TCP, where the \
                 kernel's congestion control, not soku's, sets the rate; open UDP for soku's \
                 ports (--remote-ports) to get QUIC"
                    .to_string(),
            )
        };
        findings.push(Finding { kind, limit: true, text });
        limit = Some(kind);
        // Without QUIC nothing probed the link's rate: no estimate beats a wrong one.
    } else if let Some((kind, bps, text)) = limits.iter().min_by_key(|(_, bps, _)| *bps).cloned() {
        findings.push(Finding { kind, limit: true, text });
        limit = Some(kind);
        soku_bps = Some(bps);
    }

    // Loss, in both directions.
    for (dir, name, receiver) in [
        (&facts.upload, format!("this host → {remote_name}"), facts.remote.as_ref()),
        (&facts.download, format!("{remote_name} → this host"), Some(&facts.local)),
    ] {
        let Some(d) = dir else { continue };
        let reordered = d.reordering.filter(|&r| r >= REORDERING_WORTH_SAYING);
        // QUIC declares a packet overtaken by three others lost: on a reordering path
        // its loss count holds packets that arrived late, which the tags tell apart.
        let late_not_lost = reordered.is_some() && d.tag_loss.is_some_and(|t| t < d.loss / 2.0);
        if !late_not_lost {
            if let Some(finding) = loss_finding(d, &name, receiver, rtt) {
                findings.push(finding);
            }
        }
        if let Some(share) = reordered {
            let mut text = reordering_text(&name, share);
            if late_not_lost {
                text += &format!(
                    " (QUIC counted {:.1} % of packets lost, but only {:.1} % went missing: \
                     the rest came late)",
                    d.loss * 100.0,
                    d.tag_loss.unwrap_or(0.0) * 100.0
                );
            }
            notes.push(note(Kind::Reordering, text));
        }
    }
    // Buffers that are too small for the path, or overflowed on the download.
    if let (Some(down), true) = (&facts.download, facts.udp) {
        if overflow(down, &facts.local, needed) {
            let text =
                recv_buffer_text(&facts.local, needed, down.received.rcvbuf_errors, down.rate_bps);
            notes.push(note(Kind::RecvBuffer, format!("{text} (downloads)")));
        }
    }
    for side in std::iter::once(&facts.local).chain(facts.remote.as_ref()) {
        let already = findings
            .iter()
            .chain(&notes)
            .any(|f| f.kind == Kind::RecvBuffer && f.text.contains(&side.name));
        if !already && side.facts.udp_recv_buffer > 0 && side.facts.udp_recv_buffer < needed {
            notes.push(note(
                Kind::RecvBuffer,
                small_buffer_text(
                    side,
                    "receive",
                    "rmem_max",
                    side.facts.udp_recv_buffer,
                    side.facts.rmem_max,
                    needed,
                ),
            ));
        }
        if side.facts.udp_send_buffer > 0 && side.facts.udp_send_buffer < needed {
            notes.push(note(
                Kind::SendBuffer,
                small_buffer_text(
                    side,
                    "send",
                    "wmem_max",
                    side.facts.udp_send_buffer,
                    side.facts.wmem_max,
                    needed,
                ),
            ));
        }
    }
    findings.extend(notes);
    Verdict { limit, soku_bps, scp_bps: scp_estimate(facts, rtt), findings }
}

/// Reordering, and what it costs: a loss detector that calls a packet lost once three
/// later ones arrive (TCP's fast retransmit, RFC 5681 §3.2; QUIC's packet threshold, RFC
/// 9002 §6.1.1) takes a packet overtaken by three others for a loss.
fn reordering_text(name: &str, share: f64) -> String {
    format!(
        "{name}: {:.1} % of packets arrive out of order; loss detection counting three \
         later packets (TCP's and QUIC's) may take them for losses and slow down; \
         multipath links and some load balancers do this",
        share * 100.0
    )
}

/// What scp would reach: at most its 2 MiB window per round trip, its cipher's speed
/// on the slower host (OpenSSH's default is chacha20-poly1305; ring's speed stands in
/// for OpenSSL's), the link, both disks, and with random loss, TCP's loss bound:
/// rate <= MSS / RTT x 1.22 / sqrt(p) (Mathis, Semke, Mahdavi and Ott, "The
/// Macroscopic Behavior of the TCP Congestion Avoidance Algorithm", CCR 1997).
pub fn scp_estimate(facts: &PathFacts, rtt: Option<f64>) -> Option<u64> {
    let rtt = rtt?;
    // Without the link's rate (UDP blocked: nothing probed it) any figure is a guess.
    facts.upload.as_ref()?;
    let mut bounds = vec![(SCP_WINDOW * 8) as f64 / rtt];
    let sides = std::iter::once(&facts.local).chain(facts.remote.as_ref());
    if let Some(cipher) = sides.map(|s| s.facts.chacha_bps).filter(|&b| b > 0).min() {
        bounds.push(cipher as f64 * 8.0);
    }
    if let Some(up) = &facts.upload {
        if up.rate_bps > 0 {
            bounds.push(up.rate_bps as f64);
        }
        if up.loss_pattern == LossPattern::Random && up.random_loss > 0.0 {
            bounds.push(TCP_MSS * 8.0 / rtt * 1.22 / up.random_loss.sqrt());
        }
    }
    let disks = [
        facts.remote.as_ref().and_then(|r| r.facts.disk.as_ref()),
        facts.local.facts.disk.as_ref(),
    ];
    for disk in disks.into_iter().flatten().filter(|d| d.bytes_per_sec > 0) {
        bounds.push(disk.bytes_per_sec as f64 * 8.0);
    }
    bounds.into_iter().reduce(f64::min).map(|b| b as u64)
}

/// The round trip, seconds: QUIC's if measured, else ssh's.
fn rtt_secs(facts: &PathFacts) -> Option<f64> {
    facts.quic_rtt_ms.or(facts.ssh_rtt_ms).filter(|&ms| ms > 0.0).map(|ms| ms / 1000.0)
}

/// The UDP buffer a host needs on this path, as the kernel reports sizes (twice the
/// usable bytes, see `soku-transport/src/socket.rs`): one bandwidth-delay product at
/// the faster direction's rate (a window's burst arriving while the receiver is busy),
/// at least the 2 MiB below which soku already warns, at most the 32 MiB it asks for.
pub fn buffer_needed(facts: &PathFacts, rtt: Option<f64>) -> u64 {
    let rate = [&facts.upload, &facts.download]
        .iter()
        .filter_map(|d| d.as_ref())
        .map(|d| d.rate_bps)
        .max()
        .unwrap_or(0);
    let bdp = rtt.map_or(0.0, |rtt| rate as f64 / 8.0 * rtt) as u64;
    let floor = soku_transport::WARN_BELOW as u64;
    let ceiling = soku_transport::REQUESTED_BUFFER as u64;
    bdp.checked_next_power_of_two().unwrap_or(u64::MAX).clamp(floor, ceiling)
}

/// Whether `receiver`'s UDP receive buffer overflowed in this direction's probe while
/// it is smaller than the path needs.
fn overflow(dir: &Direction, receiver: &Side, needed: u64) -> bool {
    let drops = dir.received.rcvbuf_errors.unwrap_or(0);
    let share = if dir.sent.packets == 0 { 0.0 } else { drops as f64 / dir.sent.packets as f64 };
    drops >= OVERFLOW_DROPS && share >= OVERFLOW_SHARE && receiver.facts.udp_recv_buffer < needed
}

/// The most a probe can carry: the connection's flow-control window per round trip
/// (`soku-transport/src/config.rs`; its streams together fill it, as a copy's chunks
/// do), bits per second.
pub fn probe_ceiling(rtt: Option<f64>) -> Option<u64> {
    rtt.map(|rtt| (f64::from(soku_transport::RECEIVE_WINDOW) * 8.0 / rtt) as u64)
}

fn link_text(facts: &PathFacts, remote: &str) -> String {
    let down = facts
        .download
        .as_ref()
        .map(|d| format!(", {} {remote} → this host", rate(d.rate_bps)))
        .unwrap_or_default();
    let up = facts.upload.as_ref().map_or(0, |u| u.rate_bps);
    let mut text = format!("the link is the limit: {} this host → {remote}{down}", rate(up));
    // A rate at the probe's own ceiling says only that the link carries at least that.
    if let Some(ceiling) = probe_ceiling(rtt_secs(facts)).filter(|&c| up as f64 >= 0.9 * c as f64) {
        let _ = std::fmt::Write::write_fmt(
            &mut text,
            format_args!(
                " (or more: soku's flow-control window carries at most {} at this RTT)",
                rate(ceiling)
            ),
        );
    }
    text
}

fn recv_buffer_text(side: &Side, needed: u64, drops: Option<u64>, at: u64) -> String {
    let cap = side
        .facts
        .rmem_max
        .map(|c| format!(" (net.core.rmem_max {})", bytes(c)))
        .unwrap_or_default();
    format!(
        "the UDP receive buffer on {} is the limit: soku's socket got {}{cap}, the path \
         needs {}, and the kernel dropped {} datagrams for a full buffer at {}: raise it \
         on {} with `sysctl -w net.core.rmem_max={}` (and in /etc/sysctl.d/ to keep it)",
        side.name,
        bytes(side.facts.udp_recv_buffer),
        bytes(needed),
        drops.unwrap_or(0),
        rate(at),
        side.name,
        needed
    )
}

fn small_buffer_text(
    side: &Side,
    which: &str,
    sysctl: &str,
    got: u64,
    cap: Option<u64>,
    needed: u64,
) -> String {
    let cap = cap.map(|c| format!(" (net.core.{sysctl} {})", bytes(c))).unwrap_or_default();
    format!(
        "the UDP {which} buffer on {} is {}{cap}, the path needs {}: raise it with \
         `sysctl -w net.core.{sysctl}={needed}`",
        side.name,
        bytes(got),
        bytes(needed)
    )
}

fn loss_finding(
    dir: &Direction,
    name: &str,
    receiver: Option<&Side>,
    rtt: Option<f64>,
) -> Option<Finding> {
    if dir.loss < LOSS_WORTH_SAYING {
        return None;
    }
    // The overall figure as the direction's line shows it (`show.rs`: two decimals),
    // so that one thing has one figure.
    let pct = dir.loss * 100.0;
    // A full receive buffer is a queue too, on the receiving host: its drops are told
    // apart from the path's loss, never as part of a loss where no queue overflows.
    let at_buffer = match (dir.received.rcvbuf_errors, receiver) {
        (Some(drops), Some(side)) if drops > 0 => format!(
            "; {drops} packets were dropped by the full UDP receive buffer on {}, a queue \
             on that host, not in the path",
            side.name
        ),
        _ => String::new(),
    };
    match dir.loss_pattern {
        LossPattern::Random => {
            let random = dir.random_loss;
            let tcp = rtt
                .map(|rtt| {
                    format!(
                        " (TCP's loss bound here: {})",
                        rate((TCP_MSS * 8.0 / rtt * 1.22 / random.sqrt()) as u64)
                    )
                })
                .unwrap_or_default();
            Some(note(
                Kind::RandomLoss,
                format!(
                    "loss {pct:.2} % {name}, {:.2} % while the RTT stays low: random loss, \
                     not a queue in the path overflowing{at_buffer}; soku holds its rate, scp \
                     will not{tcp}",
                    random * 100.0
                ),
            ))
        }
        LossPattern::Queue => Some(note(
            Kind::QueueLoss,
            format!(
                "loss {pct:.2} % {name} follows queueing: the RTT rises toward the losses, \
                 the bottleneck's queue overflows as the link fills (the link's capacity, \
                 not damage){at_buffer}"
            ),
        )),
        LossPattern::Unclear => None,
    }
}

fn note(kind: Kind, text: String) -> Finding {
    Finding { kind, limit: false, text }
}

#[cfg(test)]
mod tests {
    use soku_proto::diagnose::{DiskSpeed, HostFacts, Received, Sent};

    use super::*;

    const MBIT: u64 = 1_000_000;

    fn side(name: &str, disk_bps: u64) -> Side {
        Side {
            name: name.into(),
            facts: HostFacts {
                cores: 2,
                rmem_max: Some(32 << 20),
                wmem_max: Some(32 << 20),
                udp_recv_buffer: 64 << 20,
                udp_send_buffer: 64 << 20,
                aes_gcm_bps: 2_000_000_000,
                chacha_bps: 1_000_000_000,
                disk: Some(DiskSpeed {
                    path: "/d".into(),
                    bytes_per_sec: disk_bps,
                    bytes: 1,
                    error: None,
                }),
            },
        }
    }

    /// A probe's direction (RTT 50-100 ms, packets split evenly between the halves of
    /// the range); `high_share`: the share of its losses in the upper half.
    fn direction(rate_bps: u64, packets: u64, lost: u64, high_share: f64, drops: u64) -> Direction {
        let lost_high = (lost as f64 * high_share) as u64;
        let sent = Sent {
            packets,
            lost,
            idle_rtt_us: 50_000,
            min_rtt_us: 50_000,
            mean_rtt_us: 60_000,
            loss_rtt_us: 60_000,
            max_rtt_us: 100_000,
            packets_low: packets / 2,
            lost_low: lost - lost_high,
            packets_high: packets / 2,
            lost_high,
            mtu: 1452,
            tags: 2_500,
        };
        let received = Received {
            bytes: 1,
            steady_bps: rate_bps,
            rcvbuf_errors: Some(drops),
            tags: 2_500,
            reordered: 0,
        };
        Direction::new(sent, received)
    }

    /// A clean 100 Mbit/s x 50 ms path with fast disks and CPUs.
    fn clean() -> PathFacts {
        PathFacts {
            host: "far".into(),
            transport: "QUIC".into(),
            ssh_rtt_ms: Some(51.0),
            quic_rtt_ms: Some(50.0),
            mtu: Some(1452),
            udp: true,
            tcp: Some(true),
            upload: Some(direction(95 * MBIT, 40_000, 0, 0.0, 0)),
            download: Some(direction(95 * MBIT, 40_000, 0, 0.0, 0)),
            local: side("this host", 500_000_000),
            remote: Some(side("far", 500_000_000)),
        }
    }

    fn the_limit(v: &Verdict) -> &Finding {
        let limits: Vec<_> = v.findings.iter().filter(|f| f.limit).collect();
        assert_eq!(limits.len(), 1, "{v:#?}");
        assert!(v.findings[0].limit, "the limit comes first");
        limits[0]
    }

    #[test]
    fn a_slow_link_is_the_limit() {
        let mut facts = clean();
        facts.upload = Some(direction(19 * MBIT, 8_000, 0, 0.0, 0));
        let v = verdict(&facts);
        assert_eq!(v.limit, Some(Kind::Link));
        assert!(the_limit(&v).text.contains("the link is the limit: 19.0 Mbit/s"), "{v:#?}");
        assert_eq!(v.soku_bps, Some(19 * MBIT));
        assert!(v.findings.iter().all(|f| f.kind != Kind::RandomLoss));
    }

    #[test]
    fn random_loss_is_named_and_scp_suffers_from_it() {
        let mut facts = clean();
        facts.upload = Some(direction(90 * MBIT, 40_000, 400, 0.5, 0));
        let v = verdict(&facts);
        assert_eq!(v.limit, Some(Kind::Link));
        let loss = v.findings.iter().find(|f| f.kind == Kind::RandomLoss).expect("loss finding");
        assert!(loss.text.starts_with("loss 1.00 % "), "{}", loss.text);
        assert!(loss.text.contains(", 1.00 % while the RTT stays low: random loss"));
        assert!(loss.text.contains("soku holds its rate, scp will not"));
        // Mathis: 1448 B x 8 / 50 ms x 1.22 / 0.1 = 2.8 Mbit/s.
        let scp = v.scp_bps.expect("scp estimate");
        assert!((2_700_000..2_900_000).contains(&scp), "{scp}");
    }

    /// Catches: the loss told as two figures of different precision (`0.60 %` on the
    /// direction's line, `random loss 0.1 %` in the finding), and receive-buffer drops
    /// told inside a sentence that says no queue overflows.
    #[test]
    fn a_loss_has_one_figure_and_buffer_drops_are_a_queue_of_their_own() {
        let mut facts = clean();
        // 0.60 % lost overall, most of it in the upper half of the RTT range.
        facts.upload = Some(direction(90 * MBIT, 100_000, 600, 0.5, 40));
        let v = verdict(&facts);
        let loss = v
            .findings
            .iter()
            .find(|f| matches!(f.kind, Kind::RandomLoss | Kind::QueueLoss))
            .expect("loss finding");
        assert!(loss.text.starts_with("loss 0.60 % "), "{}", loss.text);
        assert!(!loss.text.contains("0.6 %") && !loss.text.contains("0.1 %"), "{}", loss.text);
        assert!(!loss.text.contains("where no queue overflows"), "{}", loss.text);
        assert!(
            loss.text.contains("40 packets were dropped by the full UDP receive buffer on")
                && loss.text.contains("a queue on that host, not in the path"),
            "{}",
            loss.text
        );
    }

    /// As measured on the emulator with 3 % of packets held back 3 ms at 100 Mbit/s x
    /// 20 ms: QUIC declared 3.3 % lost, the tags said 3.0 % reordered and 0.1 % missing.
    #[test]
    fn reordering_is_not_called_loss_when_the_tags_arrived() {
        let mut facts = clean();
        let mut up = direction(93 * MBIT, 40_000, 1_320, 0.5, 0);
        (up.reordering, up.tag_loss) = (Some(0.03), Some(0.001));
        facts.upload = Some(up.clone());
        let v = verdict(&facts);
        assert_eq!(v.limit, Some(Kind::Link));
        assert!(v.findings.iter().all(|f| f.kind != Kind::RandomLoss), "{v:#?}");
        let r = v.findings.iter().find(|f| f.kind == Kind::Reordering).expect("reordering");
        assert!(r.text.starts_with("this host → far: 3.0 % of packets arrive out of order"));
        assert!(
            r.text.contains("QUIC counted 3.3 % of packets lost, but only 0.1 %"),
            "{}",
            r.text
        );
        // Where the tags went missing too, the loss is real and said as well.
        up.tag_loss = Some(0.03);
        facts.upload = Some(up);
        let v = verdict(&facts);
        assert!(v.findings.iter().any(|f| f.kind == Kind::RandomLoss), "{v:#?}");
        let r = v.findings.iter().find(|f| f.kind == Kind::Reordering).expect("reordering");
        assert!(!r.text.contains("came late"), "{}", r.text);
        // Little reordering is not worth a word.
        let mut facts = clean();
        facts.upload.as_mut().expect("upload").reordering = Some(0.002);
        assert!(verdict(&facts).findings.iter().all(|f| f.kind != Kind::Reordering));
    }

    #[test]
    fn loss_at_a_full_queue_is_not_called_random() {
        let mut facts = clean();
        facts.upload = Some(direction(20 * MBIT, 10_000, 50, 0.96, 0));
        let v = verdict(&facts);
        assert!(v.findings.iter().any(|f| f.kind == Kind::QueueLoss));
        assert!(v.findings.iter().all(|f| f.kind != Kind::RandomLoss));
        let mut few = clean();
        few.upload = Some(direction(20 * MBIT, 10_000, 3, 0.0, 0));
        assert!(verdict(&few).findings.iter().all(|f| f.kind != Kind::RandomLoss));
    }

    #[test]
    fn an_overflowing_receive_buffer_is_the_limit_with_the_command() {
        let mut facts = clean();
        facts.upload = Some(direction(30 * MBIT, 20_000, 600, 0.5, 580));
        let remote = facts.remote.as_mut().expect("remote");
        remote.facts.rmem_max = Some(64 << 10);
        remote.facts.udp_recv_buffer = 128 << 10;
        let v = verdict(&facts);
        assert_eq!(v.limit, Some(Kind::RecvBuffer));
        let text = &the_limit(&v).text;
        assert!(
            text.contains("on far") && text.contains("sysctl -w net.core.rmem_max=2097152"),
            "{text}"
        );
        // The same small buffer without drops is a warning, not the limit.
        let mut quiet = facts.clone();
        quiet.upload = Some(direction(95 * MBIT, 40_000, 0, 0.0, 0));
        let v = verdict(&quiet);
        assert_eq!(v.limit, Some(Kind::Link));
        assert!(v.findings.iter().any(|f| f.kind == Kind::RecvBuffer && !f.limit));
    }

    #[test]
    fn a_slow_remote_disk_is_the_limit() {
        let mut facts = clean();
        facts.remote = Some(side("far", 5_000_000));
        let v = verdict(&facts);
        assert_eq!(v.limit, Some(Kind::RemoteDisk));
        assert!(the_limit(&v).text.contains("writes at 5.0 MB/s"), "{v:#?}");
        assert_eq!(v.soku_bps, Some(40 * MBIT));
    }

    #[test]
    fn blocked_udp_says_soku_uses_tcp() {
        let mut facts = clean();
        facts.udp = false;
        facts.upload = None;
        facts.download = None;
        facts.quic_rtt_ms = None;
        let v = verdict(&facts);
        assert_eq!(v.limit, Some(Kind::UdpBlocked));
        assert_eq!((v.soku_bps, v.scp_bps), (None, None), "the link was not probed");
        assert!(
            the_limit(&v).text.contains("UDP is blocked") && the_limit(&v).text.contains("TCP")
        );
        facts.tcp = Some(false);
        assert_eq!(verdict(&facts).limit, Some(Kind::NoDirectPath));
    }

    #[test]
    fn a_rate_at_the_probes_ceiling_is_a_lower_bound() {
        let mut facts = clean();
        facts.quic_rtt_ms = Some(100.0);
        // Disks at 8 Gbit/s: the link is the limit.
        facts.local = side("this host", 1_000_000_000);
        facts.remote = Some(side("far", 1_000_000_000));
        // 64 MiB per 100 ms: 5.4 Gbit/s.
        facts.upload = Some(direction(5_300 * MBIT, 40_000, 0, 0.0, 0));
        let link =
            |v: &Verdict| v.findings.iter().find(|f| f.kind == Kind::Link).map(|f| f.text.clone());
        let v = verdict(&facts);
        let text = link(&v).expect("a link finding");
        assert!(text.contains("or more: soku's flow-control window"), "{v:#?}");
        facts.upload = Some(direction(660 * MBIT, 40_000, 0, 0.0, 0));
        assert!(!link(&verdict(&facts)).expect("a link finding").contains("or more"));
        assert!(!verdict(&clean()).findings[0].text.contains("or more"));
    }

    #[test]
    fn scp_is_held_to_its_window_on_a_long_path() {
        let mut facts = clean();
        facts.quic_rtt_ms = Some(100.0);
        // 2 MiB x 8 / 0.1 s = 167.8 Mbit/s, above this path's 95: the link bounds it.
        assert_eq!(verdict(&facts).scp_bps, Some(95 * MBIT));
        facts.upload = Some(direction(900 * MBIT, 40_000, 0, 0.0, 0));
        let scp = verdict(&facts).scp_bps.expect("estimate");
        assert_eq!(scp, (SCP_WINDOW * 8) * 10);
    }

    mod props {
        //! The verdict takes the server's numbers as they come: whatever they are, it
        //! must not panic and must name at most one limit.

        use proptest::prelude::*;

        use super::*;

        fn any_direction() -> impl Strategy<Value = Direction> {
            (any::<[u64; 10]>(), any::<u64>(), any::<Option<u64>>()).prop_map(|(n, rate, drops)| {
                let sent = Sent {
                    packets: n[0],
                    lost: n[1],
                    idle_rtt_us: n[2],
                    min_rtt_us: n[3],
                    mean_rtt_us: n[4],
                    loss_rtt_us: n[5],
                    max_rtt_us: n[6],
                    packets_low: n[7],
                    lost_low: n[8],
                    packets_high: n[9],
                    lost_high: n[1],
                    mtu: 1200,
                    tags: n[4],
                };
                Direction::new(
                    sent,
                    Received {
                        bytes: rate,
                        steady_bps: rate,
                        rcvbuf_errors: drops,
                        ..Received::default()
                    },
                )
            })
        }

        proptest! {
            /// Catches: overflow in the buffer or scp arithmetic (a huge rate or RTT), a
            /// division by zero packets, two limits at once.
            #[test]
            fn any_facts_give_a_verdict(
                up in prop::option::of(any_direction()),
                down in prop::option::of(any_direction()),
                rtt in prop::option::of(any::<f64>()),
                numbers in any::<[u64; 6]>(),
                udp in any::<bool>(),
            ) {
                let mut remote = side("far", numbers[0]);
                remote.facts.udp_recv_buffer = numbers[1];
                remote.facts.aes_gcm_bps = numbers[2];
                remote.facts.chacha_bps = numbers[3];
                remote.facts.rmem_max = Some(numbers[4]);
                let facts = PathFacts {
                    quic_rtt_ms: rtt,
                    ssh_rtt_ms: Some(numbers[5] as f64),
                    udp,
                    upload: up,
                    download: down,
                    local: side("this host", numbers[5]),
                    remote: Some(remote),
                    ..PathFacts::default()
                };
                let v = verdict(&facts);
                prop_assert!(v.findings.iter().filter(|f| f.limit).count() <= 1);
            }
        }
    }

    #[test]
    fn nothing_measured_gives_no_limit_and_no_panic() {
        let facts = PathFacts { udp: true, ..Default::default() };
        let v = verdict(&facts);
        assert!(v.findings.iter().filter(|f| f.limit).count() <= 1);
    }
}
