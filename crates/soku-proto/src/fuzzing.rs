//! The fuzz harnesses, shared by the cargo-fuzz targets in `fuzz/` (one target per
//! function, same name) and by the corpus replay test `fuzzing/corpus.rs`, which runs
//! every committed corpus file through them on stable Rust.
//!
//! Each harness drives one decoder of peer bytes (or the receiver's or the sender's state
//! machine) with arbitrary input. A decoder may refuse its input with an error; what the
//! harness asserts is everything else: no panic, no overflow, no allocation beyond the
//! input's size, a decoded message that survives re-encoding, a result that does not
//! depend on how the input was cut into reads, a state machine that accepts exactly what
//! its model accepts. The
//! harnesses panic only when such a property breaks, which is what the fuzzer reports.
//!
//! Not part of the API: hidden from the docs, and changes with the protocol.
//!
//! What the harnesses share sits in leaf files they all import: `input.rs` (the bytes
//! read as values), `wire.rs` (streams cut and decoded, round trips) and `paths.rs` (the
//! path rules re-stated); `receiver.rs`, `sender.rs` and `seeds.rs` hold the state
//! machine harnesses and their seeds.

use std::fmt::Debug;
use std::path::Path;

use serde::Serialize;

use crate::chunk::{check_chunk_size, max_wire_len, ChunkHeader, ChunkPlan};
use crate::chunk::{MAX_CHUNK_SIZE, MIN_CHUNK_SIZE};
use crate::frame::{self, MAX_CONTROL_FRAME, PREFIX_LEN};
use crate::hello::{
    decode_hello, decode_server_hello, ClientHello, ClientNote, HelloScanner, Scan, ServerNote,
    TransportChoice, MAX_CLIENT_NOTE, MAX_NOISE,
};
use crate::message::Message;
use crate::path::{Target, WirePath};
use crate::{ProtoError, MAGIC, PROTOCOL_VERSIONS};

#[cfg(test)]
mod corpus;
mod input;
mod paths;
mod receiver;
mod seeds;
mod sender;
mod wire;

pub use receiver::receiver;
pub use seeds::seeds;
pub use sender::sender;

pub use input::Input;
pub use paths::{expected_local, is_safe_path, ROOT};
pub use wire::pieces;
use wire::{decode_frames, decode_payloads, round_trip};

/// A harness: takes any bytes, panics only on a bug.
pub type Harness = fn(&[u8]);

/// Every harness, by the name of its fuzz target and of its corpus directory.
pub const TARGETS: &[(&str, Harness)] = &[
    ("frames", frames),
    ("hello", hello),
    ("control_message", control_message),
    ("chunk_header", chunk_header),
    ("receiver", receiver),
    ("sender", sender),
];

/// Largest frame the client accepts for the server's hello (it reads the hello with a
/// [`frame::Decoder`] of this limit).
pub const HELLO_FRAME_LIMIT: usize = 64 << 10;
/// Largest frame the server accepts for the client's hello and transport choice.
pub const SMALL_FRAME_LIMIT: usize = 4096;
/// Largest chunk header frame on a QUIC data stream.
pub const DATA_HEADER_LIMIT: usize = 256;

/// `frame::Decoder` over a stream of control frames, fed in pieces whose sizes come from
/// the data. The first byte sets the piece sizes ([`pieces`]); the rest is the stream.
/// The messages and the error must not depend on how the stream was cut, and every
/// message must survive re-encoding.
pub fn frames(data: &[u8]) {
    let Some((&spread, stream)) = data.split_first() else { return };
    let whole = decode_frames::<Message>([stream], MAX_CONTROL_FRAME);
    let split = decode_frames::<Message>(pieces(stream, spread), MAX_CONTROL_FRAME);
    assert_eq!(whole, split, "the decoded messages depend on how the input was cut");
    // Taking payloads and decoding them gives the same messages.
    let payloads = decode_payloads([stream], MAX_CONTROL_FRAME);
    for (payload, msg) in payloads.messages.iter().zip(&whole.messages) {
        assert_eq!(frame::decode_payload::<Message>(payload).as_ref(), Ok(msg));
    }
    assert!(payloads.messages.len() >= whole.messages.len());
    for msg in &whole.messages {
        round_trip(msg);
        check_message(msg);
    }
}

