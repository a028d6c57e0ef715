//! What the binary asks of the operating system beyond the engine's
//! (`soku_engine`'s own `sys`), one function per need. Linux (`linux.rs`) has every
//! mechanism; other Unix systems (`other.rs`: macOS, the BSDs) get a plain path or a
//! stated absence, listed in the README's platforms table.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;

#[cfg(not(target_os = "linux"))]
mod other;
#[cfg(not(target_os = "linux"))]
pub(crate) use other::*;

/// What the engine's `sys` already has: the lookup flags (`O_PATH` on Linux,
/// read-only elsewhere), a mode to create with, and the page-cache advice.
pub(crate) use soku_engine::sys::{drop_cached, mode, LOOKUP};
