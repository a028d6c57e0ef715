//! Seed inputs for each harness, made by encoding real messages: the fuzzer starts from
//! valid protocol and mutates it. The ignored test `write_the_seed_corpus`
//! (`fuzzing/corpus.rs`) writes them into the corpus directories; the corpus replay
//! test runs them too.

use super::receiver::{
    Script, CHECK, DELIVER, DIR, END, FAILED, FILE, ID_NEXT, OPENED, RIGHT, SUMMARY, WRITTEN,
};
use super::sender as tx;
use crate::chunk::{ChunkHeader, MIN_CHUNK_SIZE};
use crate::frame::{self, PREFIX_LEN};
use crate::hello::{
    ClientHello, ClientNote, PathPoint, ServerHello, ServerNote, ServerSummary, TransportChoice,
};
use crate::manifest::{Entry, Meta};
use crate::message::{CopyFlags, Held, HeldBase, HeldChunk, Job, Message, Request};
use crate::path::WirePath;
use crate::MAGIC;

/// The seed inputs of the harness `target` (empty for an unknown name).
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    match target {
        "frames" => frames(),
        "hello" => hello(),
        "control_message" => messages().iter().map(payload).collect(),
        "chunk_header" => chunk_header(),
        "receiver" => receiver(),
        "sender" => sender(),
        _ => Vec::new(),
    }
}

fn wp(parts: &[&str]) -> WirePath {
    WirePath(parts.iter().map(|s| crate::name::Name::from(*s)).collect())
}

fn header() -> ChunkHeader {
    ChunkHeader { file: 0, index: 1, wire_len: 16384, compressed: false, hash: [7; 32] }
}

/// One message of every kind, as a copy sends them.
fn messages() -> Vec<Message> {
    let meta = Meta { mode: 0o644, mtime: 1_700_000_000, mtime_nsec: 5, atime: -1, atime_nsec: 0 };
    let flags = CopyFlags {
        recursive: true,
        preserve: true,
        compress: false,
        chunk_size: 1 << 20,
        rate_limit_bps: Some(8_000_000),
        resume: true,
        fsync: true,
    };
    let request = |job| Request { job, flags };
    vec![
        Message::Request(request(Job::Receive { target: "backup/".into(), sources: 2 })),
        Message::Request(request(Job::Send { sources: vec!["logs/*.log".into(), "~".into()] })),
        Message::Request(request(Job::Tunnel { destination: "db:5432".into(), compress: true })),
        Message::Request(request(Job::Diagnose { target: "/data".into() })),
        Message::Request(request(Job::Sync {
            copy: crate::message::SyncCopy::Send { sources: vec!["src/".into()] },
            rules: crate::sync::SyncRules {
                delete: true,
                contents: true,
                filter: vec![
                    crate::sync::FilterRule::Include("keep.o".into()),
                    crate::sync::FilterRule::Exclude("*.o".into()),
                ],
                files_from: vec!["a/b.txt".into()],
                ..crate::sync::SyncRules::default()
            },
        })),
        Message::Skipped { file: 1, reason: crate::sync::SkipReason::Unchanged },
        Message::Deleted { path: wp(&["src", "old.rs"]) },
        Message::DiagnoseFacts(crate::diagnose::HostFacts {
            cores: 8,
            rmem_max: Some(212_992),
            disk: Some(crate::diagnose::DiskSpeed {
                path: "/data".into(),
                bytes_per_sec: 40_000_000,
                bytes: 64 << 20,
                error: None,
            }),
            ..Default::default()
        }),
        Message::DiagnoseProbe(crate::diagnose::ProbeReport {
            direction: crate::diagnose::ProbeDirection::Upload,
            received: Some(crate::diagnose::Received {
                bytes: 1 << 25,
                steady_bps: 95_000_000,
                rcvbuf_errors: Some(12),
                tags: 2_480,
                reordered: 25,
            }),
            sent: None,
            error: None,
        }),
        Message::Plan { files: 3, bytes: 5 << 30 },
        Message::Entry(Entry::Dir { path: wp(&["src"]), meta }),
        Message::Entry(Entry::File { id: 0, path: wp(&["src", "main.rs"]), size: 40_000, meta }),
        Message::SourceError { path: "missing".into(), message: "no such file".into() },
        Message::FileSummary { file: 0, root: [3; 32], sent: 1 },
        Message::FileAborted { file: 1, message: "read error".into() },
        Message::EndOfManifest { files: 3, bytes: 5 << 30 },
        Message::Progress { verified_bytes: 1 << 33 },
        Message::KeepAlive,
        Message::Held(Held {
            file: 0,
            base: HeldBase::Partial,
            from: 0,
            to: 3,
            chunks: vec![HeldChunk { index: 1, hash: [9; 32] }],
        }),
        Message::Held(Held {
            file: 1,
            base: HeldBase::Restarted { reason: "size changed".into() },
            from: 0,
            to: 9,
            chunks: vec![],
        }),
        Message::FileFailed { file: 2, message: "disk full".into() },
        Message::Finished { files: 2, bytes: 80_000, failures: 1 },
        Message::Fatal { message: "remote: out of memory".into() },
        Message::Chunk(ChunkHeader { compressed: true, wire_len: 900, ..header() }),
    ]
}

