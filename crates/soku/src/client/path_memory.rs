//! What copies learned about the paths to each host, for the next copy's careful resume
//! (RFC 9959; the controller's side is `soku_cc::resume`).
//!
//! After a copy over QUIC the client notes, per host and per direction of the data,
//! the best rate its receiver verified data at over a window of at least two seconds,
//! four round trips and eight chunks, and the smallest RTT. The next copy in that direction hands them to the data
//! sender's controller: its own for an upload, the server's (through the client's hello)
//! for a download. The controller jumps to half of that bandwidth-delay product only if
//! the new connection's first RTT confirms the path, and retreats at once if the path
//! does not carry it, so a stale or wrong entry costs at most that one jump. A
//! `--background` data sender does not jump; it takes the remembered min RTT as the
//! baseline it measures other flows' queues against (`soku_cc::base_delay`), and as a
//! copy it lowers no remembered figure but the min RTT ([`Taught::Yielded`]).
//!
//! The entries live in `$XDG_CACHE_HOME/soku/paths` (`~/.cache/soku/paths`), one line
//! each: `HOST up|down BITS_PER_SECOND MIN_RTT_MICROSECONDS UNIX_SECONDS`. Entries older
//! than [`MAX_AGE`] are not used. A file that cannot be read or written only costs the
//! fast start: a copy never fails for it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use soku_engine::events::{EventSink, TransferEvent};
use soku_proto::hello::PathMemory;
use soku_transport::RememberedPath;

/// Entries older than this are ignored: paths change (a new route, a new plan, other
/// traffic at another time of day), and the jump is only worth its risk while the entry
/// is likely to hold. A week covers the daily and weekly copies the memory is for.
pub const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// Hosts remembered at most (the oldest go first).
const MAX_ENTRIES: usize = 256;
/// How often the meter reads the verified-bytes counter.
const METER_EVERY: Duration = Duration::from_millis(250);
/// The shortest window a rate is measured over (also at least four round trips).
const MIN_WINDOW: Duration = Duration::from_secs(2);
/// ...and the fewest chunks it spans.
const MIN_CHUNKS: u64 = 8;

/// Which way the data flows, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// To the remote host (upload).
    Up,
    /// From the remote host (download).
    Down,
}

impl Flow {
    fn name(self) -> &'static str {
        match self {
            Flow::Up => "up",
            Flow::Down => "down",
        }
    }
}

/// The controller's form of a memory from the wire.
pub fn remembered(memory: PathMemory) -> RememberedPath {
    RememberedPath {
        bandwidth_bps: memory.bandwidth_bps,
        min_rtt: Duration::from_micros(memory.min_rtt_us),
    }
}

/// The memory file.
fn file() -> Option<PathBuf> {
    Some(crate::client::private_dir::soku_cache_dir()?.join("paths"))
}

/// One line of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    host: String,
    flow: String,
    memory: PathMemory,
    saved: u64,
}

impl Entry {
    fn parse(line: &str) -> Option<Entry> {
        let mut words = line.split_whitespace();
        let entry = Entry {
            host: words.next()?.to_string(),
            flow: words.next()?.to_string(),
            memory: PathMemory {
                bandwidth_bps: words.next()?.parse().ok()?,
                min_rtt_us: words.next()?.parse().ok()?,
            },
            saved: words.next()?.parse().ok()?,
        };
        words.next().is_none().then_some(entry)
    }

