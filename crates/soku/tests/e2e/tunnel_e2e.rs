//! `soku tunnel` end to end: a real sshd on loopback, the built binary as both ends of
//! the tunnel, and real rsync, scp and ssh running through it. Data is checked byte for
//! byte; half-close, refused destinations and a clean SIGTERM are checked too.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use soku_testkit::{assert_same_file, describe, Sshd};

use crate::common::{self, soku_bin};

/// How long a tunnel may take to come up.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a tunnel may take to exit after SIGTERM.
const EXIT_TIMEOUT: Duration = Duration::from_secs(15);

/// A running `soku tunnel`; sent SIGTERM (then killed) on drop.
struct Tunnel {
    child: Child,
    port: u16,
    stderr: Arc<Mutex<String>>,
}

impl Tunnel {
    /// Starts `soku tunnel -L 127.0.0.1:0 --to 127.0.0.1:<to_port> [extra] 127.0.0.1`
    /// through `sshd` and waits for its "listening on" line.
    fn start(sshd: &Sshd, to_port: u16, extra: &[&str]) -> Tunnel {
        let mut cmd = Command::new(soku_bin());
        cmd.arg("tunnel")
            .args(["-L", "127.0.0.1:0", "--to", &format!("127.0.0.1:{to_port}")])
            .args(extra)
            .args(sshd.scp_port_args())
            .args(sshd.ssh_args())
            .arg("--remote-soku")
            .arg(soku_bin())
            .arg(sshd.host())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start soku tunnel");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let pipe = child.stderr.take().expect("piped stderr");
        let log = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                // Log first, then signal: a reader woken by the port sees the line.
                {
                    let mut log = log.lock().expect("log lock");
                    log.push_str(&line);
                    log.push('\n');
                }
                if let Some(port) = listening_port(&line) {
                    let _ = tx.send(port);
                }
            }
        });
        match rx.recv_timeout(READY_TIMEOUT) {
            Ok(port) => Tunnel { child, port, stderr },
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "soku tunnel did not come up\n--- stderr ---\n{}\n--- sshd.log ---\n{}",
                    stderr.lock().expect("log lock"),
                    sshd.log()
                );
            }
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("log lock").clone()
    }

    /// Sends SIGTERM and waits; returns the exit status's code.
    fn stop(&mut self) -> Option<i32> {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = std::time::Instant::now() + EXIT_TIMEOUT;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// The port in `soku tunnel: listening on 127.0.0.1:PORT -> ...`.
fn listening_port(line: &str) -> Option<u16> {
    let rest = line.strip_prefix("soku tunnel: listening on ")?;
    let addr = rest.split_whitespace().next()?;
    addr.rsplit_once(':')?.1.parse().ok()
}

/// ssh options reaching the test sshd through the tunnel: the same key and known_hosts,
/// with the host key looked up under the test alias (the port differs).
fn through(sshd: &Sshd) -> Vec<String> {
    let mut args = sshd.ssh_args();
    args.extend(["-o".to_string(), format!("HostKeyAlias={}", soku_testkit::sshd::TEST_HOST)]);
    args
}

/// Runs `cmd` and expects success; shows the tunnel's stderr and the sshd log if not.
fn ok(cmd: &mut Command, tunnel: &Tunnel, sshd: &Sshd) {
    let out = soku_testkit::cmd::output(cmd);
    assert!(
        out.status.success(),
        "command through the tunnel failed\n{}\n--- tunnel stderr ---\n{}\n--- sshd.log ---\n{}",
        describe(cmd, &out),
        tunnel.stderr(),
        sshd.log()
    );
}

fn temp() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("soku-tunnel-").tempdir().expect("temp dir")
}

