//! The real libc functions (`dlsym(RTLD_NEXT, ...)`), socket-address conversion and
//! small socket helpers.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, c_void, sockaddr, socklen_t};

pub(crate) type ConnectFn = unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int;
pub(crate) type NameFn = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
pub(crate) type SetsockoptFn =
    unsafe extern "C" fn(c_int, c_int, c_int, *const c_void, socklen_t) -> c_int;
pub(crate) type CloseFn = unsafe extern "C" fn(c_int) -> c_int;
pub(crate) type GetsockoptFn =
    unsafe extern "C" fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int;

/// Looks `name` up in the libraries after this one, once; 0 if absent.
fn next_symbol(cache: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let p = cache.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name has no preconditions.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    cache.store(p, Ordering::Relaxed);
    p
}

macro_rules! real {
    ($fn_name:ident, $sym:literal, $ty:ty) => {
        /// The next definition of the symbol (libc's).
        pub(crate) fn $fn_name() -> Option<$ty> {
            static CACHE: AtomicUsize = AtomicUsize::new(0);
            match next_symbol(&CACHE, $sym) {
                0 => None,
                // SAFETY: the symbol is libc's function of exactly this signature.
                p => Some(unsafe { std::mem::transmute::<usize, $ty>(p) }),
            }
        }
    };
}

real!(connect, c"connect", ConnectFn);
real!(getpeername, c"getpeername", NameFn);
real!(getsockname, c"getsockname", NameFn);
real!(setsockopt, c"setsockopt", SetsockoptFn);
real!(getsockopt, c"getsockopt", GetsockoptFn);
real!(real_close, c"close", CloseFn);

/// Closes a descriptor of ours with libc's close, not our hook.
pub(crate) fn close(fd: c_int) {
    match real_close() {
        // SAFETY: closing a descriptor this library owns.
        Some(close) => unsafe {
            close(fd);
        },
        // SAFETY: as above, through the system call.
        None => unsafe {
            libc::syscall(libc::SYS_close, fd);
        },
    }
}

/// Sets `errno`.
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// The current `errno`.
pub(crate) fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Reads an AF_INET/AF_INET6 address; `None` for other families or short lengths.
///
/// # Safety
/// `addr` must be null or point to `len` readable bytes.
pub(crate) unsafe fn read_addr(addr: *const sockaddr, len: socklen_t) -> Option<SocketAddr> {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // Only the family: the caller vouches for `len` bytes, and a whole `sockaddr` (16)
    // may be more than that. SAFETY: the family field lies within the `len` bytes
    // (checked above); unaligned reads because callers may pass any buffer.
    let family = unsafe {
        let at = addr.cast::<u8>().add(std::mem::offset_of!(sockaddr, sa_family));
        std::ptr::read_unaligned(at.cast::<libc::sa_family_t>())
    } as c_int;
    match family {
        libc::AF_INET if len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: length checked for a sockaddr_in.
            let a = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in>()) };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: length checked for a sockaddr_in6.
            let a = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in6>()) };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            let port = u16::from_be(a.sin6_port);
            Some(SocketAddr::V6(SocketAddrV6::new(ip, port, a.sin6_flowinfo, a.sin6_scope_id)))
        }
        _ => None,
    }
}

/// A copied raw socket address (what getpeername/getsockname return for hooked fds).
#[derive(Clone, Copy)]
pub(crate) struct RawAddr {
    pub storage: libc::sockaddr_storage,
    pub len: socklen_t,
}