fn payload(msg: &Message) -> Vec<u8> {
    postcard::to_stdvec(msg).unwrap_or_default()
}

fn framed<T: serde::Serialize>(msg: &T) -> Vec<u8> {
    frame::to_vec(msg).unwrap_or_default()
}

fn frames() -> Vec<Vec<u8>> {
    let all: Vec<u8> = messages().iter().flat_map(framed).collect();
    let mut seeds = vec![[&[0][..], &all].concat(), [&[13][..], &all].concat()];
    for (spread, msg) in messages().iter().enumerate() {
        let spread = u8::try_from(spread * 17).unwrap_or(255);
        seeds.push([&[spread][..], &framed(msg)].concat());
    }
    // Cut short: the decoder must report a truncated stream.
    seeds.push([&[5][..], &all[..all.len() - 3]].concat());
    seeds
}

fn hello() -> Vec<Vec<u8>> {
    let ready = ServerHello::Ready {
        version: *crate::PROTOCOL_VERSIONS.end(),
        udp_port: 40_000,
        server_addr: Some(std::net::Ipv4Addr::new(192, 0, 2, 1).into()),
        fingerprint: [9; 32],
        soku_version: "0.1.0".into(),
        warnings: vec!["UDP receive buffer capped at 208 KiB".into()],
        min_version: *crate::PROTOCOL_VERSIONS.start(),
        tcp_port: 40_000,
        open_files: Some(1024),
    };
    let ready_v6 = ServerHello::Ready {
        version: 1,
        udp_port: 0,
        server_addr: Some(std::net::Ipv6Addr::LOCALHOST.into()),
        fingerprint: [0; 32],
        soku_version: "0.0.9".into(),
        warnings: Vec::new(),
        min_version: 1,
        tcp_port: 0,
        open_files: None,
    };
    // A newer server: its range reaches past ours.
    let newer = ServerHello::Ready {
        version: 9,
        udp_port: 40_001,
        server_addr: None,
        fingerprint: [8; 32],
        soku_version: "9.0.0".into(),
        warnings: Vec::new(),
        min_version: 2,
        tcp_port: 40_001,
        open_files: None,
    };
    let client = ClientHello::new([4; 32], true);
    let old_client = ClientHello { min_version: 0, max_version: 1, ..client.clone() };
    let noise = b"Welcome to host!\nLast login: yesterday\n".as_slice();
    // Protocol 2's hello: this one without its last three fields, `min_version`,
    // `tcp_port` and `open_files` (one byte each here).
    let mut v2 = framed(&ServerHello::Ready {
        version: 2,
        udp_port: 40_002,
        server_addr: None,
        fingerprint: [2; 32],
        soku_version: "0.0.2".into(),
        warnings: Vec::new(),
        min_version: 2,
        tcp_port: 0,
        open_files: None,
    });
    v2.truncate(v2.len() - 3);
    v2[PREFIX_LEN - 1] -= 3;
    vec![
        [&[0][..], noise, MAGIC, &framed(&ready)].concat(),
        [&[2][..], MAGIC, &v2].concat(),
        [&[7][..], MAGIC, &framed(&ready_v6)].concat(),
        [&[255][..], noise, MAGIC, &framed(&newer)].concat(),
        [&[3][..], MAGIC, &framed(&client), &framed(&TransportChoice::Quic { tcp_ready: true })]
            .concat(),
        [&[40][..], &framed(&old_client), &framed(&TransportChoice::SshChannel)].concat(),
        [&[41][..], &framed(&client), &framed(&TransportChoice::Tcp { lanes: 4 })].concat(),
        // The magic cut by a read, then a hello in the same read as the magic's end.
        [&[1][..], b"motd\0SOKU", &MAGIC[..4], MAGIC, &framed(&newer)].concat(),
        // The notes a server may send after its hello: policed, and its summary.
        [
            &[9][..],
            MAGIC,
            &framed(&ready),
            &framed(&ServerNote::Policed { why: "UDP rate-limited".into() }),
            &framed(&ServerNote::Summary(summary())),
        ]
        .concat(),
        // Pings after a QUIC choice, and the server's pongs after its hello.
        [
            &[3][..],
            MAGIC,
            &framed(&client),
            &framed(&TransportChoice::Quic { tcp_ready: true }),
            &framed(&ClientNote::Ping { seq: 1 }),
            &framed(&ClientNote::Ping { seq: u32::MAX }),
        ]
        .concat(),
        [&[9][..], MAGIC, &framed(&ready), &framed(&ServerNote::Pong { seq: 7 })].concat(),
    ]
}

