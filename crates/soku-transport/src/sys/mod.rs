//! What the transport asks of the operating system that not every system has, one file
//! per system: `linux.rs`, and `other.rs` for the rest (macOS, Windows), which says
//! plainly that the facility is absent.
//!
//! - **Per-socket TCP congestion control** (`TCP_CONGESTION`, Linux): the TCP transport
//!   asks for BBR on each connection; elsewhere the system's own controller runs (CUBIC
//!   on macOS and Windows), and the [`crate::TcpReport`] names it "the system's".
//! - **TCP chronographs** (`tcp_info`'s busy and limited times, Linux 4.10+): what
//!   [`crate::Gauged`] samples. Elsewhere there are none, and the striped link, given no
//!   gauge readings, uses every connection from the start.
//! - **TCP advice**: the buffer sysctls and `modprobe tcp_bbr` a copy suggests are
//!   Linux's; elsewhere it suggests nothing.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(not(target_os = "linux"))]
mod other;

#[cfg(target_os = "linux")]
pub(crate) use linux::{chronographs, congestion, set_congestion, TCP_ADVICE_APPLIES};
#[cfg(not(target_os = "linux"))]
pub(crate) use other::{chronographs, congestion, set_congestion, TCP_ADVICE_APPLIES};

/// A TCP socket whose kernel chronographs can be read: (time with data to send, the
/// part of it a buffer held back), in microseconds.
pub trait Chronographs {
    /// The socket's chronographs now, or why there are none.
    fn chronographs(&self) -> std::io::Result<(u64, u64)>;
}

#[cfg(unix)]
impl<S: std::os::fd::AsRawFd> Chronographs for S {
    fn chronographs(&self) -> std::io::Result<(u64, u64)> {
        chronographs(self.as_raw_fd())
    }
}

#[cfg(windows)]
impl<S: std::os::windows::io::AsRawSocket> Chronographs for S {
    fn chronographs(&self) -> std::io::Result<(u64, u64)> {
        chronographs(self.as_raw_socket())
    }
}
