//! soku-floor: what moving bytes through quinn costs each side, with none of soku's copy
//! around it, a floor to hold soku's own CPU per byte against (`docs/bench.md`,
//! "Loopback CPU efficiency"; the bench's loopback table runs it as its floor row).
//!
//! soku's own QUIC endpoints (`soku_transport`: the same windows, MTU bound, cipher and
//! congestion controller). The sender sends `--mib` MiB from memory, one 1 MiB chunk per
//! unidirectional stream, at most 64 at a time, each done when acknowledged, as soku's
//! sender does (`link/quic.rs`). With `--from FILE` it reads and hashes each chunk from
//! the file first, as soku's sender does (`codec::read_chunk`). Each stream starts with
//! the chunk's index and hash, which the receiver checks as soku checks a chunk's
//! header. The receiver does as much of soku's receiving work as `--work` asks:
//!
//! - `discard`: takes quinn's pieces (`read_chunk`) and drops them;
//! - `copy`: reads each chunk into a page-aligned buffer, as soku's link does
//!   (`link::frames::read_bytes`);
//! - `hash` (the default): the same, with BLAKE3 taken as the bytes arrive, as soku does;
//! - `write`: the same, then each chunk written at its offset into `--target` on a
//!   blocking thread: through the page cache, or with `--direct` as soku writes a large
//!   file, to the disk itself (`O_DIRECT`) where soku would: on a local disk's file
//!   system (`soku_engine::direct_io::applies`). No fsync.
//!
//! Over loopback, both sides run in one process, in two tokio runtimes whose threads are
//! named `snd` and `rcv`, and it prints each runtime's CPU (user + system, from
//! `/proc/self/task`) per GB; with `--csv`, the seconds and each side's CPU seconds:
//!
//! ```sh
//! cargo build --release -p soku-bench
//! target/release/soku-floor --work write --target /dev/shm/x
//! ```
//!
//! Across an emulated path, each side runs in its own network namespace and prints its
//! own process's CPU per GB (with `--csv`, its seconds, CPU seconds and peak memory);
//! the two share a pair of identities written beforehand. The bench's `quinn-floor`
//! rows run it so (`src/floor_path.rs`):
//!
//! ```sh
//! soku-floor --make-keys DIR
//! ip netns exec B soku-floor --keys DIR --receive 10.77.0.2:9000 --mib 120 &
//! ip netns exec A soku-floor --keys DIR --send 10.77.0.2:9000 --mib 120
//! ```

use std::net::SocketAddr;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use soku_bench::proc::{peak_rss_kib, proc_cpu, thread_cpu};
use soku_engine::codec::read_chunk;
use soku_engine::direct_io;
use soku_engine::link::frames::read_bytes;
use soku_engine::source_file::SourceFile;
use soku_transport::{
    accept, client_endpoint, connect, server_endpoint, ClientPin, Identity, TransportOptions,
};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

type Failure = Box<dyn std::error::Error>;

const CHUNK: usize = 1 << 20;
const IN_FLIGHT: usize = 64;
/// Chunks read from `--from` at once, on the blocking pool.
const READS_AT_ONCE: usize = 8;
/// A stream's head: the chunk's index (8 bytes) and its BLAKE3 hash.
const HEAD: usize = 8 + 32;
/// How long a side run alone waits for the connection's close to pass.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How much of soku's receiving work the receiver does.
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Work {
    /// Take quinn's pieces and drop them.
    Discard,
    /// Read each chunk into a page-aligned buffer, as soku's link does.
    Copy,
    /// The same, with BLAKE3 taken as the bytes arrive, and checked.
    Hash,
    /// The same, then each chunk written into `--target`.
    Write,
}

