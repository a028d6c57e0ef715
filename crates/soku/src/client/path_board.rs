//! The board where concurrent copies from this host to one peer share the path's min
//! RTT (the controller's side and the reasons are in `soku_cc::shared`): a 40-byte file
//! per peer address and network namespace, under `$XDG_RUNTIME_DIR/soku/paths-now`
//! (else `~/.cache/soku/paths-now`), read and written in place with `pread`/`pwrite`
//! at most ten times a second per copy.
//!
//! The file holds the min RTT, when it was measured and when a running copy last wrote
//! it, on the clock every process of one boot reads alike (`crate::sys::shared_clock`:
//! `CLOCK_MONOTONIC` on Unix, the tick count on Windows), and a
//! check word: a torn or foreign record reads as empty. After it, from byte
//! [`SHARES_AT`], [`SHARE_SLOTS`] slots where the copies sending on the path keep their
//! shares (`soku_cc::ensemble`), one slot per copy, each with its own check word. A
//! file that cannot be made or read only costs the sharing: a copy never fails for it.

use std::fs::File;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use soku_transport::{BoardSlot, MinRttRecord, PathBoard, ShareRecord};

use crate::client::private_dir::soku_runtime_dir;
use crate::sys;

/// The directory's name under soku's runtime directory.
const DIR: &str = "paths-now";
/// More files than this in the directory, and those untouched for [`STALE`] go.
const TIDY_ABOVE: usize = 256;
const STALE: Duration = Duration::from_secs(24 * 3600);
/// Mixed into the check word, so a file of other contents never reads as a record.
const CHECK_SALT: u64 = 0x736f_6b75_5f62_7264;
/// The same for a share slot, so the min-RTT record never reads as one.
const SHARE_SALT: u64 = 0x736f_6b75_5f73_6872;
/// Where the share slots start, and how many there are: more copies than this at once
/// to one peer take over the slots of the ones that wrote longest ago.
const SHARES_AT: u64 = 64;
const SHARE_SLOTS: usize = 16;
/// A share slot: writer, bytes in flight, alive at (monotonic), check word.
const SHARE_LEN: usize = 32;
/// A slot nobody wrote for this long is free.
const SLOT_FREE_AFTER: Duration = Duration::from_secs(1);

/// A board in a file, for one peer address.
#[derive(Debug)]
pub struct FileBoard {
    file: File,
    /// `Instant` and the monotonic clock read together, to map one to the other.
    anchor: (Instant, Duration),
}

impl FileBoard {
    /// The board for copies from this namespace to `peer`, or why there is none (for
    /// `-v`).
    pub fn open(peer: IpAddr) -> Result<Arc<dyn PathBoard>, String> {
        let dir = soku_runtime_dir(DIR)?;
        tidy(&dir);
        Self::open_in(&dir, peer).map(|board| Arc::new(board) as Arc<dyn PathBoard>)
    }

    fn open_in(dir: &Path, peer: IpAddr) -> Result<FileBoard, String> {
        let path = dir.join(board_name(peer));
        let file = sys::private_file()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(FileBoard { file, anchor: (Instant::now(), sys::shared_clock()) })
    }

    fn clock_at(&self, at: Instant) -> Duration {
        let (instant, clock) = self.anchor;
        match at.checked_duration_since(instant) {
            Some(later) => clock + later,
            None => clock.saturating_sub(instant - at),
        }
    }

    fn instant_at(&self, at: Duration) -> Option<Instant> {
        let (instant, clock) = self.anchor;
        match at.checked_sub(clock) {
            Some(later) => instant.checked_add(later),
            None => instant.checked_sub(clock - at),
        }
    }
}

impl PathBoard for FileBoard {
    fn read(&self) -> Option<MinRttRecord> {
        let mut bytes = [0u8; RECORD_LEN];
        sys::read_exact_at(&self.file, &mut bytes, 0).ok()?;
        let ([rtt, at, alive], writer) = decode(&bytes)?;
        let (at, alive) = (self.instant_at(at)?, self.instant_at(alive)?);
        Some(MinRttRecord { rtt, at, alive, writer })
    }

    fn write(&self, record: MinRttRecord) {
        let times = [record.rtt, self.clock_at(record.at), self.clock_at(record.alive)];
        let bytes = encode(times, record.writer);
        // Best effort: a record that did not make it is written again next time.
        let _ = sys::write_all_at(&self.file, &bytes, 0);
    }

    fn shares(&self) -> Vec<ShareRecord> {
        self.share_slots().into_iter().flatten().collect()
    }

