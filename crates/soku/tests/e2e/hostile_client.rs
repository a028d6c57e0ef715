//! The hostile-client suite, the mirror of `security.rs`: a client that breaks the
//! protocol, against the real `soku serve`.
//!
//! `soku serve` speaks on its stdin and stdout (ssh only carries them), so the test
//! starts it directly and plays the client: the hello, the ssh-channel transport, then
//! whatever the attack needs, built with soku-proto's own types and encoder. Every
//! attack asserts: the server ends by itself within a bound (a refusal or a timeout,
//! never a hang), with a one-line reason and no panic, and nothing lands outside the
//! target directory (a canary beside it stays as it was) or under a final name.
//! The same attacks over QUIC, with datagrams at the UDP port and a QUIC client with
//! the wrong certificate, are in `hostile_client_quic.rs`.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use soku_proto::chunk::{chunk_hash, ChunkHeader};
use soku_proto::frame;
use soku_proto::hello::{ClientHello, TransportChoice};
use soku_proto::manifest::{Entry, Meta};
use soku_proto::message::{CopyFlags, Job, Message, Request};
use soku_proto::path::WirePath;
use soku_proto::MAGIC;

use crate::common::hostile::{vm_hwm_kb, Scene};

/// Seconds of silence before the server takes the client for stalled (shortened).
const STALL_SECS: u64 = 2;
/// How long an attacked server may take to end.
const LIMIT: Duration = Duration::from_secs(20);

impl Scene {
    /// Runs an attack: writes `bytes` (then keeps stdin open until the server ends, so a
    /// stall is the server's to notice), and checks the common guarantees. Returns the
    /// server's stderr and its peak memory (VmHWM, kB) just before it ended.
    fn attack(&self, bytes: &[u8], needle: &str) -> (String, u64) {
        let mut server = self.spawn_serve(STALL_SECS);
        let mut stdin = server.stdin.take().expect("stdin");
        let mut stdout = server.stdout.take().expect("stdout");
        // Drain the server's replies so its writes never block.
        let drain = std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = stdout.read_to_end(&mut sink);
        });
        let _ = stdin.write_all(bytes);
        let _ = stdin.flush();
        let started = Instant::now();
        let mut peak_kb = 0;
        let status = loop {
            if let Some(status) = server.try_wait().expect("wait") {
                break status;
            }
            peak_kb = peak_kb.max(vm_hwm_kb(server.id()));
            if started.elapsed() > LIMIT {
                let _ = server.kill();
                panic!("soku serve did not end within {LIMIT:?}: it hung");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        drop(stdin);
        let _ = drain.join();
        let mut stderr = String::new();
        server.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("stderr");
        assert!(!status.success(), "the attack was accepted\n{stderr}");
        assert!(!stderr.contains("panicked"), "soku serve panicked\n{stderr}");
        assert!(stderr.lines().count() <= 3, "a short reason, not a dump\n{stderr}");
        assert!(stderr.contains(needle), "stderr lacks {needle:?}\n{stderr}");
        self.assert_untouched(&[]);
        (stderr, peak_kb)
    }
}

/// The bytes a client writes: the magic, its hello and the ssh-channel transport.
fn handshake() -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    frame::encode(&ClientHello::new([7; 32], false), &mut out).expect("encodes");
    frame::encode(&TransportChoice::SshChannel, &mut out).expect("encodes");
    out
}

fn with(mut bytes: Vec<u8>, msgs: &[Message]) -> Vec<u8> {
    for msg in msgs {
        frame::encode(msg, &mut bytes).expect("encodes");
    }
    bytes
}

fn upload_request() -> Message {
    Message::Request(Request {
        job: Job::Receive { target: "dst".into(), sources: 1 },
        flags: CopyFlags::NONE,
    })
}

fn file_entry(id: u32, name: &str, size: u64) -> Message {
    let path = WirePath(vec![name.into()]);
    Message::Entry(Entry::File { id, path, size, meta: Meta { mode: 0o644, ..Meta::default() } })
}

