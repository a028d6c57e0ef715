//! `soku proxy --pass-fd HOST PORT`: ssh's connection, made with `TCP_NODELAY` and a
//! short delayed-ACK timer (crate::delack) and handed to ssh (`ProxyUseFdpass=yes`,
//! ssh_config(5)), so that no relay stays in the path.
//!
//! OpenSSH sets `TCP_NODELAY` only for interactive sessions (a tty or X11). Without it,
//! Nagle's algorithm (RFC 896) holds a small segment while an earlier one is
//! unacknowledged, and a login writes several small messages back to back (`NEWKEYS`
//! then the service request; after the channel opens, the session's requests): each
//! waits for the peer's ACK, often a delayed one (RFC 1122 4.2.3.2), a round trip or
//! more per login on a long path. A socket with `TCP_NODELAY` already set keeps it when
//! ssh takes it over; nothing else about the connection changes: ssh still does all of
//! the protocol, the host key check under the host name it was given, and its
//! keep-alives.

use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use crate::sock::{self, Target};
use crate::RelayError;
use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};

/// Which addresses of the host to try: ssh's `AddressFamily` (`-4`, `-6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Family {
    /// Every address, in the resolver's order.
    #[default]
    Any,
    /// IPv4 only.
    Inet,
    /// IPv6 only.
    Inet6,
}

impl Family {
    fn admits(self, addr: &SocketAddr) -> bool {
        match self {
            Family::Any => true,
            Family::Inet => addr.is_ipv4(),
            Family::Inet6 => addr.is_ipv6(),
        }
    }
}

/// How to dial, as ssh would have: its `AddressFamily` and `ConnectTimeout`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DialOptions {
    /// Which addresses to try.
    pub family: Family,
    /// Per address, as ssh's `ConnectTimeout`; none: the kernel's own.
    pub timeout: Option<Duration>,
}

/// Connects to `host:port` (each address in turn, as ssh does) with `TCP_NODELAY` and
/// passes the connected socket to ssh over stdout, which ssh made a Unix socket.
pub fn dial_and_pass(host: &str, port: u16, options: DialOptions) -> Result<(), RelayError> {
    let stream = dial(&Target { host: host.to_string(), port }, options)?;
    pass_fd(std::io::stdout().as_fd(), stream.as_fd())
        .map_err(|e| RelayError::io("passing the connection to ssh (ProxyUseFdpass)", e))
}

/// Connects to the first address of `target` that accepts, with `TCP_NODELAY`.
pub fn dial(target: &Target, options: DialOptions) -> Result<TcpStream, RelayError> {
    let addrs: Vec<SocketAddr> =
        target.resolve()?.into_iter().filter(|a| options.family.admits(a)).collect();
    if addrs.is_empty() {
        let source = std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no address of the family asked for ({:?})", options.family),
        );
        return Err(RelayError::Resolve { host: target.host.clone(), source });
    }
    // ssh's own buffers, as ssh would have had them: only the waits go.
    sock::connect_first(target, addrs, options.timeout, sock::no_waits)
}

/// Sends `fd` over the Unix socket `channel` with one byte of data, as OpenSSH's
/// `mm_receive_fd` expects it.
fn pass_fd(channel: BorrowedFd<'_>, fd: BorrowedFd<'_>) -> std::io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [fd];
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::Error::other("no room for the descriptor"));
    }
    sendmsg(channel, &[IoSlice::new(&[0])], &mut control, SendFlags::empty())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delack;
    use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    use std::io::{IoSliceMut, Read, Write};
    use std::net::TcpListener;
    use std::os::unix::net::UnixStream;

    /// The socket arrives at the other end of the Unix socket connected, with
    /// `TCP_NODELAY`, and carries bytes to the listener.
    #[test]
    fn the_dialed_socket_is_passed_connected_and_without_nagle() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let target = Target { host: "127.0.0.1".into(), port };
        let stream = dial(&target, DialOptions::default()).unwrap();
        let (ours, theirs) = UnixStream::pair().unwrap();
        pass_fd(ours.as_fd(), stream.as_fd()).unwrap();
        drop(stream);

        let mut byte = [0u8; 1];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let got =
            recvmsg(&theirs, &mut [IoSliceMut::new(&mut byte)], &mut control, RecvFlags::empty())
                .unwrap();
        assert_eq!(got.bytes, 1);
        let mut passed = None;
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(mut fds) = message {
                passed = fds.next();
            }
        }
        let mut passed = TcpStream::from(passed.expect("a descriptor came with the byte"));
        assert!(passed.nodelay().unwrap(), "TCP_NODELAY must survive the hand-over");
        let fresh = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(
            delack::delayed_ack_cap(passed.as_fd()),
            delack::cap_delayed_acks(fresh.as_fd()),
            "the delayed-ACK cap must be set as low as this kernel allows and survive the hand-over"
        );
        let (mut accepted, _) = listener.accept().unwrap();
        passed.write_all(b"SSH-2.0-x\r\n").unwrap();
        let mut line = [0u8; 11];
        accepted.read_exact(&mut line).unwrap();
        assert_eq!(&line, b"SSH-2.0-x\r\n");
    }

    #[test]
    fn a_family_without_addresses_is_a_clear_error() {
        let target = Target { host: "127.0.0.1".into(), port: 9 };
        let options = DialOptions { family: Family::Inet6, timeout: None };
        let err = dial(&target, options).unwrap_err().to_string();
        assert!(err.contains("127.0.0.1") && err.contains("family"), "{err}");
    }

    #[test]
    fn a_refused_connection_names_the_target() {
        // Bind and drop a listener: its port is very likely closed now.
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let target = Target { host: "127.0.0.1".into(), port };
        let options = DialOptions { family: Family::Any, timeout: Some(Duration::from_secs(5)) };
        let err = dial(&target, options).unwrap_err().to_string();
        assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    }
}