/// What quinn costs each side with none of soku around it (see the source's header).
#[derive(clap::Parser)]
struct Args {
    /// MiB to send, in 1 MiB chunks.
    #[arg(long, default_value_t = 1024)]
    mib: usize,
    /// How much of soku's receiving work the receiver does.
    #[arg(long, value_enum, default_value_t = Work::Hash)]
    work: Work,
    /// The file `--work write` writes into.
    #[arg(long)]
    target: Option<PathBuf>,
    /// Write as soku writes a large file: `O_DIRECT` where soku would, on a local disk's
    /// file system.
    #[arg(long)]
    direct: bool,
    /// Print figures for a program to read: both sides here, the seconds and each
    /// side's CPU seconds; one side alone, its seconds, its process's CPU seconds and
    /// its peak resident memory in MiB (comma-separated).
    #[arg(long)]
    csv: bool,
    /// Read and hash each chunk from this file, as soku's sender does.
    #[arg(long)]
    from: Option<PathBuf>,
    /// The directory of the identities both sides share when run apart.
    #[arg(long)]
    keys: Option<PathBuf>,
    /// Write a pair of identities into this directory, and stop.
    #[arg(long)]
    make_keys: Option<PathBuf>,
    /// Run only the sending side, to this address.
    #[arg(long, conflicts_with = "receive")]
    send: Option<SocketAddr>,
    /// Run only the receiving side, at this address; once it listens, it prints
    /// `listening` on a line of its own.
    #[arg(long)]
    receive: Option<SocketAddr>,
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soku-floor: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Failure> {
    let mut args = <Args as clap::Parser>::parse();
    if let Some(dir) = &args.make_keys {
        return make_keys(dir);
    }
    let file = match (args.work, args.target.take()) {
        (Work::Write, Some(path)) => Some(Arc::new(open_target(&path, args.direct)?)),
        (Work::Write, None) => return Err("--work write needs --target".into()),
        _ => None,
    };
    let ids = match &args.keys {
        Some(dir) => (load(dir, "server")?, load(dir, "client")?),
        None => (Identity::generate()?, Identity::generate()?),
    };
    match (args.receive, args.send) {
        (Some(addr), _) => receiving_side(&args, addr, &ids, file),
        (None, Some(addr)) => sending_side(&args, addr, &ids),
        (None, None) => both_sides(&args, &ids, file),
    }
}

/// The server's and the client's identities: (server, client).
type Ids = (Identity, Identity);

/// A multi-threaded runtime whose threads carry `name`.
fn runtime(name: &str) -> std::io::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread().thread_name(name).enable_all().build()
}

/// Bytes of `mib` chunks, in GB.
fn gigabytes(mib: usize) -> f64 {
    (mib * CHUNK) as f64 / 1e9
}

/// The file `--from` names, checked to hold the `--mib` chunks to send.
fn source(args: &Args) -> Result<Option<Arc<SourceFile>>, Failure> {
    let Some(path) = &args.from else { return Ok(None) };
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let len = file.metadata()?.len();
    if len < (args.mib * CHUNK) as u64 {
        return Err(
            format!("{}: {len} bytes, fewer than --mib {}", path.display(), args.mib).into()
        );
    }
    Ok(Some(Arc::new(SourceFile::new(file))))
}

/// Writes a pair of identities into `dir`, for the two sides run apart.
fn make_keys(dir: &Path) -> Result<(), Failure> {
    std::fs::create_dir_all(dir)?;
    for side in ["server", "client"] {
        let (cert, key) = Identity::generate()?.to_der();
        std::fs::write(dir.join(format!("{side}.cert")), cert)?;
        std::fs::write(dir.join(format!("{side}.key")), key)?;
    }
    Ok(())
}

/// The file the receiver writes into: directly where soku would (`direct`).
fn open_target(path: &Path, direct: bool) -> Result<std::fs::File, Failure> {
    let named = |e: std::io::Error| format!("{}: {e}", path.display());
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(named)?;
    if !(direct && direct_io::applies(&file)) {
        return Ok(file);
    }
    let mut open = std::fs::OpenOptions::new();
    open.write(true).custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32);
    Ok(open.open(path).map_err(named)?)
}

/// The receiving side alone, at `addr`; prints this process's CPU per GB.
fn receiving_side(
    args: &Args,
    addr: SocketAddr,
    (server_id, client_id): &Ids,
    file: Option<Arc<std::fs::File>>,
) -> Result<(), Failure> {
    let rcv = runtime("rcv")?;
    let opts = TransportOptions::default();
    let (server, _) =
        rcv.block_on(async { server_endpoint(addr, server_id, client_id.fingerprint(), &opts) })?;
    // For whoever starts the sender next: it need not guess when to.
    println!("listening");
    std::io::Write::flush(&mut std::io::stdout())?;
    let started = Instant::now();
    let pin = client_id.fingerprint().into();
    let conn = rcv.block_on(receive(server, pin, args.mib, args.work, file))?;
    let seconds = started.elapsed().as_secs_f64();
    // The sender closes once every chunk is acknowledged; closing first could cut off
    // the acknowledgements of the last ones. Bounded, should its close be lost.
    rcv.block_on(async { tokio::time::timeout(CLOSE_WAIT, conn.closed()).await.ok() });
    let cpu = process_cpu()?;
    if args.csv {
        print_side_csv(seconds, cpu);
        return Ok(());
    }
    let per_gb = cpu / gigabytes(args.mib);
    println!("received {} MiB in {seconds:.2} s: {per_gb:.2} CPU-s/GB", args.mib);
    Ok(())
}

