//! soku-netem: a WAN path emulator for Linux hosts without the `netem` qdisc.
//!
//! Two network namespaces each get a TUN device; this process owns both devices and
//! forwards IP packets between them, applying per direction a one-way delay, jitter,
//! random and Gilbert-Elliott loss, reordering, a rate limit with a drop-tail queue,
//! and an MTU. Everything runs in-process on one thread per direction.
//!
//! ```no_run
//! use std::time::Duration;
//! use soku_netem::{Path, PathSpec};
//! let spec = PathSpec::symmetric(Duration::from_millis(50), 0.01, Some(100_000_000));
//! let path = Path::up("demo", spec)?;
//! let status = path.command_b("iperf3").arg("-s").arg("-1").status();
//! println!("{:?}", path.stats());
//! # Ok::<(), soku_netem::NetemError>(())
//! ```
//!
//! # Layout
//! - [`spec`]: what a path looks like ([`LinkSpec`], [`PathSpec`]) and unit parsers.
//! - [`model`]: the per-direction link model, a pure state machine on a given clock.
//! - [`delay_line`]: the preallocated packet pool and the delivery-time queue.
//! - `forward`: the forwarding loop (one thread per direction).
//! - [`netns`]: namespaces: create, delete, run code or commands inside.
//! - `path`: [`Path`], which ties it all together and tears it down on drop.
//! - `sys`: the `unsafe` system calls, each with its SAFETY note.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod delay_line;
mod error;
mod forward;
pub mod model;
pub mod netns;
mod path;
mod rng;
pub mod spec;
mod sys;

pub use error::{NetemError, Result};
pub use forward::{DirStats, Faults};
pub use netns::{command_in, in_ns};
pub use path::{Path, PathStats, TUN_NAME, TUN_TXQUEUELEN};
pub use rng::Rng;
pub use spec::{
    parse_duration, parse_percent, parse_rate, parse_size, Gilbert, LinkSpec, PathSpec,
};
