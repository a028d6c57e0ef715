//! Linux: per-socket congestion control through `TCP_CONGESTION` and the chronographs
//! of `TCP_INFO` (tcp(7)).

use std::io;
use std::os::fd::RawFd;

use socket2::SockRef;

/// The TCP advice soku gives (`net.ipv4.tcp_*mem`, `modprobe tcp_bbr`) is Linux's.
pub(crate) const TCP_ADVICE_APPLIES: bool = true;

/// Asks for the congestion controller `name` on `socket`.
pub(crate) fn set_congestion(socket: &SockRef<'_>, name: &str) -> std::io::Result<()> {
    socket.set_tcp_congestion(name.as_bytes())
}

/// The congestion controller `socket` runs.
pub(crate) fn congestion(socket: &SockRef<'_>) -> std::io::Result<String> {
    let name = socket.tcp_congestion()?;
    Ok(String::from_utf8_lossy(&name).trim_end_matches('\0').to_string())
}

/// (busy, held back by the send buffer or the receive window), in microseconds, of the
/// TCP socket `fd` (open for the whole call: it belongs to a stream the caller holds).
#[allow(unsafe_code)]
pub(crate) fn chronographs(fd: RawFd) -> io::Result<(u64, u64)> {
    // SAFETY: `tcp_info` is plain data, for which all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`, which is that large;
    // on a descriptor that is not a TCP socket it fails and writes nothing.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // A kernel older than the chronographs returns a shorter struct: no figures.
    let needed = std::mem::offset_of!(libc::tcp_info, tcpi_sndbuf_limited) + 8;
    if (len as usize) < needed {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "no TCP chronographs"));
    }
    Ok((info.tcpi_busy_time, info.tcpi_rwnd_limited.saturating_add(info.tcpi_sndbuf_limited)))
}