    fn line(&self) -> String {
        format!(
            "{} {} {} {} {}\n",
            self.host, self.flow, self.memory.bandwidth_bps, self.memory.min_rtt_us, self.saved
        )
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A host name as a key: one word (ssh would not accept whitespace in it anyway).
fn usable_host(host: &str) -> bool {
    !host.is_empty() && !host.contains(char::is_whitespace)
}

fn read_entries(text: &str) -> Vec<Entry> {
    text.lines().filter(|l| !l.starts_with('#')).filter_map(Entry::parse).collect()
}

/// What the last copy to `host` in direction `flow` learned, if it is recent.
pub fn recall(host: &str, flow: Flow) -> Option<PathMemory> {
    let text = std::fs::read_to_string(file()?).ok()?;
    recall_from(&text, host, flow, unix_now())
}

fn recall_from(text: &str, host: &str, flow: Flow, now: u64) -> Option<PathMemory> {
    let entry = read_entries(text)
        .into_iter()
        .rev()
        .find(|e| e.host.eq_ignore_ascii_case(host) && e.flow == flow.name())?;
    let age = now.saturating_sub(entry.saved);
    (age <= MAX_AGE.as_secs() && entry.memory.bandwidth_bps > 0 && entry.memory.min_rtt_us > 0)
        .then_some(entry.memory)
}

/// How a copy's figures stand for the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taught {
    /// A normal copy: its rate and min RTT are the path's, and replace the entry.
    Path,
    /// A `--background` copy: it got the rate other traffic left it, so it lowers no
    /// remembered rate; its min RTT still counts where it is lower. Without this a
    /// background copy that yielded taught the next copy a trickle, and one that
    /// started inside another flow's queue taught that queue as the path's RTT, the
    /// baseline the next background copy measures queues against
    /// (`soku_cc::base_delay`).
    Yielded,
}

/// Notes what a copy to `host` learned (see [`Taught`]). Errors are ignored: the memory
/// only speeds up the next start.
pub fn remember(host: &str, flow: Flow, memory: PathMemory, taught: Taught) {
    let Some(path) = file() else { return };
    if !usable_host(host) {
        return;
    }
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let text = remembered_text(&old, host, flow, memory, taught, unix_now());
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    // Whole or not at all: a copy running beside this one may read it.
    let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) else { return };
    if std::io::Write::write_all(&mut tmp, text.as_bytes()).is_ok() {
        let _ = tmp.persist(&path);
    }
}

fn remembered_text(
    old: &str,
    host: &str,
    flow: Flow,
    memory: PathMemory,
    taught: Taught,
    now: u64,
) -> String {
    let memory = match (taught, recall_from(old, host, flow, now)) {
        (Taught::Yielded, Some(known)) => PathMemory {
            bandwidth_bps: known.bandwidth_bps.max(memory.bandwidth_bps),
            min_rtt_us: known.min_rtt_us.min(memory.min_rtt_us),
        },
        _ => memory,
    };
    let mut entries: Vec<Entry> = read_entries(old)
        .into_iter()
        .filter(|e| !(e.host.eq_ignore_ascii_case(host) && e.flow == flow.name()))
        .collect();
    entries.push(Entry {
        host: host.to_string(),
        flow: flow.name().to_string(),
        memory,
        saved: now,
    });
    let skip = entries.len().saturating_sub(MAX_ENTRIES);
    let mut text = String::from(
        "# soku: what copies learned about each path (host, direction, bits/s, min RTT us, \
         unix time); safe to delete\n",
    );
    for entry in &entries[skip..] {
        text.push_str(&entry.line());
    }
    text
}

/// The best delivered rate over a sliding window, from a byte counter read every
/// [`METER_EVERY`].
#[derive(Debug, Default)]
pub struct RateMeter {
    samples: std::collections::VecDeque<(Instant, u64)>,
    best_bps: u64,
}

impl RateMeter {
    /// Takes the counter's value at `now`. A rate counts once it spans at least `window`
    /// and `min_bytes` (verified bytes arrive a chunk at a time: fewer chunks would make
    /// the rate mostly rounding).
    pub fn sample(&mut self, now: Instant, bytes: u64, window: Duration, min_bytes: u64) {
        // Keep one sample at least `window` old, and nothing older than it.
        while self.samples.get(1).is_some_and(|(t, _)| now.saturating_duration_since(*t) >= window)
        {
            self.samples.pop_front();
        }
        if let Some(&(t0, b0)) = self.samples.front() {
            let span = now.saturating_duration_since(t0);
            let moved = bytes.saturating_sub(b0);
            if span >= window && moved >= min_bytes {
                let bps = u128::from(moved) * 8 * 1_000_000_000 / span.as_nanos().max(1);
                self.best_bps = self.best_bps.max(u64::try_from(bps).unwrap_or(u64::MAX));
            }
        }
        self.samples.push_back((now, bytes));
    }