    fn write_share(&self, record: ShareRecord) {
        let slots = self.share_slots();
        let now = Instant::now();
        let free = |slot: &Option<ShareRecord>| {
            slot.is_none_or(|s| now.saturating_duration_since(s.alive) > SLOT_FREE_AFTER)
        };
        // Its own slot, else a free one, else the one written longest ago. Two copies
        // that take one free slot at once: the one overwritten finds its slot taken at
        // its next write and moves on, a tenth of a second unseen.
        let index = slots
            .iter()
            .position(|s| s.is_some_and(|s| s.writer == record.writer))
            .or_else(|| slots.iter().position(free))
            .or_else(|| {
                let oldest = slots.iter().enumerate().min_by_key(|(_, s)| s.map(|s| s.alive));
                oldest.map(|(i, _)| i)
            })
            .unwrap_or(0);
        let bytes = encode_share(record.writer, record.in_flight, self.clock_at(record.alive));
        let _ = sys::write_all_at(&self.file, &bytes, SHARES_AT + (index * SHARE_LEN) as u64);
    }
}

impl FileBoard {
    /// Every slot, `None` where nothing readable is (past the end of a file written by
    /// an older soku, too).
    fn share_slots(&self) -> Vec<Option<ShareRecord>> {
        let mut bytes = [0u8; SHARE_SLOTS * SHARE_LEN];
        let read = sys::read_at(&self.file, &mut bytes, SHARES_AT).unwrap_or(0);
        let mut slots = vec![None; SHARE_SLOTS];
        for (i, slot) in slots.iter_mut().enumerate().take(read / SHARE_LEN) {
            let mut one = [0u8; SHARE_LEN];
            one.copy_from_slice(&bytes[i * SHARE_LEN..(i + 1) * SHARE_LEN]);
            *slot = decode_share(&one).and_then(|(writer, in_flight, alive)| {
                Some(ShareRecord { writer, in_flight, alive: self.instant_at(alive)? })
            });
        }
        slots
    }
}

/// Fills `slot` with the board for `peer`; leaves it empty (no sharing) when there is no
/// place for one.
pub fn share_on(slot: &BoardSlot, peer: IpAddr) {
    if let Ok(board) = FileBoard::open(peer) {
        slot.set(board);
    }
}

/// A slot holding the board for `peer`, or an empty one.
pub fn slot_for(peer: IpAddr) -> BoardSlot {
    let slot = BoardSlot::new();
    share_on(&slot, peer);
    slot
}

/// The file's name: 24 hex digits of BLAKE3 over the peer's address, this network
/// namespace and the user id.
fn board_name(peer: IpAddr) -> String {
    let uid = sys::user_id();
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"soku path board 1\0").update(peer.to_string().as_bytes()).update(&[0]);
    hasher.update(&sys::netns_id().to_le_bytes()).update(&uid.to_le_bytes());
    hasher.finalize().to_hex()[..24].to_string()
}

/// The record: min RTT, measured at, alive at (nanoseconds, the last two on the
/// monotonic clock), the writer's id, then the check word; little-endian `u64`s.
const RECORD_LEN: usize = 40;

fn check_word(words: [u64; 4]) -> u64 {
    let mixed = words[0].rotate_left(17)
        ^ words[1].rotate_left(31)
        ^ words[2].rotate_left(47)
        ^ words[3]
        ^ CHECK_SALT;
    mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn encode(times: [Duration; 3], writer: u64) -> [u8; RECORD_LEN] {
    let [rtt, at, alive] = times.map(|t| u64::try_from(t.as_nanos()).unwrap_or(u64::MAX));
    let words = [rtt, at, alive, writer];
    let mut bytes = [0u8; RECORD_LEN];
    for (i, word) in words.into_iter().chain([check_word(words)]).enumerate() {
        bytes[8 * i..8 * i + 8].copy_from_slice(&word.to_le_bytes());
    }
    bytes
}

fn decode(bytes: &[u8; RECORD_LEN]) -> Option<([Duration; 3], u64)> {
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[8 * i..8 * i + 8]);
        u64::from_le_bytes(w)
    };
    let words = [word(0), word(1), word(2), word(3)];
    let times = [words[0], words[1], words[2]].map(Duration::from_nanos);
    (words[0] > 0 && word(4) == check_word(words)).then_some((times, words[3]))
}

fn encode_share(writer: u64, in_flight: u64, alive: Duration) -> [u8; SHARE_LEN] {
    let alive = u64::try_from(alive.as_nanos()).unwrap_or(u64::MAX);
    let words = [writer, in_flight, alive];
    let check = check_word([writer, in_flight, alive, SHARE_SALT]);
    let mut bytes = [0u8; SHARE_LEN];
    for (i, word) in words.into_iter().chain([check]).enumerate() {
        bytes[8 * i..8 * i + 8].copy_from_slice(&word.to_le_bytes());
    }
    bytes
}

