//! The sans-IO transfer protocol of soku: no sockets, no clock, no file system.
//!
//! A copy is a conversation between a *sender* (reads sources) and a *receiver* (writes
//! the target). Which of the two is the ssh client depends on the direction of the copy;
//! the protocol does not care.
//!
//! 1. Bootstrap over the ssh channel ([`hello`]): the client writes [`MAGIC`] and a
//!    [`hello::ClientHello`]; the server answers with [`MAGIC`] (possibly after login
//!    noise, which the client skips) and a [`hello::ServerHello`] carrying its UDP port
//!    and certificate fingerprint. The client then says which transport carries the data.
//! 2. On the control channel the client sends a [`message::Request`]; the sender then
//!    streams the manifest ([`manifest::Entry`]) followed by
//!    [`message::Message::EndOfManifest`].
//! 3. File data moves in chunks ([`chunk`]): each chunk has a header with its BLAKE3 hash;
//!    the receiver verifies every chunk on arrival and the file's root hash (BLAKE3 over
//!    the chunk hashes) once all chunks are in, and only then renames the file into place.
//! 4. The receiver reports verified bytes and per-file results, and ends with
//!    [`message::Message::Finished`].
//!
//! Everything a peer sends is untrusted: every decoder has a size limit, every path is
//! checked component by component ([`path`]), the receiver state machine
//! ([`receive::Receiver`]) refuses chunks that do not fit the manifest, and the sender
//! state machine ([`send::Sender`]) refuses reports that do not fit what it sent.
//!
//! The two state machines hold all of the protocol's rules, so the engine that does the
//! I/O (or a test's plain loop, see `send/tests/plain_loop.rs`) only moves bytes.
//!
//! # Layout
//! - [`frame`]: length-prefixed frames with a size limit, and a sans-IO decoder.
//! - [`hello`]: the bootstrap messages and the scanner that skips login noise.
//! - [`message`]: the control messages.
//! - [`manifest`]: file and directory entries and their metadata.
//! - [`chunk`]: chunk headers, the chunk plan of a file, hashing.
//! - [`name`]: names as bytes, UTF-8 or not: the wire's, the platform's, and how they are shown.
//! - [`path`]: wire paths, their validation, and where a received entry lands.
//! - [`receive`]: the receiver's state machine.
//! - [`send`]: the sender's state machine.
//! - [`sync`]: what `soku sync` adds to a copy: the quick check, filters, deletion.
//! - [`browse`]: the calls and answers of `soku sftp`'s session (listings, metadata).
//! - [`diagnose`]: what the server reports in `soku diagnose`.
//! - [`error`]: the one error type.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod browse;
pub mod chunk;
pub mod diagnose;
pub mod error;
pub mod frame;
/// Built for the fuzz targets (cargo-fuzz sets `--cfg fuzzing`) and this crate's own
/// tests, which replay the corpora: never part of a build that ships.
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzzing;
pub mod hello;
pub mod manifest;
pub mod message;
pub mod name;
pub mod path;
pub mod receive;
pub mod send;
pub mod sync;
pub mod windows_name;

pub use error::ProtoError;

/// Bytes that announce the start of soku's protocol on the ssh channel. The NUL byte
/// makes a collision with a login script's output practically impossible.
pub const MAGIC: &[u8] = b"\0SOKU-HELLO\n";

/// Protocol versions this build speaks, oldest first. Version negotiation picks the
/// highest version both sides speak. 11: `soku sftp`'s session
/// ([`message::Job::Browse`], [`browse`]); 10: `soku sync`
/// ([`message::Job::Sync`], [`message::Message::Skipped`], [`message::Message::Deleted`]); 9: a receiver out of space tells the sender what
/// it holds ([`message::Message::Unfinished`]); 8: names that are not UTF-8, as bytes
/// ([`name::BYTE_NAMES_SINCE_VERSION`]); 7: a kept server for the client's next
/// copies ([`hello::ClientHello::keep`]); 6: the receive preview ([`hello::ReceivePreview`],
/// [`hello::ServerNote::Holds`]); 5: TLS over TCP ([`hello::ServerHello`]'s
/// `tcp_port`, [`hello::TransportChoice::Tcp`]); 4: verified resume ([`message::CopyFlags::resume`],
/// [`message::Message::Held`]); 3: version ranges in both hellos; 2: the request carries
/// scp's `-l` limit. Versions before 5 are no longer spoken.
pub const PROTOCOL_VERSIONS: std::ops::RangeInclusive<u16> = 5..=11;
