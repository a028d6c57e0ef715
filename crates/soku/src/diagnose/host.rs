//! What one host is: cores, UDP buffer caps and what a soku socket gets, cipher
//! speed, and the speed of a file system (written on the server, read on the client).
//! Runs on a blocking thread: it spins the CPU and waits on the disk.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use soku_proto::diagnose::{DiskSpeed, HostFacts};
use soku_transport::Cipher;

/// Time spent sealing per cipher: long enough to leave the CPU's turbo ramp, short
/// enough for two ciphers on each side to fit the 20 s budget many times over.
const CIPHER_BUDGET: Duration = Duration::from_millis(150);
/// Time a disk test may write for; it then stops at the next flush.
const DISK_BUDGET: Duration = Duration::from_millis(1500);
/// Most a disk test writes.
const DISK_MAX: u64 = 64 << 20;
/// Bytes written between flushes: the first flush comes after [`BLOCK`], each later one
/// after twice as much as the one before, up to this. A slow disk thus shows its speed
/// within a small flush (256 KiB take 2.6 s at 100 kB/s), so the test ends soon after
/// [`DISK_BUDGET`]; a fast one soon reaches flushes large enough that their fixed cost
/// (a journal commit) does not lower the speed found.
const FLUSH_MAX: u64 = 4 << 20;
/// One write.
const BLOCK: usize = 256 << 10;

/// Which file system speed to measure, and where.
#[derive(Debug, Clone)]
pub enum DiskTest {
    /// Write (flushed to the device) into this directory: the target of an upload.
    Write(PathBuf),
    /// Read (from the device, not the page cache) a file written in this directory:
    /// the source of an upload.
    Read(PathBuf),
}

/// Measures this host; `disk` names the file system test, if any.
pub fn facts(disk: Option<DiskTest>) -> HostFacts {
    let buffers = soku_transport::udp_buffers().ok();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    HostFacts {
        cores: u32::try_from(cores).unwrap_or(u32::MAX),
        rmem_max: soku_transport::net_core_sysctl("rmem_max"),
        wmem_max: soku_transport::net_core_sysctl("wmem_max"),
        udp_recv_buffer: buffers.as_ref().map_or(0, |b| b.recv_buffer as u64),
        udp_send_buffer: buffers.as_ref().map_or(0, |b| b.send_buffer as u64),
        aes_gcm_bps: soku_transport::seal_speed(Cipher::Aes128Gcm, CIPHER_BUDGET),
        chacha_bps: soku_transport::seal_speed(Cipher::Chacha20Poly1305, CIPHER_BUDGET),
        disk: disk.map(|test| match test {
            DiskTest::Write(dir) => speed(&dir, write_speed),
            DiskTest::Read(dir) => speed(&dir, read_speed),
        }),
    }
}