impl RawAddr {
    /// Copies `len` bytes of `addr` (at most a sockaddr_storage).
    ///
    /// # Safety
    /// `addr` must point to `len` readable bytes.
    pub(crate) unsafe fn copy(addr: *const sockaddr, len: socklen_t) -> RawAddr {
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let n = (len as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
        // SAFETY: the caller guarantees `len` readable bytes; n fits the storage.
        unsafe {
            std::ptr::copy_nonoverlapping(addr.cast::<u8>(), (&raw mut storage).cast::<u8>(), n)
        };
        RawAddr { storage, len: n as socklen_t }
    }

    /// getsockname(2)'s output convention: copies at most `*len` bytes, sets `*len`
    /// to the full length.
    ///
    /// # Safety
    /// `out`/`len` as for getpeername(2).
    pub(crate) unsafe fn write_to(&self, out: *mut sockaddr, len: *mut socklen_t) -> c_int {
        if out.is_null() || len.is_null() {
            set_errno(libc::EFAULT);
            return -1;
        }
        // SAFETY: len is a valid pointer (caller's contract), out has *len bytes.
        unsafe {
            let n = (*len as usize).min(self.len as usize);
            std::ptr::copy_nonoverlapping((&raw const self.storage).cast::<u8>(), out.cast(), n);
            *len = self.len;
        }
        0
    }
}

/// (st_dev, st_ino) of an open fd: identifies the socket behind a descriptor.
pub(crate) fn identity(fd: c_int) -> Option<(u64, u64)> {
    // SAFETY: all-zero is a valid stat; fstat writes it fully on success.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

/// The socket's type (SOCK_STREAM...) via the real getsockopt.
pub(crate) fn socket_type(fd: c_int) -> Option<c_int> {
    get_int(fd, libc::SOL_SOCKET, libc::SO_TYPE)
}

/// Sets an int socket option with the real setsockopt; errors are ignored.
pub(crate) fn set_int(fd: c_int, level: c_int, name: c_int, value: c_int) {
    try_set_int(fd, level, name, value);
}

/// Sets an int socket option with the real setsockopt; whether the kernel took it.
pub(crate) fn try_set_int(fd: c_int, level: c_int, name: c_int, value: c_int) -> bool {
    let Some(real) = setsockopt() else { return false };
    // SAFETY: a valid pointer to an int of the declared size.
    let rc = unsafe {
        real(fd, level, name, (&raw const value).cast(), std::mem::size_of::<c_int>() as _)
    };
    rc == 0
}

/// An int socket option via the real getsockopt.
pub(crate) fn get_int(fd: c_int, level: c_int, name: c_int) -> Option<c_int> {
    let real = getsockopt()?;
    let mut value: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: value/len are valid out-pointers of the declared size.
    let rc = unsafe { real(fd, level, name, (&raw mut value).cast(), &mut len) };
    (rc == 0).then_some(value)
}

/// `{w,r}mem_max` (at most 16 MiB) when it is at least the TCP autotuning ceiling;
/// as in soku-relay, a smaller explicit size would lower the ceiling instead.
pub(crate) fn auto_size(core: &str, tcp: &str) -> Option<usize> {
    let read = |path: String| std::fs::read_to_string(path).ok();
    let core_max: usize = read(format!("/proc/sys/net/core/{core}"))?.trim().parse().ok()?;
    let tcp_max: usize =
        read(format!("/proc/sys/net/ipv4/{tcp}"))?.split_whitespace().nth(2)?.parse().ok()?;
    (core_max >= tcp_max).then_some(core_max.min(16 << 20))
}

/// Whether a socket is connected (the real getpeername succeeds): `SO_ERROR` is 0
/// also while a connect is still in progress.
pub(crate) fn is_connected(fd: c_int) -> bool {
    let Some(real) = getpeername() else { return false };
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
    // SAFETY: storage/len are valid out-pointers of the declared size.
    unsafe { real(fd, (&raw mut storage).cast(), &mut len) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pages, the second unreadable: bytes placed at the end of the first are
    /// followed by a page whose first read faults.
    struct Guarded {
        base: *mut c_void,
        page: usize,
    }

    impl Guarded {
        fn new() -> Guarded {
            // SAFETY: sysconf has no preconditions.
            let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).expect("page");
            // SAFETY: a fresh private anonymous mapping, checked below.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    2 * page,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(base, libc::MAP_FAILED);
            // SAFETY: the second page belongs to the mapping just made.
            let rc = unsafe {
                libc::mprotect(base.cast::<u8>().add(page).cast(), page, libc::PROT_NONE)
            };
            assert_eq!(rc, 0);
            Guarded { base, page }
        }

        /// `bytes` copied to end exactly where the unreadable page begins.
        fn at_the_edge(&self, bytes: &[u8]) -> *const sockaddr {
            // SAFETY: the copy ends at the end of the first (writable) page.
            unsafe {
                let at = self.base.cast::<u8>().add(self.page - bytes.len());
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, bytes.len());
                at.cast()
            }
        }
    }

    impl Drop for Guarded {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`, unmapped once.
            unsafe { libc::munmap(self.base, 2 * self.page) };
        }
    }

    /// Catches: reading a whole 16-byte `sockaddr` to learn the family when the caller
    /// vouched for fewer bytes (the read past them faults here).
    #[test]
    fn only_the_family_is_read_before_the_length_is_known() {
        let guarded = Guarded::new();
        let family = (libc::AF_INET as libc::sa_family_t).to_ne_bytes();
        let addr = guarded.at_the_edge(&family);
        // SAFETY: `addr` points to 2 readable bytes.
        assert_eq!(unsafe { read_addr(addr, 2) }, None);
        // An IPv6 family with the length of an IPv4 address: refused before the read.
        let mut short6 = [0u8; std::mem::size_of::<libc::sockaddr_in>()];
        short6[..2].copy_from_slice(&(libc::AF_INET6 as libc::sa_family_t).to_ne_bytes());
        let addr = guarded.at_the_edge(&short6);
        // SAFETY: `addr` points to `short6.len()` readable bytes.
        assert_eq!(unsafe { read_addr(addr, short6.len() as socklen_t) }, None);
        // A whole IPv4 address at the edge is read.
        // SAFETY: all-zero is a valid sockaddr_in.
        let mut v4: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        v4.sin_family = libc::AF_INET as libc::sa_family_t;
        v4.sin_port = 4242u16.to_be();
        v4.sin_addr.s_addr = u32::from(Ipv4Addr::LOCALHOST).to_be();
        // SAFETY: a plain-old-data struct seen as its bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts((&raw const v4).cast::<u8>(), std::mem::size_of_val(&v4))
        };
        let addr = guarded.at_the_edge(bytes);
        // SAFETY: `addr` points to `bytes.len()` readable bytes.
        let read = unsafe { read_addr(addr, bytes.len() as socklen_t) };
        assert_eq!(read, Some(SocketAddr::from((Ipv4Addr::LOCALHOST, 4242))));
    }
}
