//! The rate probes: a few seconds of bytes on one QUIC bidirectional stream, under the
//! connection's own congestion controller (soku-cc, `soku-transport/src/config.rs`),
//! so the rate found is the one a copy would get. The client opens the stream and
//! writes a [`HEADER_LEN`]-byte header: `U` (the client sends) or `D` (the server
//! sends), then the duration in milliseconds. The sender stops by resetting the stream
//! (what is still buffered is not worth draining: at 20 Mbit/s a full stream window
//! takes seconds); the receiver takes the reset, or the stream's end, as the end.
//!
//! One stream's flow-control window (8 MiB, `config.rs`) bounds the rate found at
//! 8 MiB per RTT (670 Mbit/s at 100 ms): enough for the paths the verdict names.

use std::time::Duration;

use bytes::Bytes;
use soku_proto::diagnose::{ProbeDirection, Received, Sent, MAX_PROBE_MS};
use tokio::time::Instant;

use super::host::udp_rcvbuf_errors;

/// Bytes of a probe stream's header.
pub const HEADER_LEN: usize = 5;
/// How often the sender samples its connection's RTT and losses.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);
/// How often the receiver notes its byte count (for the steady rate).
const MARK_EVERY: Duration = Duration::from_millis(50);
/// The share of a probe taken as start-up and left out of the steady rate.
const STARTUP_SHARE: f64 = 0.4;
/// One write: 64 KiB of zeros (QUIC encrypts them; nothing compresses on the way).
const WRITE: usize = 64 * 1024;

/// A probe could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The header named no known probe.
    #[error("unknown probe {0:#04x}")]
    Unknown(u8),
    /// The connection or stream failed.
    #[error("the probe stream failed: {0}")]
    Stream(String),
    /// The data did not end in time.
    #[error("the probe did not end within {0:?}")]
    Timeout(Duration),
}

/// The header for a probe of `duration` in `direction`.
pub fn header(direction: ProbeDirection, duration: Duration) -> [u8; HEADER_LEN] {
    let ms = u32::try_from(duration.as_millis()).unwrap_or(u32::MAX).min(MAX_PROBE_MS);
    let kind = match direction {
        ProbeDirection::Upload => b'U',
        ProbeDirection::Download => b'D',
    };
    let [a, b, c, d] = ms.to_be_bytes();
    [kind, a, b, c, d]
}

/// Reads a header from the peer: the direction, and the duration held to
/// [`MAX_PROBE_MS`].
pub fn parse_header(bytes: [u8; HEADER_LEN]) -> Result<(ProbeDirection, Duration), ProbeError> {
    let direction = match bytes[0] {
        b'U' => ProbeDirection::Upload,
        b'D' => ProbeDirection::Download,
        other => return Err(ProbeError::Unknown(other)),
    };
    let ms = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]).min(MAX_PROBE_MS);
    Ok((direction, Duration::from_millis(u64::from(ms))))
}

fn stream_err(e: impl std::fmt::Display) -> ProbeError {
    ProbeError::Stream(e.to_string())
}

/// Sends for `duration` on `send`, then resets it; what the connection saw meanwhile.
pub async fn send_for(
    conn: &quinn::Connection,
    send: &mut quinn::SendStream,
    duration: Duration,
) -> Result<Sent, ProbeError> {
    let data = Bytes::from(vec![0u8; WRITE]);
    let mut sampler = Sampler::new(conn);
    let deadline = Instant::now() + duration;
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // Bounded by the deadline: every tick checks it.
    loop {
        tokio::select! {
            _ = tick.tick() => {
                sampler.sample(conn);
                if Instant::now() >= deadline {
                    break;
                }
            }
            written = send.write_chunk(data.clone()) => written.map_err(stream_err)?,
        }
    }
    let _ = send.reset(0u32.into());
    Ok(sampler.finish(conn))
}

/// Receives until the stream ends or is reset, at most `limit`; the rate over the part
/// after start-up, and the receive-buffer drops meanwhile.
pub async fn receive(
    recv: &mut quinn::RecvStream,
    limit: Duration,
) -> Result<Received, ProbeError> {
    let drops_before = udp_rcvbuf_errors();
    let deadline = Instant::now() + limit;
    let mut marks: Vec<(Instant, u64)> = Vec::new();
    let mut bytes = 0u64;
    let mut last_mark: Option<Instant> = None;
    // Bounded by the deadline (a silent peer) and the stream's end.
    loop {
        let chunk = match tokio::time::timeout_at(deadline, recv.read_chunk(1 << 20, false)).await {
            Err(_) => return Err(ProbeError::Timeout(limit)),
            Ok(Ok(Some(chunk))) => chunk,
            Ok(Ok(None)) | Ok(Err(quinn::ReadError::Reset(_))) => break,
            Ok(Err(e)) => return Err(stream_err(e)),
        };
        bytes += chunk.bytes.len() as u64;
        let now = Instant::now();
        if last_mark.is_none_or(|t| now - t >= MARK_EVERY) {
            marks.push((now, bytes));
            last_mark = Some(now);
        }
    }
    marks.push((Instant::now(), bytes));
    let drops_after = udp_rcvbuf_errors();
    let rcvbuf_errors = match (drops_before, drops_after) {
        (Some(before), Some(after)) => Some(after.saturating_sub(before)),
        _ => None,
    };
    Ok(Received { bytes, steady_bps: steady_rate(&marks), rcvbuf_errors })
}