fn decode_share(bytes: &[u8; SHARE_LEN]) -> Option<(u64, u64, Duration)> {
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[8 * i..8 * i + 8]);
        u64::from_le_bytes(w)
    };
    let [writer, in_flight, alive] = [word(0), word(1), word(2)];
    let sound = alive > 0 && word(3) == check_word([writer, in_flight, alive, SHARE_SALT]);
    sound.then_some((writer, in_flight, Duration::from_nanos(alive)))
}

/// Removes boards nobody touched for a day once there are many (one per peer address
/// and namespace ever copied to).
fn tidy(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let files: Vec<(PathBuf, Option<SystemTime>)> = entries
        .flatten()
        .map(|e| (e.path(), e.metadata().and_then(|md| md.modified()).ok()))
        .collect();
    if files.len() <= TIDY_ABOVE {
        return;
    }
    let now = SystemTime::now();
    for (path, modified) in files {
        let old = modified.and_then(|m| now.duration_since(m).ok()).is_some_and(|age| age > STALE);
        if old {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_boards_for_one_peer_see_each_others_records_and_others_do_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let peer: IpAddr = "10.77.0.2".parse().expect("ip");
        let one = FileBoard::open_in(dir.path(), peer).expect("board");
        let two = FileBoard::open_in(dir.path(), peer).expect("board");
        let other = FileBoard::open_in(dir.path(), "10.77.0.3".parse().expect("ip")).expect("b");
        assert_eq!(one.read(), None, "a new board is empty");
        let alive = Instant::now();
        let at = alive - Duration::from_secs(3);
        let record = MinRttRecord { rtt: Duration::from_micros(20_412), at, alive, writer: 9 };
        one.write(record);
        let seen = two.read().expect("the other copy's record");
        assert_eq!((seen.rtt, seen.writer), (record.rtt, record.writer));
        // Both map through the monotonic clock; each board's anchor reads it and
        // `Instant` one after the other, so a stamp may move by that gap (microseconds;
        // the stamps are judged in tenths of seconds).
        for (seen, wrote) in [(seen.at, at), (seen.alive, alive)] {
            let off = if seen > wrote { seen - wrote } else { wrote - seen };
            assert!(off < Duration::from_millis(1), "stamp moved by {off:?}");
        }
        assert_eq!(other.read(), None, "another peer's board is another file");
    }

    #[test]
    fn copies_keep_their_shares_in_slots_of_their_own() {
        let dir = tempfile::tempdir().expect("tempdir");
        let peer: IpAddr = "10.77.0.2".parse().expect("ip");
        let one = FileBoard::open_in(dir.path(), peer).expect("board");
        let two = FileBoard::open_in(dir.path(), peer).expect("board");
        assert!(one.shares().is_empty(), "a new board has no shares");
        let now = Instant::now();
        let share = |writer, in_flight| ShareRecord { writer, in_flight, alive: now };
        one.write_share(share(1, 100_000));
        two.write_share(share(2, 150_000));
        one.write_share(share(1, 120_000));
        // The min-RTT record beside them changes nothing.
        two.write(MinRttRecord { rtt: Duration::from_millis(20), at: now, alive: now, writer: 2 });
        let mut seen: Vec<(u64, u64)> =
            two.shares().iter().map(|s| (s.writer, s.in_flight)).collect();
        seen.sort_unstable();
        assert_eq!(seen, vec![(1, 120_000), (2, 150_000)], "one slot per writer, the latest");
        // More writers than slots: the one written longest ago gives way.
        for writer in 10..10 + SHARE_SLOTS as u64 {
            one.write_share(ShareRecord {
                writer,
                in_flight: 1,
                alive: now + Duration::from_millis(writer),
            });
        }
        let writers: Vec<u64> = two.shares().iter().map(|s| s.writer).collect();
        assert_eq!(writers.len(), SHARE_SLOTS);
        assert!(!writers.contains(&1) && !writers.contains(&2), "the oldest went: {writers:?}");
    }

    #[test]
    fn a_torn_share_slot_reads_as_empty() {
        let good = encode_share(7, 123_456, Duration::from_secs(100));
        assert_eq!(decode_share(&good), Some((7, 123_456, Duration::from_secs(100))));
        for i in 0..SHARE_LEN {
            let mut bad = good;
            bad[i] ^= 0x10;
            assert_eq!(decode_share(&bad), None, "byte {i} flipped");
        }
        assert_eq!(decode_share(&[0u8; SHARE_LEN]), None);
    }

    #[test]
    fn a_torn_or_foreign_record_reads_as_empty() {
        let times = [Duration::from_millis(20), Duration::from_secs(100), Duration::from_secs(107)];
        let good = encode(times, 42);
        assert_eq!(decode(&good), Some((times, 42)));
        for i in 0..RECORD_LEN {
            let mut bad = good;
            bad[i] ^= 0x10;
            assert_eq!(decode(&bad), None, "byte {i} flipped");
        }
        assert_eq!(decode(&[0u8; RECORD_LEN]), None);
    }
}
