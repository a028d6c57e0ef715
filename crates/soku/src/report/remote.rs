//! The server's part of a report: it samples its own view of the QUIC path (on a
//! download it is the data sender, whose window, phase and loss are the ones that
//! matter) and measures its CPU, and sends both back in a summary note on the ssh
//! channel when its job is done (`server/serve.rs`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use soku_engine::events::{PathReport, PATH_SAMPLE_INTERVAL};
use soku_proto::hello::{PathPoint, ServerSummary, MAX_SUMMARY_SAMPLES};

/// Samples at most [`MAX_SUMMARY_SAMPLES`], thinning as they come: once full, every
/// other one is dropped and only every second tick is kept from then on, so a copy of
/// any length keeps evenly spaced samples over all of it.
#[derive(Debug, Default)]
struct Thinned {
    points: Vec<PathPoint>,
    /// Keep one tick in `stride`.
    stride: u64,
    ticks: u64,
}

impl Thinned {
    fn push(&mut self, point: PathPoint) {
        let stride = self.stride.max(1);
        self.ticks += 1;
        if !self.ticks.is_multiple_of(stride) {
            return;
        }
        if self.points.len() >= MAX_SUMMARY_SAMPLES {
            let mut i = 0;
            self.points.retain(|_| {
                i += 1;
                i % 2 == 0
            });
            self.stride = stride * 2;
            if !self.ticks.is_multiple_of(self.stride) {
                return;
            }
        }
        self.points.push(point);
    }
}

/// The server's sampler and CPU clock for the summary.
pub struct ServerSampler {
    started: Instant,
    task: Option<tokio::task::JoinHandle<()>>,
    samples: Arc<Mutex<Thinned>>,
}

impl ServerSampler {
    /// Starts sampling `conn` (none over TCP) every [`PATH_SAMPLE_INTERVAL`];
    /// `started` is when the server started (for its wall time).
    pub fn start(started: Instant, conn: Option<&quinn::Connection>) -> Self {
        let samples = Arc::new(Mutex::new(Thinned::default()));
        let task = conn.map(|conn| {
            let (conn, samples) = (conn.clone(), samples.clone());
            tokio::spawn(async move {
                let origin = Instant::now();
                let mut tick = tokio::time::interval(PATH_SAMPLE_INTERVAL);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let at_ms = u64::try_from(origin.elapsed().as_millis()).unwrap_or(u64::MAX);
                    let point = point(at_ms, &PathReport::from_connection(&conn));
                    samples.lock().unwrap_or_else(|p| p.into_inner()).push(point);
                }
            })
        });
        ServerSampler { started, task, samples }
    }

    /// Stops sampling; the summary of the job, which sent the data if `sent_data`.
    pub fn finish(self, sent_data: bool) -> ServerSummary {
        if let Some(task) = &self.task {
            task.abort();
        }
        let micros = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let points =
            std::mem::take(&mut self.samples.lock().unwrap_or_else(|p| p.into_inner()).points);
        ServerSummary {
            cpu_us: micros(super::process_cpu()),
            wall_us: micros(self.started.elapsed()),
            sent_data,
            samples: points,
        }
    }
}

/// A path report as a summary sample.
fn point(at_ms: u64, p: &PathReport) -> PathPoint {
    let micros = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    PathPoint {
        at_ms,
        rtt_us: micros(p.rtt),
        min_rtt_us: micros(p.min_rtt),
        sent_packets: p.sent_packets,
        lost_packets: p.lost_packets,
        cwnd: p.cwnd,
        bandwidth_bps: p.model.map_or(0, |m| m.bandwidth_bps),
        phase: p.model.map(|m| m.phase.name().to_string()).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> PathPoint {
        PathPoint {
            at_ms: ms,
            rtt_us: 0,
            min_rtt_us: 0,
            sent_packets: 0,
            lost_packets: 0,
            cwnd: 0,
            bandwidth_bps: 0,
            phase: String::new(),
        }
    }

    /// Catches: a long copy's summary outgrowing its frame, or thinning that leaves
    /// the samples unevenly spaced.
    #[test]
    fn samples_thin_out_evenly() {
        let mut t = Thinned::default();
        for i in 1..=10 * MAX_SUMMARY_SAMPLES as u64 {
            t.push(at(i * 500));
        }
        assert!(t.points.len() <= MAX_SUMMARY_SAMPLES);
        assert!(t.points.len() >= MAX_SUMMARY_SAMPLES / 2);
        let gaps: Vec<u64> = t.points.windows(2).map(|w| w[1].at_ms - w[0].at_ms).collect();
        assert!(gaps.iter().all(|g| *g == gaps[0]), "{gaps:?}");
        assert_eq!(t.points.last().map(|p| p.at_ms), Some(10 * MAX_SUMMARY_SAMPLES as u64 * 500));
        // Fits the client's note decoder (64 KiB frames; `client/session.rs`).
        let bytes = soku_proto::frame::to_vec(&t.points).expect("encodes");
        assert!(bytes.len() < 16 * 1024, "{}", bytes.len());
    }
}