/// The rate between the first mark after [`STARTUP_SHARE`] of the probe and the last.
fn steady_rate(marks: &[(Instant, u64)]) -> u64 {
    let (Some(&(first, _)), Some(&(last, total))) = (marks.first(), marks.last()) else {
        return 0;
    };
    let from = first + (last - first).mul_f64(STARTUP_SHARE);
    let Some(&(t0, b0)) = marks.iter().find(|(t, _)| *t >= from) else { return 0 };
    let secs = (last - t0).as_secs_f64();
    if secs <= 0.0 {
        return 0;
    }
    ((total - b0) as f64 * 8.0 / secs) as u64
}

/// Most samples kept: 10 s at one per [`SAMPLE_EVERY`].
const MAX_SAMPLES: usize = 1000;

/// Follows the connection's RTT and losses while a probe sends.
struct Sampler {
    start_sent: u64,
    start_lost: u64,
    last_sent: u64,
    last_lost: u64,
    idle_rtt_us: u64,
    /// (smoothed RTT, packets sent, packets found lost) per sample interval.
    samples: Vec<(u64, u64, u64)>,
}

impl Sampler {
    fn new(conn: &quinn::Connection) -> Sampler {
        let path = conn.stats().path;
        Sampler {
            start_sent: path.sent_packets,
            start_lost: path.lost_packets,
            last_sent: path.sent_packets,
            last_lost: path.lost_packets,
            idle_rtt_us: conn.rtt().as_micros() as u64,
            samples: Vec::new(),
        }
    }

    fn sample(&mut self, conn: &quinn::Connection) {
        let rtt = conn.rtt().as_micros() as u64;
        let path = conn.stats().path;
        let sent = path.sent_packets.saturating_sub(self.last_sent);
        let lost = path.lost_packets.saturating_sub(self.last_lost);
        (self.last_sent, self.last_lost) = (path.sent_packets, path.lost_packets);
        if self.samples.len() < MAX_SAMPLES {
            self.samples.push((rtt, sent, lost));
        }
    }

    fn finish(mut self, conn: &quinn::Connection) -> Sent {
        self.sample(conn);
        let path = conn.stats().path;
        let mut sent = summarize(self.idle_rtt_us, &self.samples);
        sent.packets = path.sent_packets.saturating_sub(self.start_sent);
        sent.lost = path.lost_packets.saturating_sub(self.start_lost);
        sent.mtu = path.current_mtu;
        sent
    }
}

/// The RTT figures of a probe's samples, and its packets and losses split at the
/// middle of the RTT's range: where losses come with the queue (drop-tail), the upper
/// half holds nearly all of them; where they are random, each half loses at about the
/// same rate.
fn summarize(idle_rtt_us: u64, samples: &[(u64, u64, u64)]) -> Sent {
    let mut sent = Sent { idle_rtt_us, ..Sent::default() };
    if samples.is_empty() {
        return sent;
    }
    let rtts = || samples.iter().map(|&(rtt, _, _)| rtt);
    sent.min_rtt_us = rtts().min().unwrap_or(0);
    sent.max_rtt_us = rtts().max().unwrap_or(0);
    sent.mean_rtt_us = rtts().map(u128::from).sum::<u128>() as u64 / samples.len() as u64;
    let lost: u64 = samples.iter().map(|&(_, _, l)| l).sum();
    if lost > 0 {
        let weighted: u128 = samples.iter().map(|&(r, _, l)| u128::from(r) * u128::from(l)).sum();
        sent.loss_rtt_us = (weighted / u128::from(lost)) as u64;
    }
    let base = if idle_rtt_us == 0 { sent.min_rtt_us } else { sent.min_rtt_us.min(idle_rtt_us) };
    let middle = base + sent.max_rtt_us.saturating_sub(base) / 2;
    for &(rtt, packets, lost) in samples {
        if rtt > middle {
            sent.packets_high += packets;
            sent.lost_high += lost;
        } else {
            sent.packets_low += packets;
            sent.lost_low += lost;
        }
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_durations_are_bounded() {
        let h = header(ProbeDirection::Download, Duration::from_millis(2500));
        let (d, t) = parse_header(h).expect("parses");
        assert_eq!((d, t), (ProbeDirection::Download, Duration::from_millis(2500)));
        let long = header(ProbeDirection::Upload, Duration::from_secs(3600));
        assert_eq!(parse_header(long).expect("parses").1, Duration::from_millis(10_000));
        let hostile = [b'D', 0xff, 0xff, 0xff, 0xff];
        assert_eq!(parse_header(hostile).expect("parses").1, Duration::from_millis(10_000));
        assert!(matches!(parse_header([b'X', 0, 0, 0, 0]), Err(ProbeError::Unknown(b'X'))));
    }

    #[test]
    fn losses_are_split_at_the_middle_of_the_rtt_range() {
        // Base 50 ms (idle), up to 100 ms: the middle is 75 ms.
        let samples = [(50_000, 100, 1), (60_000, 100, 1), (80_000, 100, 0), (100_000, 100, 8)];
        let sent = summarize(50_000, &samples);
        assert_eq!((sent.packets_low, sent.lost_low), (200, 2));
        assert_eq!((sent.packets_high, sent.lost_high), (200, 8));
        assert_eq!((sent.min_rtt_us, sent.max_rtt_us, sent.mean_rtt_us), (50_000, 100_000, 72_500));
        assert_eq!(sent.loss_rtt_us, (50_000 + 60_000 + 800_000) / 10);
        assert_eq!(summarize(1, &[]).packets_low, 0);
    }

    #[test]
    fn the_steady_rate_leaves_out_the_start() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // 1 MB in the first second (start-up), then 10 MB/s for four seconds.
        let marks =
            [(at(0), 0), (at(1000), 1_000_000), (at(2000), 11_000_000), (at(5000), 41_000_000)];
        assert_eq!(steady_rate(&marks), 80_000_000);
        assert_eq!(steady_rate(&[]), 0);
        assert_eq!(steady_rate(&[(at(0), 5)]), 0);
    }
}