/// The bootstrap: the client's [`HelloScanner`] fed in pieces (first byte: piece sizes,
/// as in [`frames`]), then the bytes after [`MAGIC`] (or all of them when there is no
/// magic: the server reads the client's hello without scanning) read as the client reads
/// the server's hello ([`Decoder::next_payload`], [`decode_server_hello`]), and as the
/// server reads the client's hello and transport choice (small frames, [`decode_hello`]).
pub fn hello(data: &[u8]) {
    let Some((&spread, stream)) = data.split_first() else { return };
    let first_magic = stream.windows(MAGIC.len()).position(|w| w == MAGIC);
    let mut scanner = HelloScanner::default();
    let mut fed = 0;
    let mut found = false;
    for piece in pieces(stream, spread) {
        fed += piece.len();
        match scanner.feed(piece) {
            Ok(Scan::NeedMore) => {
                assert_eq!(scanner.seen(), &stream[..fed], "the scanner lost bytes");
                assert!(first_magic.is_none_or(|at| at + MAGIC.len() > fed), "magic missed");
            }
            Ok(Scan::Found { noise, rest }) => {
                let at = first_magic.expect("the scanner found a magic that is not there");
                assert_eq!(noise, &stream[..at], "noise is everything before the first magic");
                assert_eq!(rest, &stream[at + MAGIC.len()..fed], "rest is what follows it");
                found = true;
                break;
            }
            Err(e) => {
                assert_eq!(e, ProtoError::NoHello(MAX_NOISE));
                assert!(fed > MAX_NOISE, "gave up on the hello before the noise limit");
                return;
            }
        }
    }
    assert_eq!(found, first_magic.is_some(), "the scanner missed the magic");
    let after = match first_magic {
        Some(at) => &stream[at + MAGIC.len()..],
        None => stream,
    };

    // The client reads the server's hello: the first whole frame.
    let whole = decode_payloads([after], HELLO_FRAME_LIMIT);
    let split = decode_payloads(pieces(after, spread), HELLO_FRAME_LIMIT);
    assert_eq!(whole, split, "the hello frames depend on how the input was cut");
    if let Some(payload) = whole.messages.first() {
        check_server_hello(payload);
    }
    // Then what the server may still say on the ssh channel (a policed note, its
    // summary for `--report`).
    for payload in whole.messages.iter().skip(1) {
        if let Ok(note) = decode_hello::<ServerNote>(payload) {
            round_trip_hello(&note, decode_hello::<ServerNote>);
        }
    }

    // The server reads the client's hello, then its transport choice.
    let mut input = after;
    let Some(payload) = read_small_frame(&mut input) else { return };
    let Ok(client) = decode_hello::<ClientHello>(payload) else { return };
    round_trip_hello(&client, decode_hello::<ClientHello>);
    check_negotiation(client.negotiate(), client.versions());
    let Some(payload) = read_small_frame(&mut input) else { return };
    if let Ok(choice) = decode_hello::<TransportChoice>(payload) {
        round_trip_hello(&choice, decode_hello::<TransportChoice>);
    }
    // Then the client's notes (pings) on the ssh channel, as `soku serve` reads them.
    for payload in decode_payloads([input], MAX_CLIENT_NOTE).messages {
        if let Ok(note) = decode_hello::<ClientNote>(&payload) {
            round_trip_hello(&note, decode_hello::<ClientNote>);
        }
    }
}

fn check_server_hello(payload: &[u8]) {
    match decode_server_hello(payload) {
        Ok(server) => {
            round_trip_hello(&server, decode_server_hello);
            check_negotiation(server.negotiate(), server.versions());
        }
        // A protocol 2 hello is refused with both sides' versions; anything else that
        // does not decode is malformed.
        Err(e) => {
            assert!(
                matches!(e, ProtoError::Malformed(_) | ProtoError::VersionMismatch { .. }),
                "{e:?}"
            );
        }
    }
}

/// A hello re-encoded decodes to itself, also with bytes appended (a newer peer's fields).
fn round_trip_hello<T: Serialize + PartialEq + Debug>(
    hello: &T,
    decode: fn(&[u8]) -> Result<T, ProtoError>,
) {
    let mut payload = postcard::to_stdvec(hello).expect("a decoded hello encodes again");
    assert_eq!(decode(&payload).as_ref(), Ok(hello), "the hello changed on the wire");
    payload.extend_from_slice(&[1, 2, 3]);
    assert_eq!(decode(&payload).as_ref(), Ok(hello), "appended fields changed the hello");
}

/// One control message payload (no prefix): [`frame::decode_payload`], then re-encoding
/// and the checks a receiver makes on what the message carries (paths, chunk sizes).
pub fn control_message(data: &[u8]) {
    let Ok(msg) = frame::decode_payload::<Message>(data) else { return };
    round_trip(&msg);
    check_message(&msg);
}