    /// The best rate seen, bits per second (0 before a full window).
    pub fn best_bps(&self) -> u64 {
        self.best_bps
    }
}

/// Keeps the count of bytes the receiver verified, on their way to the user's event sink.
pub struct CountVerified {
    inner: Arc<dyn EventSink>,
    verified: Arc<AtomicU64>,
}

impl CountVerified {
    /// Wraps `inner`; the count starts at 0.
    pub fn new(inner: Arc<dyn EventSink>) -> Arc<CountVerified> {
        Arc::new(CountVerified { inner, verified: Arc::new(AtomicU64::new(0)) })
    }

    /// The running count.
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.verified.clone()
    }
}

impl EventSink for CountVerified {
    fn event(&self, event: TransferEvent) {
        if let TransferEvent::Verified { bytes } = &event {
            // Cumulative within one session.
            self.verified.store(*bytes, Ordering::Relaxed);
        }
        self.inner.event(event);
    }
}

/// Measures the rate a copy's receiver verifies data at, until [`Meter::finish`]:
/// payload bytes proven by hash, whichever way they flow. QUIC's own overhead (about
/// 5 %) is not counted, but verified bytes arrive a chunk at a time, in bursts, so the
/// best window can also read a little high: 100.7 Mbit/s was noted on a 100 Mbit/s
/// emulated link (300 ms). The jump is half of it either way, and validated.
pub struct Meter {
    task: tokio::task::JoinHandle<()>,
    conn: quinn::Connection,
    best: Arc<AtomicU64>,
}