/// Runs `test` in `dir` (its parent, if `dir` is a file) on a scratch file it removes.
fn speed(dir: &Path, test: fn(&Path) -> std::io::Result<(u64, Duration)>) -> DiskSpeed {
    let dir = if dir.is_file() { dir.parent().unwrap_or(Path::new(".")) } else { dir };
    let scratch = dir.join(format!(".soku-diagnose-{}.tmp", std::process::id()));
    let result = test(&scratch);
    let _ = std::fs::remove_file(&scratch);
    let path = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    // Windows' canonical form starts with `\\?\` (a verbatim path), which names the
    // same directory to the system but not to the reader.
    let path = path.display().to_string();
    let path = path.strip_prefix(r"\\?\").map_or(path.clone(), str::to_string);
    match result {
        Ok((bytes, took)) => DiskSpeed {
            path,
            bytes,
            bytes_per_sec: (bytes as f64 / took.as_secs_f64().max(1e-6)) as u64,
            error: None,
        },
        Err(err) => DiskSpeed { path, bytes: 0, bytes_per_sec: 0, error: Some(err.to_string()) },
    }
}

/// A block of bytes a compressing file system cannot shrink (xorshift).
fn block() -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut out = Vec::with_capacity(BLOCK);
    while out.len() < BLOCK {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// Writes `path` as the receiver does (buffered writes, then flushed to the device:
/// the receiver flushes each file before its rename, `soku_engine`'s fsync), up to
/// [`DISK_MAX`] or [`DISK_BUDGET`]; bytes and the time including the last flush.
fn write_speed(path: &Path) -> std::io::Result<(u64, Duration)> {
    let data = block();
    let mut file = File::create(path)?;
    let started = Instant::now();
    let mut written = 0u64;
    let mut step = BLOCK as u64;
    let mut flush_at = step;
    // Bounded by DISK_MAX, and by the budget at each flush.
    while written < DISK_MAX {
        file.write_all(&data)?;
        written += data.len() as u64;
        if written >= flush_at {
            file.sync_data()?;
            if started.elapsed() >= DISK_BUDGET {
                break;
            }
            step = (step * 2).min(FLUSH_MAX);
            flush_at = written + step;
        }
    }
    file.sync_data()?;
    Ok((written, started.elapsed()))
}

/// Writes a scratch file (up to [`DISK_MAX`] or [`DISK_BUDGET`]), flushes it, drops it
/// from the page cache, and times reading it back: the speed a cold source reads at.
fn read_speed(path: &Path) -> std::io::Result<(u64, Duration)> {
    let (written, _) = write_speed(path)?;
    let file = File::open(path)?;
    drop_cache(&file);
    let mut file = file;
    let mut buf = vec![0u8; BLOCK];
    let started = Instant::now();
    let mut read = 0u64;
    // Bounded by the file's size: each read advances or ends the loop.
    while read < written {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        read += n as u64;
    }
    Ok((read, started.elapsed()))
}

/// Asks the kernel to drop the file's clean pages, so the read comes from the device.
/// Best effort: where the advice is refused, the read may come from the cache and the
/// speed shown is too high.
fn drop_cache(file: &File) {
    crate::sys::drop_cached(file, 0, 0);
}

/// This network namespace's count of UDP datagrams dropped for a full receive buffer
/// (`RcvbufErrors` on the `Udp:` lines of `/proc/net/snmp`), if readable.
pub fn udp_rcvbuf_errors() -> Option<u64> {
    rcvbuf_errors_in(&std::fs::read_to_string("/proc/net/snmp").ok()?)
}

/// [`udp_rcvbuf_errors`] from the file's text: the first `Udp:` line names the fields,
/// the second holds the values.
fn rcvbuf_errors_in(snmp: &str) -> Option<u64> {
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let names = udp.next()?;
    let values = udp.next()?;
    let at = names.split_whitespace().position(|f| f == "RcvbufErrors")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rcvbuf_errors_are_read_from_the_udp_lines() {
        let snmp = "Tcp: RtoAlgorithm RtoMin\nTcp: 1 200\n\
                    Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                    Udp: 10 0 3 12 7 0\nUdpLite: InDatagrams\nUdpLite: 0\n";
        assert_eq!(rcvbuf_errors_in(snmp), Some(7));
        assert_eq!(rcvbuf_errors_in("Udp: RcvbufErrors\n"), None);
        assert_eq!(rcvbuf_errors_in(""), None);
    }

    #[test]
    fn a_disk_test_measures_and_cleans_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = speed(dir.path(), write_speed);
        assert!(write.error.is_none() && write.bytes > 0 && write.bytes_per_sec > 0, "{write:?}");
        let read = speed(dir.path(), read_speed);
        assert!(read.error.is_none() && read.bytes > 0, "{read:?}");
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0, "scratch left");
        let missing = speed(&dir.path().join("no/such"), write_speed);
        assert!(missing.error.is_some() && missing.bytes_per_sec == 0);
    }
}
