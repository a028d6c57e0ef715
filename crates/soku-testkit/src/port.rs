//! Ports for servers a test starts where the code under test cannot bind port 0.

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
///
/// Another process may take it before the caller binds it: prefer binding port 0
/// directly where the code under test allows it, and retry where it does not.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr of a bound listener").port()
}