#[test]
fn garbage_and_oversized_frames_are_refused() {
    let scene = Scene::new();
    let mut bytes = handshake();
    bytes.extend_from_slice(&[0, 0, 0, 3, 0xff, 0xff, 0xff]);
    scene.attack(&bytes, "malformed");
    let mut bytes = handshake();
    bytes.extend_from_slice(&0xFFFF_FFF0u32.to_be_bytes());
    scene.attack(&bytes, "exceeds the limit");
    // Not even a soku client.
    scene.attack(b"SSH-2.0-OpenSSH_9.6\r\n", "not a soku client");
}

#[test]
fn messages_out_of_order_are_refused() {
    let scene = Scene::new();
    scene.attack(&with(handshake(), &[file_entry(0, "a", 1)]), "expected a request");
    scene.attack(
        &with(
            handshake(),
            &[
                upload_request(),
                Message::KeepAlive,
                Message::Finished { files: 0, bytes: 0, failures: 0 },
            ],
        ),
        "the sender sent a finish report",
    );
    let early =
        ChunkHeader { file: 0, index: 0, wire_len: 1, compressed: false, hash: chunk_hash(b"x") };
    let mut bytes = with(handshake(), &[upload_request(), Message::Chunk(early)]);
    bytes.push(b'x');
    scene.attack(&bytes, "before its entry");
}

#[test]
fn a_chunk_flood_beyond_the_manifest_is_refused_in_bounded_memory() {
    let scene = Scene::new();
    // A 4 MiB file, then 256 chunks of 1 MiB claiming to belong to it: the fifth is
    // past its end. The server must refuse it, not buffer the flood.
    let chunk = vec![0x5a; 1 << 20];
    let hash = chunk_hash(&chunk);
    let mut bytes = with(
        handshake(),
        &[
            upload_request(),
            Message::Plan { files: 1, bytes: 4 << 20 },
            file_entry(0, "big", 4 << 20),
        ],
    );
    for index in 0..256 {
        let header = ChunkHeader { file: 0, index, wire_len: 1 << 20, compressed: false, hash };
        frame::encode(&Message::Chunk(header), &mut bytes).expect("encodes");
        bytes.extend_from_slice(&chunk);
    }
    let (_, peak_kb) = scene.attack(&bytes, "past the end");
    eprintln!(
        "peak RSS of soku serve refusing a flood beyond the manifest: {} MiB",
        peak_kb / 1024
    );
    assert!(peak_kb < 160 * 1024, "peak RSS {peak_kb} kB");

    // The same flood for a file that takes it all (256 MiB, announced): the server
    // writes as fast as its disk lets it and buffers at most its chunk memory; then the
    // client goes silent and is given up on.
    let mut bytes = with(
        handshake(),
        &[
            upload_request(),
            Message::Plan { files: 1, bytes: 256 << 20 },
            file_entry(0, "big", 256 << 20),
        ],
    );
    for index in 0..256 {
        let header = ChunkHeader { file: 0, index, wire_len: 1 << 20, compressed: false, hash };
        frame::encode(&Message::Chunk(header), &mut bytes).expect("encodes");
        bytes.extend_from_slice(&chunk);
    }
    let (_, peak_kb) = scene.attack(&bytes, "stalled");
    eprintln!("peak RSS of soku serve taking a 256 MiB chunk flood: {} MiB", peak_kb / 1024);
    // The stated bound: 64 MiB of chunks per link (CHUNK_MEMORY_BYTES, counted from a
    // chunk's header until its bytes are written) and the process itself (about 20 MiB).
    assert!(peak_kb < 128 * 1024, "peak RSS {peak_kb} kB");
}

#[test]
fn a_client_that_stalls_is_given_up_on() {
    let scene = Scene::new();
    // Silent from the start.
    let (stderr, _) = scene.attack(&[], "stalled");
    assert!(stderr.contains(&format!("nothing for {STALL_SECS} s")), "{stderr}");
    // A hello, then silence.
    let mut hello = MAGIC.to_vec();
    frame::encode(&ClientHello::new([7; 32], false), &mut hello).expect("encodes");
    scene.attack(&hello, "stalled");
    // A request and a plan, then silence (no keep-alive either: a stopped process).
    let bytes = with(handshake(), &[upload_request(), Message::Plan { files: 1, bytes: 9 }]);
    scene.attack(&bytes, "stalled");
}
