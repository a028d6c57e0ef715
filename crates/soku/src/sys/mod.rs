//! What the binary asks of the operating system beyond the engine's
//! (`soku_engine`'s own `sys`), one function per need.
//!
//! - `unix.rs`: what every Unix system does alike (user ids, private modes, signals,
//!   the CPU clocks).
//! - `linux.rs`: Linux's own mechanisms (descriptors of symlinks for `soku serve`'s
//!   browsing, transparent huge pages).
//! - `other.rs`: the other Unix systems (macOS, the BSDs): a plain path or a stated
//!   absence.
//! - `windows.rs`: the client's needs on Windows. `soku serve`, the relays and
//!   `soku sftp` are Unix-only (`crate::unix_only` says so to the user).
//!
//! What is missing where, and why, is the README's platforms table.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::*;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;

#[cfg(all(unix, not(target_os = "linux")))]
mod other;
#[cfg(all(unix, not(target_os = "linux")))]
pub(crate) use other::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;

/// The page-cache advice and positional I/O, from the engine's `sys`.
pub(crate) use soku_engine::sys::{drop_cached, read_at, read_exact_at, write_all_at};
/// What the engine's `sys` has for `soku serve`: the lookup flags (`O_PATH` on Linux,
/// read-only elsewhere) and a mode to create with.
#[cfg(unix)]
pub(crate) use soku_engine::sys::{mode, LOOKUP};
