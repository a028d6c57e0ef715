//! soku's transfer engine: the sender and the receiver of a copy, driven over one
//! data-path seam ([`link`]) by the sans-IO rules of `soku-proto`.
//!
//! The binary sets up a session (ssh, hellos, QUIC or the ssh channel), wraps what it
//! got in a [`link::Link`] and calls [`run`] with this side's [`Role`]; the server does
//! the same with the role the client's request gives it. Everything the user should see
//! leaves as typed [`events`]; nothing here prints.
//!
//! # Layout
//! - [`role`]: the one entry point, [`run`]; [`options`]: the options both roles share
//!   and the outcome they report.
//! - [`link`]: the data-path seam and its implementations (QUIC, an ordered byte stream,
//!   an in-memory pair for tests).
//! - [`send`] and [`receive`]: the two roles, each a loop that owns its tasks;
//!   [`bridge`]: a copy between two other hosts passed from one link to the other.
//! - [`walk`] and [`ahead`]: turning sources into manifest entries, and hashing them
//!   while ssh logs in.
//! - [`codec`], [`compress_policy`], [`throttle`]: a chunk's bytes on the way out and in;
//!   [`page_buf`]: chunk buffers placed for direct I/O and used again;
//!   [`source_file`]: reading a source's chunks from the page cache or from the disk;
//!   `source_open.rs`: opening a directory's files from that directory;
//!   `read_at.rs`: positional reads into a reused buffer;
//!   [`direct_io`]: where direct I/O applies.
//! - [`limits`]: the descriptors a copy may keep open; [`filter`]: `soku sync`'s include
//!   and exclude rules.
//! - [`fsops`]: temporary files, safe directory creation, rename into place;
//!   `temp_name.rs`: the names files are received under;
//!   [`partial`]: what a resuming receiver already holds.
//! - [`sync_walk`], [`sync_target`] and the receiver's `sync.rs`: what `soku sync` adds
//!   (rsync's reading of the sources, its target directory, the quick check, delete).
//! - [`events`]: what a copy reports; [`error`]: what can end it; [`failure`]: file-system
//!   failures in words a person can act on; `mutex.rs`: locks a panic does not poison.
//!
//! Each file imports only files below it: `scripts/import-circles.py` finds a circle.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod ahead;
pub mod bridge;
pub mod codec;
pub mod compress_policy;
pub mod direct_io;
pub mod error;
pub mod events;
pub mod failure;
pub mod filter;
pub mod fsops;
pub mod limits;
pub mod link;
mod mutex;
pub mod options;
pub mod page_buf;
pub mod partial;
pub mod pipeline;
mod read_at;
pub mod receive;
pub mod role;
pub mod send;
mod sent_log;
mod small_steps;
pub mod source_file;
mod source_open;
pub mod sync_target;
pub mod sync_walk;
pub mod sys;
mod temp_name;
pub mod throttle;
pub mod walk;

pub use error::{EngineError, LinkError};
pub use options::{CopyOptions, Outcome};
pub use role::{run, Role};