#[test]
fn rsync_through_the_tunnel() {
    let sshd = Sshd::start();
    let mut tunnel = Tunnel::start(&sshd, sshd.port(), &[]);
    let dir = temp();
    let src = dir.path().join("src.bin");
    std::fs::write(&src, common::data(8 << 20, 1)).expect("write");
    std::fs::create_dir(dir.path().join("dst")).expect("mkdir");
    let rsh = format!("ssh -p {} {}", tunnel.port, through(&sshd).join(" "));

    // Up through the tunnel, then back down under another name.
    let up = dir.path().join("dst/up.bin");
    let mut rsync = Command::new("rsync");
    rsync.args(["-a", "-e", &rsh]).arg(&src).arg(format!("127.0.0.1:{}", up.display()));
    ok(&mut rsync, &tunnel, &sshd);
    assert_same_file(&src, &up);
    let down = dir.path().join("down.bin");
    let mut rsync = Command::new("rsync");
    rsync.args(["-a", "-e", &rsh]).arg(format!("127.0.0.1:{}", up.display())).arg(&down);
    ok(&mut rsync, &tunnel, &sshd);
    assert_same_file(&src, &down);

    assert_eq!(tunnel.stop(), Some(0), "SIGTERM ends the tunnel cleanly\n{}", tunnel.stderr());
}

#[test]
fn scp_through_a_compressed_tunnel() {
    let sshd = Sshd::start();
    let tunnel = Tunnel::start(&sshd, sshd.port(), &["-C"]);
    assert!(tunnel.stderr().contains("(compressed)"), "{}", tunnel.stderr());
    let dir = temp();
    let src = dir.path().join("src.bin");
    std::fs::write(&src, common::data(4 << 20, 2)).expect("write");
    let up = dir.path().join("up.bin");
    let mut scp = Command::new("scp");
    scp.args(["-P", &tunnel.port.to_string()]).args(through(&sshd));
    scp.arg(&src).arg(format!("127.0.0.1:{}", up.display()));
    ok(&mut scp, &tunnel, &sshd);
    assert_same_file(&src, &up);
    let down = dir.path().join("down.bin");
    let mut scp = Command::new("scp");
    scp.args(["-P", &tunnel.port.to_string()]).args(through(&sshd));
    scp.arg(format!("127.0.0.1:{}", up.display())).arg(&down);
    ok(&mut scp, &tunnel, &sshd);
    assert_same_file(&src, &down);
}

/// A destination that reads to end of input, then answers with what it read reversed
/// and closes: the answer arrives only if the client's half-close crossed the tunnel,
/// and the client's read ends only if the server's close crossed back.
fn reverse_server() -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let handle = std::thread::spawn(move || {
        let (mut tcp, _) = listener.accept().expect("accept");
        let mut got = Vec::new();
        tcp.read_to_end(&mut got).expect("read to end");
        got.reverse();
        tcp.write_all(&got).expect("write back");
    });
    (port, handle)
}

fn half_close_round_trip(compress: bool) {
    let sshd = Sshd::start();
    let (port, server) = reverse_server();
    let extra: &[&str] = if compress { &["-C"] } else { &[] };
    let tunnel = Tunnel::start(&sshd, port, extra);
    let mut tcp = TcpStream::connect(("127.0.0.1", tunnel.port)).expect("connect to tunnel");
    tcp.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let mut sent = common::data(3 << 20, 3);
    sent.extend_from_slice(&[b'a'; 1 << 20]);
    tcp.write_all(&sent).expect("send");
    tcp.shutdown(std::net::Shutdown::Write).expect("half-close");
    let mut back = Vec::new();
    tcp.read_to_end(&mut back).unwrap_or_else(|e| panic!("read back: {e}\n{}", tunnel.stderr()));
    sent.reverse();
    assert!(back == sent, "got {} bytes back, sent {}", back.len(), sent.len());
    server.join().expect("server thread");
}

#[test]
fn half_close_crosses_the_tunnel() {
    half_close_round_trip(false);
}

#[test]
fn half_close_crosses_a_compressed_tunnel() {
    half_close_round_trip(true);
}