/// The sending side alone, to `addr`; prints this process's CPU per GB.
fn sending_side(
    args: &Args,
    addr: SocketAddr,
    (server_id, client_id): &Ids,
) -> Result<(), Failure> {
    let snd = runtime("snd")?;
    let opts = TransportOptions::default();
    let (client, _) =
        snd.block_on(async { client_endpoint(addr, client_id, server_id.fingerprint(), &opts) })?;
    let started = Instant::now();
    let conn = send(&snd, &client, addr, args.mib, source(args)?)?;
    let seconds = started.elapsed().as_secs_f64();
    let mbit_s = conn.stats().udp_tx.bytes as f64 * 8.0 / seconds / 1e6;
    conn.close(0u32.into(), b"done");
    // Until the close is sent, so that the receiver need not wait for it.
    snd.block_on(async { tokio::time::timeout(CLOSE_WAIT, client.wait_idle()).await.ok() });
    let cpu = process_cpu()?;
    if args.csv {
        print_side_csv(seconds, cpu);
        return Ok(());
    }
    let per_gb = cpu / gigabytes(args.mib);
    println!(
        "sent {} MiB in {seconds:.2} s ({mbit_s:.1} Mbit/s of UDP payload): {per_gb:.2} CPU-s/GB",
        args.mib
    );
    Ok(())
}