impl Meter {
    /// Starts reading `verified` (see [`CountVerified`]); `chunk` is the copy's chunk size.
    pub fn start(conn: quinn::Connection, verified: Arc<AtomicU64>, chunk: u64) -> Meter {
        let best = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn({
            let (conn, best) = (conn.clone(), best.clone());
            async move {
                let mut meter = RateMeter::default();
                let mut tick = tokio::time::interval(METER_EVERY);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let rtt = soku_transport::min_rtt(&conn);
                    let window = MIN_WINDOW.max(rtt.saturating_mul(4));
                    let bytes = verified.load(Ordering::Relaxed);
                    meter.sample(Instant::now(), bytes, window, MIN_CHUNKS * chunk);
                    best.store(meter.best_bps(), Ordering::Relaxed);
                }
            }
        });
        Meter { task, conn, best }
    }

    /// What the copy learned: its best verified rate and the min RTT, if it ran long
    /// enough to measure one.
    pub fn finish(self) -> Option<PathMemory> {
        self.task.abort();
        let bandwidth_bps = self.best.load(Ordering::Relaxed);
        let min_rtt_us = u64::try_from(soku_transport::min_rtt(&self.conn).as_micros()).ok()?;
        (bandwidth_bps > 0 && min_rtt_us > 0).then_some(PathMemory { bandwidth_bps, min_rtt_us })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(mbit: u64, rtt_ms: u64) -> PathMemory {
        PathMemory { bandwidth_bps: mbit * 1_000_000, min_rtt_us: rtt_ms * 1000 }
    }

    #[test]
    fn an_entry_is_recalled_per_host_and_direction() {
        let now = 1_800_000_000;
        let text = remembered_text("", "Example.org", Flow::Up, memory(95, 200), Taught::Path, now);
        let text =
            remembered_text(&text, "example.org", Flow::Down, memory(40, 210), Taught::Path, now);
        assert_eq!(recall_from(&text, "example.org", Flow::Up, now), Some(memory(95, 200)));
        assert_eq!(recall_from(&text, "EXAMPLE.org", Flow::Down, now), Some(memory(40, 210)));
        assert_eq!(recall_from(&text, "other.org", Flow::Up, now), None);
        // A newer copy replaces the entry.
        let text =
            remembered_text(&text, "example.org", Flow::Up, memory(50, 190), Taught::Path, now + 5);
        assert_eq!(recall_from(&text, "example.org", Flow::Up, now + 5), Some(memory(50, 190)));
        assert_eq!(text.lines().filter(|l| l.contains(" up ")).count(), 1);
    }

    #[test]
    fn a_background_copy_lowers_neither_the_rate_nor_raises_the_min_rtt() {
        let now = 1_800_000_000;
        let text = remembered_text("", "h", Flow::Up, memory(95, 50), Taught::Path, now);
        // It yielded to other traffic (6 Mbit/s) and started inside its queue (75 ms).
        let text = remembered_text(&text, "h", Flow::Up, memory(6, 75), Taught::Yielded, now);
        assert_eq!(recall_from(&text, "h", Flow::Up, now), Some(memory(95, 50)));
        // It saw the path shorter than remembered: that counts.
        let text = remembered_text(&text, "h", Flow::Up, memory(6, 48), Taught::Yielded, now);
        assert_eq!(recall_from(&text, "h", Flow::Up, now), Some(memory(95, 48)));
        // With nothing fresh remembered, it teaches what it measured.
        let later = now + MAX_AGE.as_secs() + 1;
        let text = remembered_text(&text, "h", Flow::Up, memory(6, 75), Taught::Yielded, later);
        assert_eq!(recall_from(&text, "h", Flow::Up, later), Some(memory(6, 75)));
        // A normal copy replaces it.
        let text = remembered_text(&text, "h", Flow::Up, memory(90, 52), Taught::Path, later);
        assert_eq!(recall_from(&text, "h", Flow::Up, later), Some(memory(90, 52)));
    }

    #[test]
    fn old_entries_are_not_used() {
        let text = remembered_text("", "h", Flow::Up, memory(95, 200), Taught::Path, 1000);
        let week = MAX_AGE.as_secs();
        assert!(recall_from(&text, "h", Flow::Up, 1000 + week).is_some());
        assert_eq!(recall_from(&text, "h", Flow::Up, 1001 + week), None);
    }

    #[test]
    fn damaged_lines_are_skipped_and_the_file_stays_bounded() {
        let text = "garbage\nh up 1 2\nh up x 2 3\nh up 95000000 200000 7 extra\nh up 5 6 7\n";
        assert_eq!(
            recall_from(text, "h", Flow::Up, 7),
            Some(PathMemory { bandwidth_bps: 5, min_rtt_us: 6 })
        );
        let mut text = String::new();
        for i in 0..(MAX_ENTRIES + 10) {
            text = remembered_text(
                &text,
                &format!("host{i}"),
                Flow::Up,
                memory(10, 10),
                Taught::Path,
                5,
            );
        }
        assert_eq!(read_entries(&text).len(), MAX_ENTRIES);
        assert!(recall_from(&text, "host0", Flow::Up, 5).is_none());
        assert!(recall_from(&text, &format!("host{}", MAX_ENTRIES + 9), Flow::Up, 5).is_some());
    }

    #[test]
    fn the_meter_keeps_the_best_rate_over_a_full_window() {
        let mut m = RateMeter::default();
        let t0 = Instant::now();
        let w = Duration::from_secs(1);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // 10 MB/s (80 Mbit/s) for 3 s, then 5 MB/s.
        for i in 0..=12u64 {
            m.sample(at(i * 250), i * 2_500_000, w, 1);
        }
        assert_eq!(m.best_bps(), 80_000_000);
        for i in 13..=30u64 {
            m.sample(at(i * 250), 30_000_000 + (i - 12) * 1_250_000, w, 1);
        }
        assert_eq!(m.best_bps(), 80_000_000);
        let mut short = RateMeter::default();
        short.sample(at(0), 0, w, 1);
        short.sample(at(750), 10_000_000, w, 1);
        assert_eq!(short.best_bps(), 0, "no full window yet");
        // Too few bytes in the window: a slow copy's rate would be mostly rounding.
        let mut slow = RateMeter::default();
        slow.sample(at(0), 0, w, 8 << 20);
        slow.sample(at(1000), 1 << 20, w, 8 << 20);
        slow.sample(at(2000), 2 << 20, w, 8 << 20);
        assert_eq!(slow.best_bps(), 0);
    }
}