#[test]
fn refused_destination_resets_the_connection_and_the_tunnel_lives_on() {
    let sshd = Sshd::start();
    let closed = soku_testkit::free_port();
    let tunnel = Tunnel::start(&sshd, closed, &[]);
    for _ in 0..2 {
        let mut tcp = TcpStream::connect(("127.0.0.1", tunnel.port)).expect("connect to tunnel");
        tcp.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        let mut buf = [0u8; 16];
        // Reset (an error) or at least end of data; never bytes, never a hang.
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => {}
            Ok(n) => panic!("{n} bytes from a refused destination"),
        }
    }
    // The reason shows on the tunnel's stderr (read by its own thread: allow it a moment).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !tunnel.stderr().contains("could not connect to 127.0.0.1:") {
        assert!(std::time::Instant::now() < deadline, "no reason given\n{}", tunnel.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_remote_argument_with_a_path_is_a_usage_error() {
    let out = soku_testkit::cmd::output(Command::new(soku_bin()).args([
        "tunnel",
        "-L",
        "0",
        "host:path",
    ]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[user@]host"));
}

/// The tunnel's full capacity at once: 256 connections open together (the transport
/// grants 272 bidirectional streams per session), each carrying its own data both ways;
/// a 257th is refused at once with a message while they are open, and once they have
/// finished a new connection gets through again.
#[test]
fn two_hundred_fifty_six_concurrent_connections_and_the_next_is_refused() {
    const CONNECTIONS: usize = 256;
    let sshd = Sshd::start();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    // A reversing server that answers nobody until all CONNECTIONS have reached it, so
    // the tunnel must carry them all at once (a lower limit fails here, within a
    // bounded wait, instead of passing one connection after another). Afterwards it
    // serves one more connection, the one that checks the tunnel lives on.
    let server = std::thread::spawn(move || {
        listener.set_nonblocking(true).expect("nonblocking");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let batch: Vec<TcpStream> =
            (0..CONNECTIONS).map(|_| wait_accept(&listener, deadline)).collect();
        let workers: Vec<_> =
            batch.into_iter().map(|tcp| std::thread::spawn(move || reverse(tcp))).collect();
        for w in workers {
            w.join().expect("worker");
        }
        reverse(wait_accept(&listener, std::time::Instant::now() + Duration::from_secs(30)));
    });
    let tunnel = Tunnel::start(&sshd, port, &[]);
    // Open every connection before any finishes, so all are in flight together.
    let mut open: Vec<(TcpStream, Vec<u8>)> = (0..CONNECTIONS)
        .map(|i| {
            let tcp = TcpStream::connect(("127.0.0.1", tunnel.port)).expect("connect to tunnel");
            tcp.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
            (tcp, common::data(64 << 10, 100 + i as u64))
        })
        .collect();
    // One too many: closed at once, and said so.
    let mut extra = TcpStream::connect(("127.0.0.1", tunnel.port)).expect("connect to tunnel");
    extra.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let mut nothing = Vec::new();
    let refused = extra.read_to_end(&mut nothing);
    assert!(matches!(refused, Ok(0)), "connection 257: {refused:?}\n{}", tunnel.stderr());
    let said = "refused, 256 connections already open";
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !tunnel.stderr().contains(said) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(tunnel.stderr().contains(said), "{}", tunnel.stderr());

    for (tcp, sent) in &mut open {
        tcp.write_all(sent).expect("send");
        tcp.shutdown(std::net::Shutdown::Write).expect("half-close");
    }
    for (i, (mut tcp, mut sent)) in open.into_iter().enumerate() {
        let mut back = Vec::new();
        tcp.read_to_end(&mut back)
            .unwrap_or_else(|e| panic!("connection {i}: read back: {e}\n{}", tunnel.stderr()));
        sent.reverse();
        assert!(back == sent, "connection {i}: got {} bytes back", back.len());
    }

    // The slots are free again (released as the connections end, asynchronously:
    // retry for a bounded while).
    let sent = common::data(1000, 7);
    let mut back = Vec::new();
    for attempt in 0..50 {
        let mut tcp = TcpStream::connect(("127.0.0.1", tunnel.port)).expect("connect to tunnel");
        tcp.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        tcp.write_all(&sent).expect("send");
        tcp.shutdown(std::net::Shutdown::Write).expect("half-close");
        back.clear();
        if tcp.read_to_end(&mut back).is_ok() && !back.is_empty() {
            break;
        }
        assert!(attempt < 49, "no connection got through after the 256 ended\n{}", tunnel.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    back.reverse();
    assert!(back == sent, "the connection after the 256 got {} bytes back", back.len());
    server.join().expect("server thread");
}

fn reverse(mut tcp: TcpStream) {
    tcp.set_nonblocking(false).expect("blocking");
    let mut got = Vec::new();
    tcp.read_to_end(&mut got).expect("read to end");
    got.reverse();
    tcp.write_all(&got).expect("write back");
}

fn wait_accept(listener: &TcpListener, deadline: std::time::Instant) -> TcpStream {
    loop {
        match listener.accept() {
            Ok((tcp, _)) => return tcp,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the connection after the 256 never arrived"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}