/// A server's summary with one sample.
fn summary() -> ServerSummary {
    ServerSummary {
        cpu_us: 2_000_000,
        wall_us: 15_000_000,
        sent_data: true,
        samples: vec![PathPoint {
            at_ms: 500,
            rtt_us: 50_000,
            min_rtt_us: 50_000,
            sent_packets: 4000,
            lost_packets: 20,
            cwnd: 1 << 20,
            bandwidth_bps: 95_000_000,
            phase: "probe_bw".into(),
        }],
    }
}

fn chunk_header() -> Vec<Vec<u8>> {
    let tail = |size: u64, chunk_size: u32| {
        [size.to_le_bytes().as_slice(), &chunk_size.to_le_bytes()].concat()
    };
    let last = ChunkHeader { index: 4, wire_len: 1000, ..header() };
    vec![
        [framed(&header()), tail(5 * 16384 + 1000, MIN_CHUNK_SIZE)].concat(),
        [framed(&last), tail(5 * 16384 + 1000, MIN_CHUNK_SIZE)].concat(),
        [framed(&ChunkHeader { index: u32::MAX, compressed: true, ..header() }), tail(u64::MAX, 1)]
            .concat(),
        framed(&ChunkHeader { file: u32::MAX, wire_len: u32::MAX, ..header() }),
    ]
}

