//! What the bench's two programs share: `soku-bench` (`src/main.rs`), the whole
//! comparison, and `soku-floor` (`src/floor.rs`), what quinn costs with none of soku
//! around it.
//!
//! - [`proc`]: running a measured process with a timeout, and CPU time from `/proc`.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod proc;