/// A chunk header as a QUIC data stream carries it: prefix checked against
/// [`DATA_HEADER_LIMIT`], payload decoded as [`ChunkHeader`]. The 12 bytes after the
/// frame, if any, are a file size (u64, little-endian) and a chunk size (u32) for a
/// [`ChunkPlan`], whose span for the header's index is checked against plain arithmetic.
pub fn chunk_header(data: &[u8]) {
    let Some((prefix, rest)) = data.split_first_chunk::<PREFIX_LEN>() else { return };
    let len = match frame::payload_len(*prefix, DATA_HEADER_LIMIT) {
        Ok(len) => len,
        Err(e) => {
            let announced = u32::from_be_bytes(*prefix) as usize;
            assert_eq!(e, ProtoError::FrameTooLarge { len: announced, limit: DATA_HEADER_LIMIT });
            return;
        }
    };
    assert!(len <= DATA_HEADER_LIMIT);
    let Some(payload) = rest.get(..len) else { return };
    let Ok(header) = frame::decode_payload::<ChunkHeader>(payload) else { return };
    let wire = frame::to_vec(&header).expect("a decoded header encodes again");
    assert!(wire.len() - PREFIX_LEN <= DATA_HEADER_LIMIT, "a header outgrows its frame");
    round_trip(&header);
    check_chunk_header(&header);
    let mut tail = Input::new(&rest[len..]);
    let (size, chunk_size) = (tail.u64(), tail.u32());
    check_span(size, chunk_size, header.index);
    check_span(size, chunk_size, header.index.wrapping_sub(1));
    if let Some(last) = ChunkPlan::new(size, chunk_size).count().checked_sub(1) {
        check_span(size, chunk_size, u32::try_from(last).unwrap_or(u32::MAX));
    }
}

/// Reads one frame's payload as the server reads small frames: prefix, limit, payload.
fn read_small_frame<'a>(input: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (prefix, rest) = input.split_first_chunk::<PREFIX_LEN>()?;
    let len = frame::payload_len(*prefix, SMALL_FRAME_LIMIT).ok()?;
    let payload = rest.get(..len)?;
    *input = &rest[len..];
    Some(payload)
}

fn check_message(msg: &Message) {
    match msg {
        Message::Entry(entry) => check_wire_path(entry.path()),
        Message::Request(request) => {
            let size = request.flags.chunk_size;
            let in_range = (MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE).contains(&size);
            assert_eq!(check_chunk_size(size).is_ok(), in_range);
        }
        Message::Chunk(header) => check_chunk_header(header),
        _ => {}
    }
}

/// A wire path from a peer: valid exactly when every component is safe, and then it maps
/// under the target, one normal component per wire component, never above it.
pub fn check_wire_path(path: &WirePath) {
    let safe = is_safe_path(path);
    assert_eq!(path.validate().is_ok(), safe, "validation disagrees on {path:?}");
    for target in [Target::IntoDir(ROOT.into()), Target::AsName(Path::new(ROOT).join("new"))] {
        let local = target.local_path(path);
        assert_eq!(local.is_ok(), safe, "{target:?} maps the unsafe {path:?}");
        if let Ok(local) = local {
            assert_eq!(local, expected_local(&target, path));
        }
    }
}

fn check_chunk_header(header: &ChunkHeader) {
    for compressed in [false, true] {
        let limit = max_wire_len(header.wire_len, compressed);
        assert!(limit >= header.wire_len, "compression limit below the plain length");
        if !compressed {
            assert_eq!(limit, header.wire_len);
        }
    }
}

/// [`ChunkPlan::span`] against plain 128-bit arithmetic.
fn check_span(size: u64, chunk_size: u32, index: u32) {
    let plan = ChunkPlan::new(size, chunk_size);
    let cs = u128::from(chunk_size.max(1));
    let count = u128::from(size).div_ceil(cs);
    assert_eq!(u128::from(plan.count()), count);
    let index_ = u128::from(index);
    match plan.span(index) {
        Some((offset, len)) => {
            assert!(index_ < count, "span {index} of {count} chunks");
            assert_eq!(u128::from(offset), index_ * cs);
            let end = u128::from(offset) + u128::from(len);
            assert!(len >= 1 && u128::from(len) <= cs);
            assert!(end <= u128::from(size));
            if index_ + 1 == count {
                assert_eq!(end, u128::from(size), "the last chunk ends the file");
            } else {
                assert_eq!(u128::from(len), cs, "only the last chunk is short");
            }
        }
        None => assert!(index_ >= count, "no span for chunk {index} of {count}"),
    }
}

/// What negotiation must pick: the newest version both this build and the peer speak,
/// or a mismatch naming the peer's range.
fn check_negotiation(result: Result<u16, ProtoError>, remote: std::ops::RangeInclusive<u16>) {
    let common = PROTOCOL_VERSIONS.rev().find(|v| remote.contains(v));
    match result {
        Ok(version) => assert_eq!(Some(version), common),
        Err(ProtoError::VersionMismatch { remote_min, remote_max, .. }) => {
            assert_eq!(common, None, "negotiation missed a common version");
            assert_eq!((remote_min, remote_max), (*remote.start(), *remote.end()));
        }
        Err(e) => panic!("negotiation failed with {e:?}"),
    }
}