/// Both sides in this process, over loopback; prints each side's CPU.
fn both_sides(
    args: &Args,
    (server_id, client_id): &Ids,
    file: Option<Arc<std::fs::File>>,
) -> Result<(), Failure> {
    let (snd, rcv) = (runtime("snd")?, runtime("rcv")?);
    let opts = TransportOptions::default();
    let loopback = "127.0.0.1:0".parse()?;
    let (server, _) = rcv
        .block_on(async { server_endpoint(loopback, server_id, client_id.fingerprint(), &opts) })?;
    let addr = server.local_addr()?;
    let (client, _) =
        snd.block_on(async { client_endpoint(addr, client_id, server_id.fingerprint(), &opts) })?;
    let pin = client_id.fingerprint().into();
    let receiving = rcv.spawn(receive(server, pin, args.mib, args.work, file));
    let started = Instant::now();
    let conn = send(&snd, &client, addr, args.mib, source(args)?)?;
    let server_conn = rcv.block_on(receiving)?.map_err(|e| e.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    conn.close(0u32.into(), b"done");
    server_conn.close(0u32.into(), b"done");
    let (snd_cpu, rcv_cpu) = (thread_cpu("snd")?, thread_cpu("rcv")?);
    if args.csv {
        println!("{seconds:.3},{snd_cpu:.2},{rcv_cpu:.2}");
        return Ok(());
    }
    let gb = gigabytes(args.mib);
    println!(
        "{} MiB in {seconds:.2} s ({:.0} MB/s): sender {:.2} CPU-s/GB, receiver {:.2} CPU-s/GB",
        args.mib,
        gb * 1e3 / seconds,
        snd_cpu / gb,
        rcv_cpu / gb
    );
    Ok(())
}

fn load(dir: &Path, side: &str) -> Result<Identity, Failure> {
    let cert = std::fs::read(dir.join(format!("{side}.cert")))?;
    let key = std::fs::read(dir.join(format!("{side}.key")))?;
    Ok(Identity::from_der(cert, key)?)
}

/// Every chunk's bytes: a pattern no compression or zero check would shorten.
fn payload() -> Bytes {
    (0..CHUNK).map(|i| (i as u32).wrapping_mul(2654435761) as u8).collect()
}

/// Sends `mib` chunks over a new connection to `addr`; the connection once all were
/// acknowledged.
fn send(
    snd: &Runtime,
    client: &quinn::Endpoint,
    addr: SocketAddr,
    mib: usize,
    from: Option<Arc<SourceFile>>,
) -> Result<quinn::Connection, String> {
    let payload = payload();
    let payload_hash = *blake3::hash(&payload).as_bytes();
    let reads = Arc::new(tokio::sync::Semaphore::new(READS_AT_ONCE));
    snd.block_on(async {
        let conn = connect(client, addr).await.map_err(|e| e.to_string())?;
        let mut senders = JoinSet::new();
        for index in 0..mib as u64 {
            let (conn, payload, from, reads) =
                (conn.clone(), payload.clone(), from.clone(), reads.clone());
            senders.spawn(async move {
                let (hash, wire) = match from {
                    // Read and hashed as soku's sender does (`codec::read_chunk`).
                    Some(source) => {
                        let _read = reads.acquire_owned().await.map_err(|e| e.to_string())?;
                        let at = (index * CHUNK as u64, CHUNK as u32);
                        let read = move || read_chunk(&source, 0, index as u32, at, None, false);
                        let chunk = tokio::task::spawn_blocking(read)
                            .await
                            .map_err(|e| e.to_string())?
                            .map_err(|e| e.to_string())?;
                        (chunk.header.hash, chunk.wire)
                    }
                    None => (payload_hash, payload),
                };
                let mut stream = conn.open_uni().await.map_err(|e| e.to_string())?;
                let head = Bytes::from([&index.to_le_bytes()[..], &hash[..]].concat());
                stream.write_all_chunks(&mut [head, wire]).await.map_err(|e| e.to_string())?;
                stream.finish().map_err(|e| e.to_string())?;
                stream.stopped().await.map_err(|e| e.to_string())?;
                Ok::<_, String>(())
            });
            while senders.len() >= IN_FLIGHT {
                senders.join_next().await.expect("not empty").map_err(|e| e.to_string())??;
            }
        }
        while let Some(done) = senders.join_next().await {
            done.map_err(|e| e.to_string())??;
        }
        Ok(conn)
    })
}

/// Accepts one connection (the client `pin` names) and receives `mib` chunks on it,
/// doing `work` with each.
async fn receive(
    server: quinn::Endpoint,
    pin: ClientPin,
    mib: usize,
    work: Work,
    file: Option<Arc<std::fs::File>>,
) -> Result<quinn::Connection, String> {
    let conn = accept(&server, &pin).await.map_err(|e| e.to_string())?;
    let mut readers = JoinSet::new();
    for _ in 0..mib {
        let mut stream = conn.accept_uni().await.map_err(|e| e.to_string())?;
        let file = file.clone();
        readers.spawn(async move {
            // The chunk's index and hash, as soku's chunk header carries them.
            let mut head = [0u8; HEAD];
            stream.read_exact(&mut head).await.map_err(|e| e.to_string())?;
            let (index, expected) = head.split_at(8);
            let offset = u64::from_le_bytes(index.try_into().expect("8 bytes")) * CHUNK as u64;
            if work == Work::Discard {
                while let Some(piece) =
                    stream.read_chunk(usize::MAX, true).await.map_err(|e| e.to_string())?
                {
                    drop(piece);
                }
                return Ok::<_, String>(());
            }
            let (data, hash) = read_bytes(&mut stream, CHUNK as u32, work != Work::Copy)
                .await
                .map_err(|e| e.to_string())?;
            // Checked as soku checks each chunk against the hash its header carries.
            if hash.is_some_and(|h| h[..] != *expected) {
                return Err(format!("chunk at {offset} arrived altered"));
            }
            if let Some(file) = file {
                tokio::task::spawn_blocking(move || file.write_all_at(data.bytes(), offset))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        });
        while readers.len() >= IN_FLIGHT {
            readers.join_next().await.expect("not empty").map_err(|e| e.to_string())??;
        }
    }
    while let Some(done) = readers.join_next().await {
        done.map_err(|e| e.to_string())??;
    }
    Ok(conn)
}

/// CPU seconds of this whole process so far.
fn process_cpu() -> Result<f64, Failure> {
    Ok(proc_cpu("self").ok_or("unreadable /proc/self/stat")?.0)
}

/// One side's `--csv` line: its seconds, its process's CPU seconds and its peak
/// resident memory in MiB (NaN if unreadable), as `src/floor_path.rs` reads it.
fn print_side_csv(seconds: f64, cpu: f64) {
    let peak_rss_mib = peak_rss_kib("self").map_or(f64::NAN, |kib| kib as f64 / 1024.0);
    println!("{seconds:.3},{cpu:.3},{peak_rss_mib:.1}");
}
