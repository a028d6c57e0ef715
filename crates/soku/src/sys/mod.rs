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

/// Open flags for a descriptor used only to look names up beneath it, as the engine
/// opens them (`O_PATH` on Linux, read-only elsewhere).
pub(crate) use soku_engine::fsops::LOOKUP;