fn receiver() -> Vec<Vec<u8>> {
    let file =
        |path: &[u8], size: u8| [&[FILE, ID_NEXT][..], &Script::path(path), &[size, 0xa4]].concat();
    // Header argument: file id, index, compressed, wire length choice, hash byte.
    let chunk = |index: u8, hash: u8| [0, index, 0, 0, hash];
    let deliver = |index: u8, hash: u8| [&[DELIVER][..], &chunk(index, hash)].concat();
    let end = [END, ID_NEXT, 0, 0, 0, 0, 0, 0, 0, 0];
    vec![
        // A directory target, one file of a chunk and a byte, delivered in full.
        Script::new(0)
            .op(&file(&[0], 4))
            .op(&[OPENED, 0])
            .op(&deliver(0, 1))
            .op(&deliver(1, 2))
            .op(&[SUMMARY, 0, RIGHT])
            .op(&end)
            .into_bytes(),
        // Recursive: a directory, an empty file in it, a file of two chunks out of order.
        Script::new(1)
            .op(&[DIR][..])
            .op(&Script::path(&[0]))
            .op(&[0xed])
            .op(&file(&[0, 1], 0))
            .op(&[OPENED, 0, SUMMARY, 0, RIGHT])
            .op(&file(&[0, 2], 5))
            .op(&[OPENED, 1])
            .op(&[DELIVER, 1, 1, 0, 0, 3])
            .op(&[DELIVER, 1, 0, 0, 0, 4])
            .op(&[SUMMARY, 1, RIGHT])
            .op(&end)
            .into_bytes(),
        // A chunk whose bytes do not match its hash, a wrong root, an aborted file.
        Script::new(0)
            .op(&file(&[0], 1))
            .op(&file(&[1], 1))
            .op(&file(&[2], 3))
            .op(&[OPENED, 0, OPENED, 1, OPENED, 2])
            .op(&[&[CHECK][..], &chunk(0, 5)].concat())
            .op(&[&[WRITTEN][..], &chunk(0, 5), &[1]].concat())
            .op(&[DELIVER, 1, 0, 0, 0, 6, SUMMARY, 1, 1])
            .op(&[FAILED, 2])
            .op(&end)
            .into_bytes(),
        // A single-name target with a name filter (dir/a, b), the default chunk size.
        Script::new(0b1_0110)
            .op(&file(&[0], 1))
            .op(&[OPENED, 0, DELIVER, 0, 0, 0, 0, 9, SUMMARY, 0, RIGHT])
            .op(&file(&[1], 1))
            .op(&end)
            .into_bytes(),
        // A glob filter (logs/*.log, c), the largest chunk size, a compressed chunk.
        Script::new(0b10_1001)
            .op(&file(&[3], 3))
            .op(&[OPENED, 0, DELIVER, 0, 0, 1, 1, 8, SUMMARY, 0, RIGHT])
            .op(&end)
            .into_bytes(),
    ]
}

fn sender() -> Vec<Vec<u8>> {
    let plan = [tx::PLAN, 2, 0, 0, 1, 0, 0, 0, 0, 0];
    // Path "a" or "b", a size argument, meta.
    let file = |part: u8, size: u8| [tx::FILE, 1, part, size, 0xa4];
    // Report arguments: progress (u64), finished (u32, u64, u32).
    let progress = [tx::REPORT, 0, 0, 0, 1, 0, 0, 0, 0, 0];
    let finished = [tx::REPORT, 2, 2, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    vec![
        // A directory, a file of two chunks sent in order, an empty file, the end, the
        // receiver's reports.
        [&[0][..], &plan, &[tx::DIR, 1, 0, 0xed], &file(1, 4), &[tx::NEXT, 0, tx::NEXT, 0]]
            .concat()
            .into_iter()
            .chain([tx::SENT, 0, 0, 7, tx::SENT, 0, 1, 8])
            .chain(file(2, 0))
            .chain([tx::END])
            .chain(progress)
            .chain(finished)
            .collect(),
        // Chunks sent out of order, a failed read, a report for a file never announced.
        [&[1][..], &plan, &file(0, 6), &[tx::NEXT, 0, tx::NEXT, 0, tx::NEXT, 0]]
            .concat()
            .into_iter()
            .chain([tx::SENT, 0, 2, 1, tx::SENT, 0, 1, 2, tx::SENT, 0, 0, 3])
            .chain(file(1, 5))
            .chain([tx::NEXT, 1, tx::READ_FAILED, 1, tx::SENT, 1, 0, 4])
            .chain([tx::REPORT, 1, 9, tx::SOURCE_ERROR, tx::END])
            .chain(finished)
            .collect(),
        // Reports before the end, a control message that is no report.
        [&[0][..], &progress, &finished, &[tx::REPORT, 4, 3, 7, 0, 0]].concat(),
    ]
}
