//! A short delayed-ACK timer for connections to sshd.
//!
//! sshd leaves Nagle's algorithm (RFC 896) on for sessions without a tty, so a small
//! message it writes while an earlier one is unacknowledged waits for our ACK. Linux
//! delays that ACK up to 40 ms once a connection looks interactive (RFC 1122 4.2.3.2,
//! `TCP_ATO_MIN`): after the login, sshd's `USERAUTH_SUCCESS` and the messages behind
//! it wait that long on every copy, measured 41-45 ms at 0 ms RTT. Since Linux 6.15 a
//! socket can cap the timer (`TCP_DELACK_MAX_US`, include/uapi/linux/tcp.h); the
//! kernel keeps it in jiffies and refuses less than two, so the smallest value each
//! tick rate accepts is tried in turn. Older kernels refuse the option: nothing
//! changes there. The cost is at most one more ACK per capped interval.

use std::os::fd::{AsRawFd, BorrowedFd};

/// `TCP_DELACK_MAX_US` from include/uapi/linux/tcp.h (Linux 6.15).
const TCP_DELACK_MAX_US: libc::c_int = 46;

/// Two jiffies at HZ 1000, 250 and 100: the smallest caps each tick rate accepts.
const CANDIDATES_US: [libc::c_int; 3] = [2_000, 8_000, 20_000];

/// Caps the socket's delayed-ACK timer as low as the kernel allows; returns the cap
/// set (µs, after the kernel's rounding), or `None` where the kernel has no such option.
pub fn cap_delayed_acks(fd: BorrowedFd<'_>) -> Option<u32> {
    CANDIDATES_US.iter().find_map(|&us| set(fd, us).then(|| delayed_ack_cap(fd)).flatten())
}

#[allow(unsafe_code)]
fn set(fd: BorrowedFd<'_>, us: libc::c_int) -> bool {
    // SAFETY: `fd` is a live descriptor for the borrow; the option value is a c_int
    // read by the kernel for the given length.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            TCP_DELACK_MAX_US,
            (&us as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// The socket's delayed-ACK cap (µs), `None` where the kernel has no such option.
#[allow(unsafe_code)]
pub fn delayed_ack_cap(fd: BorrowedFd<'_>) -> Option<u32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: as in `set`; the kernel writes at most `len` bytes into `value`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            TCP_DELACK_MAX_US,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(value as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// Where the kernel knows the option, the cap set is read back and is well under
    /// the 40 ms it replaces; elsewhere nothing is set and nothing fails.
    #[test]
    fn the_cap_is_set_where_the_kernel_has_it() {
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("a TCP socket");
        match cap_delayed_acks(sock.as_fd()) {
            Some(us) => assert!((2_000..=20_000).contains(&us), "cap {us} µs"),
            None => assert!(
                delayed_ack_cap(sock.as_fd()).is_none(),
                "the option exists but was not set"
            ),
        }
    }
}
