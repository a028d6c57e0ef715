//! End-to-end tests: real namespaces joined by the emulator. Need root, `ip`
//! (iproute2) and /dev/net/tun. If namespaces cannot be created they fail with the
//! reason, unless `SOKU_SKIP_NETNS=1`, in which case they print it and pass.
//!
//! All tests share one lock: they measure time and rate, so they must not compete for
//! the two cores with each other.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use soku_netem::{netns, Gilbert, LinkSpec, NetemError, Path, PathSpec};

static SERIAL: Mutex<()> = Mutex::new(());
static COUNTER: AtomicU32 = AtomicU32::new(0);

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn unique(tag: &str) -> String {
    format!("sokut{}-{}{}", std::process::id(), tag, COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Brings a path up, or explains why it cannot (and skips if SOKU_SKIP_NETNS=1).
fn up(tag: &str, spec: PathSpec) -> Option<Path> {
    match Path::up(&unique(tag), spec) {
        Ok(p) => Some(p),
        Err(e @ (NetemError::Command { .. } | NetemError::Io { .. })) => {
            let why =
                format!("cannot build namespaces + TUN (need root, iproute2, /dev/net/tun): {e}");
            if std::env::var("SOKU_SKIP_NETNS").as_deref() == Ok("1") {
                eprintln!("SKIPPED: {why}");
                None
            } else {
                panic!("{why}\n(set SOKU_SKIP_NETNS=1 to skip these tests)");
            }
        }
        Err(e) => panic!("Path::up: {e}"),
    }
}

/// Gives a receiving socket 4 MiB of buffer (SO_RCVBUFFORCE, root), so a busy
/// machine does not drop datagrams the emulator delivered.
fn big_rcvbuf(s: &UdpSocket) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 4 << 20;
    // SAFETY: setsockopt reads a live c_int of the given size; the fd is open.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_RCVBUFFORCE: {}", std::io::Error::last_os_error());
}

fn udp_pair(path: &Path) -> (UdpSocket, UdpSocket) {
    let (a, b) = (path.addr_a(), path.addr_b());
    let rx = path
        .in_b(move || UdpSocket::bind(SocketAddr::from((b, 0))))
        .expect("enter B")
        .expect("bind in B");
    let tx = path
        .in_a(move || UdpSocket::bind(SocketAddr::from((a, 0))))
        .expect("enter A")
        .expect("bind in A");
    tx.connect(rx.local_addr().unwrap()).unwrap();
    big_rcvbuf(&rx);
    (tx, rx)
}

/// Sends `n` sequence-numbered datagrams A->B, one every `gap`, and returns which
/// arrived (collected until 300 ms of silence after the last send).
fn udp_stream(path: &Path, n: u32, size: usize, gap: Duration) -> Vec<bool> {
    let (tx, rx) = udp_pair(path);
    rx.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let receiver = s.spawn(|| {
            let mut got = vec![false; n as usize];
            let mut buf = [0u8; 2048];
            loop {
                let len = match rx.recv(&mut buf) {
                    Ok(len) => len,
                    // Quiet for 300 ms: finished if the sender is (a preempted sender
                    // must not end the count early).
                    Err(_) if done.load(Ordering::Acquire) => break,
                    Err(_) => continue,
                };
                if len >= 4 {
                    let seq = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
                    if let Some(g) = got.get_mut(seq as usize) {
                        *g = true;
                    }
                }
            }
            got
        });
        let mut pkt = vec![0u8; size];
        let t0 = Instant::now();
        for i in 0..n {
            let due = t0 + gap * i;
            while Instant::now() < due {
                std::hint::spin_loop();
            }
            pkt[..4].copy_from_slice(&i.to_be_bytes());
            tx.send(&pkt).unwrap();
        }
        done.store(true, Ordering::Release);
        receiver.join().unwrap()
    })
}

/// Stats once the emulator has read `n` packets A->B and delivered or dropped them all
/// (bounded wait; returns what it has after 2 s).
fn settled(path: &Path, n: u64) -> soku_netem::DirStats {
    let t0 = Instant::now();
    loop {
        let st = path.stats().a_to_b;
        if (st.packets_in >= n && st.in_flight == 0) || t0.elapsed() > Duration::from_secs(2) {
            return st;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Best effort: run the calling test thread under SCHED_FIFO (below the emulator's
/// priority) so a loaded machine does not add its scheduling delays to RTT samples.
fn realtime_thread() {
    let param = libc::sched_param { sched_priority: 5 };
    // SAFETY: param is a live sched_param; pid 0 is the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
}

/// Round-trip times of `n` sequential UDP echoes A->B->A.
fn echo_rtts(path: &Path, n: u8) -> Vec<Duration> {
    let (tx, rx) = udp_pair(path);
    rx.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    tx.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            realtime_thread();
            let mut buf = [0u8; 64];
            while let Ok((n, from)) = rx.recv_from(&mut buf) {
                if buf[0] == b'q' {
                    break;
                }
                let _ = rx.send_to(&buf[..n], from);
            }
        });
        let samples = s
            .spawn(|| {
                realtime_thread();
                let mut samples = Vec::new();
                let mut buf = [0u8; 64];
                for i in 0..n {
                    let t = Instant::now();
                    tx.send(&[b'p', i]).unwrap();
                    let len = tx.recv(&mut buf).expect("echo reply");
                    assert_eq!(&buf[..len], &[b'p', i]);
                    samples.push(t.elapsed());
                }
                samples
            })
            .join()
            .unwrap();
        tx.send(b"q").unwrap();
        samples
    })
}

#[test]
fn rtt_matches_spec() {
    let _g = serial();
    let rtt = Duration::from_millis(20);
    let Some(path) = up("rtt", PathSpec::symmetric(rtt, 0.0, None)) else {
        return;
    };
    let mut samples = echo_rtts(&path, 50);
    samples.sort();
    let (min, med, p90) = (samples[0], samples[25], samples[45]);
    let stats = path.stats();
    eprintln!(
        "rtt spec {rtt:?}: min {min:?} median {med:?} p90 {p90:?}; mean lateness a>b {:?} b>a {:?}",
        stats.a_to_b.mean_late(),
        stats.b_to_a.mean_late()
    );
    // The spec's tolerance (0.5 ms + 2 %) applies to what the emulator adds: the fastest
    // echo, and each direction's mean lateness against its schedule. The median also
    // carries the echo programs' own wakeups on a shared 2-vCPU machine (one CI run saw
    // 20.90 ms with the emulator 0.44 ms late in total), so it gets twice the tolerance:
    // still a failure for any systematic error in the delay line.
    let tol = Duration::from_micros(500) + rtt / 50;
    assert!(min >= rtt, "min {min:?} below spec");
    assert!(min <= rtt + tol, "min {min:?} above {rtt:?} + {tol:?}");
    for (dir, late) in [("a>b", stats.a_to_b.mean_late()), ("b>a", stats.b_to_a.mean_late())] {
        assert!(late <= tol / 2, "{dir} mean lateness {late:?} above {:?}", tol / 2);
    }
    assert!(med <= rtt + 2 * tol, "median {med:?} above {rtt:?} + 2 x {tol:?}");
}

#[test]
fn random_loss_within_binomial_bounds() {
    let _g = serial();
    let p = 0.05;
    let spec =
        PathSpec { a_to_b: LinkSpec { loss: p, ..LinkSpec::default() }, ..PathSpec::default() };
    let Some(path) = up("loss", spec) else {
        return;
    };
    let n = 20_000;
    let got = udp_stream(&path, n, 64, Duration::from_micros(40));
    let lost = got.iter().filter(|g| !**g).count();
    let rate = lost as f64 / n as f64;
    let st = settled(&path, n as u64);
    let sigma = (p * (1.0 - p) / n as f64).sqrt();
    eprintln!(
        "loss spec {p}: observed {rate:.4} ({lost}/{n}), emulator read {} dropped {}, 4 sigma {:.4}",
        st.packets_in,
        st.dropped_loss,
        4.0 * sigma
    );
    assert_eq!(st.packets_in, n as u64, "host dropped packets before the emulator");
    assert_eq!(lost as u64, st.dropped_loss, "receiver saw losses the emulator did not make");
    assert!((rate - p).abs() <= 4.0 * sigma, "loss {rate} outside {p} +- 4 sigma");
}

#[test]
fn gilbert_elliott_makes_bursts() {
    let _g = serial();
    let g = Gilbert { p: 0.02, r: 0.25, bad_loss: 1.0 };
    let spec = PathSpec {
        a_to_b: LinkSpec { gilbert: Some(g), ..LinkSpec::default() },
        ..PathSpec::default()
    };
    let Some(path) = up("ge", spec) else {
        return;
    };
    let n = 20_000;
    let got = udp_stream(&path, n, 64, Duration::from_micros(40));
    let (mut lost, mut bursts) = (0usize, 0usize);
    for i in 0..got.len() {
        if !got[i] {
            lost += 1;
            if i == 0 || got[i - 1] {
                bursts += 1;
            }
        }
    }
    let mean = lost as f64 / bursts.max(1) as f64;
    let rate = lost as f64 / n as f64;
    eprintln!(
        "gilbert p={} r={}: {lost} lost in {bursts} bursts, mean burst {mean:.2} (1/r = {}), loss {rate:.4} (expected {:.4})",
        g.p,
        g.r,
        1.0 / g.r,
        g.mean_loss()
    );
    assert_eq!(settled(&path, n as u64).packets_in, n as u64);
    // ~370 bursts, geometric with sd sqrt(1-r)/r = 3.5: 4 sigma of the mean is ~0.7.
    assert!((mean - 1.0 / g.r).abs() < 0.8, "mean burst {mean}");
    assert!((rate - g.mean_loss()).abs() < 0.025, "loss rate {rate}");
}

/// One TCP transfer A->B through `path`: goodput and link rate (IP bytes) over the last
/// 3 s of 4.
fn tcp_goodput_and_link(path: &Path) -> (f64, f64) {
    let b = path.addr_b();
    let listener = path.in_b(move || TcpListener::bind(SocketAddr::from((b, 0)))).unwrap().unwrap();
    let to = listener.local_addr().unwrap();
    let client = path.in_a(move || TcpStream::connect(to)).unwrap().unwrap();
    let total = Duration::from_secs(4);
    let warm = Duration::from_secs(1);
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut c = client;
            let buf = vec![0x5au8; 256 * 1024];
            let t0 = Instant::now();
            while t0.elapsed() < total + Duration::from_millis(300) {
                if c.write_all(&buf).is_err() {
                    break;
                }
            }
        });
        let (mut conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = vec![0u8; 256 * 1024];
        let t0 = Instant::now();
        let (mut bytes, mut mark) = (0u64, None);
        while t0.elapsed() < total {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => bytes += n as u64,
            }
            if mark.is_none() && t0.elapsed() >= warm {
                mark = Some((Instant::now(), bytes, path.stats().a_to_b.bytes));
            }
        }
        let (t1, b1, l1) = mark.expect("transfer lasted past warm-up");
        let secs = t1.elapsed().as_secs_f64();
        let l2 = path.stats().a_to_b.bytes;
        let goodput = (bytes - b1) as f64 * 8.0 / secs;
        let link = (l2 - l1) as f64 * 8.0 / secs;
        drop(conn);
        (goodput, link)
    })
}

/// The shaper holds TCP to the configured rate: never above it (every attempt), and at
/// it within 3 % while the sender keeps the queue full. The lower bound may take up to
/// three attempts: on two shared cores the TCP sender or receiver is sometimes
/// descheduled long enough to leave the link idle (one CI run saw 95.3 % with 702 queue
/// drops where 99.9-100.0 % is usual), which says nothing about the shaper; a shaper
/// that is really slow fails all three.
#[test]
fn tcp_goodput_matches_rate() {
    let _g = serial();
    let rate = 100_000_000u64;
    let Some(path) = up("rate", PathSpec::symmetric(Duration::from_millis(10), 0.0, Some(rate)))
    else {
        return;
    };
    // Rate is on IP bytes; TCP with timestamps carries 1448 payload bytes per 1500.
    let expect_goodput = rate as f64 * 1448.0 / 1500.0;
    let mut attempts = Vec::new();
    for _ in 0..3 {
        let (goodput, link) = tcp_goodput_and_link(&path);
        let st = path.stats().a_to_b;
        eprintln!(
            "rate {} Mbit/s: link (IP bytes) {:.2} Mbit/s, TCP goodput {:.2} Mbit/s (expected {:.2}), queue drops {}, max queue {} B, cpu {:.0} ms",
            rate / 1_000_000,
            link / 1e6,
            goodput / 1e6,
            expect_goodput / 1e6,
            st.dropped_queue,
            st.max_queue_bytes,
            st.cpu_ns as f64 / 1e6
        );
        let link_ratio = link / rate as f64;
        let goodput_ratio = goodput / expect_goodput;
        assert!(link_ratio - 1.0 < 0.03, "link rate {link} above the configured rate");
        assert!(goodput_ratio - 1.0 < 0.03, "goodput {goodput} above the rate");
        let at_rate = 1.0 - link_ratio < 0.03 && 1.0 - goodput_ratio < 0.03;
        attempts.push((link, goodput));
        if at_rate {
            return;
        }
    }
    panic!("never within 3 % of the rate in 3 attempts (link, goodput): {attempts:?}");
}

/// A UDP flood at twice the rate overflows the drop-tail queue, which never holds more
/// than its limit, and every datagram is either carried or dropped there. While the
/// flood keeps the queue full the link carries its rate: never more (every attempt),
/// and within 5 % of it, which may take up to three attempts, each on a fresh path. On
/// two shared cores the flooding thread is sometimes descheduled long enough for the
/// queue (24 ms at this rate) to drain and the link to idle: one CI run carried 9.46 of
/// the 10.24 Mbit expected with 1350 queue drops, which says nothing about the shaper.
#[test]
fn udp_flood_overflows_queue() {
    let _g = serial();
    let rate = 10_000_000u64;
    let queue = 30_000usize;
    let spec = PathSpec {
        a_to_b: LinkSpec { rate_bps: Some(rate), queue_bytes: Some(queue), ..LinkSpec::default() },
        ..PathSpec::default()
    };
    // The link carries ~rate for the flood's 1 s, and the queue drains after.
    let expected = rate as f64 * 1.0 + queue as f64 * 8.0;
    let mut attempts = Vec::new();
    for _ in 0..3 {
        let Some(path) = up("queue", spec.clone()) else {
            return;
        };
        // 1000-byte datagrams (1028 IP bytes) every 400 us: ~20.6 Mbit/s for 1 s.
        let n = 2500;
        let got = udp_stream(&path, n, 1000, Duration::from_micros(400));
        let st = settled(&path, n as u64);
        let delivered = got.iter().filter(|g| **g).count();
        eprintln!(
            "flood 2x over {} Mbit/s: delivered {delivered}/{n}, queue drops {}, max queue {} B (limit {queue})",
            rate / 1_000_000,
            st.dropped_queue,
            st.max_queue_bytes
        );
        assert!(st.dropped_queue > 0);
        assert!(st.max_queue_bytes <= queue as u64);
        assert_eq!(st.dropped_queue + st.packets, n as u64);
        let carried = st.bytes as f64 * 8.0;
        assert!(carried / expected - 1.0 < 0.05, "carried {carried} bits, above the rate");
        if 1.0 - carried / expected < 0.05 {
            return;
        }
        attempts.push(carried);
    }
    panic!("never within 5 % of {expected} bits carried in 3 attempts: {attempts:?}");
}

#[test]
fn jitter_spreads_rtt() {
    let _g = serial();
    let spec = PathSpec {
        a_to_b: LinkSpec {
            delay: Duration::from_millis(5),
            jitter: Duration::from_millis(2),
            ..LinkSpec::default()
        },
        b_to_a: LinkSpec { delay: Duration::from_millis(5), ..LinkSpec::default() },
        ..PathSpec::default()
    };
    // Uniform 8..12 ms. The minimum comes within 0.5 ms of 8 unless no sample of 100
    // falls in the lowest eighth ((7/8)^100 = 2e-6), plus what the echo programs and
    // the emulator add, held to the spec's tolerance (0.5 ms + 2 % of 10 ms, as in
    // `rtt_matches_spec`; a CI run saw 8.76 ms); still well below the 10 ms a path
    // without jitter gives. The 96th comes above 11.3 ms unless fewer than 5 of 100
    // land in the top 17.5 % (~1e-4). The median and the p95 also carry the echo
    // programs' own wakeups, so they get twice the tolerance, as the median does in
    // `rtt_matches_spec`: at most 10 and 12 ms plus 1.4 ms. The max is not checked. A
    // busy machine only ever adds delay, so the lower bounds hold on every attempt; the
    // upper ones a preempted test thread can break (a CI run beside cross builds saw a
    // p95 of 21.2 ms), so those may take up to three attempts, each on a fresh path.
    let tol = 0.5 + 10.0 / 50.0;
    let mut attempts = Vec::new();
    for _ in 0..3 {
        let Some(path) = up("jitter", spec.clone()) else {
            return;
        };
        let mut samples = echo_rtts(&path, 100);
        samples.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (min, med, p95) = (ms(samples[0]), ms(samples[50]), ms(samples[95]));
        let max = ms(samples[99]);
        eprintln!(
            "jitter +-2 ms on 10 ms: min {min:.2} median {med:.2} p95 {p95:.2} max {max:.2} ms"
        );
        assert!(min >= 8.0, "min {min}: below the spec's 8 ms floor");
        assert!(p95 >= 11.3, "p95 {p95}: the jitter does not spread the RTT");
        assert!(med > 9.0, "median {med}");
        if min < 8.5 + tol && med < 10.0 + 2.0 * tol && p95 < 12.0 + 2.0 * tol {
            return;
        }
        attempts.push((min, med, p95));
    }
    panic!("(min, median, p95) above the spec in 3 attempts: {attempts:?}");
}

#[test]
fn reorder_shows_up() {
    let _g = serial();
    let spec = PathSpec {
        a_to_b: LinkSpec {
            delay: Duration::from_millis(5),
            reorder: 0.05,
            reorder_delay: Duration::from_millis(2),
            ..LinkSpec::default()
        },
        ..PathSpec::default()
    };
    let Some(path) = up("reorder", spec) else {
        return;
    };
    let (tx, rx) = udp_pair(&path);
    rx.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let n = 2000u32;
    let order = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut order = Vec::new();
            let mut buf = [0u8; 64];
            while let Ok(len) = rx.recv(&mut buf) {
                if len == 4 {
                    order.push(u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]));
                }
            }
            order
        });
        let t0 = Instant::now();
        for i in 0..n {
            while Instant::now() < t0 + Duration::from_micros(100) * i {
                std::hint::spin_loop();
            }
            tx.send(&i.to_be_bytes()).unwrap();
        }
        h.join().unwrap()
    });
    let late = order.windows(2).filter(|w| w[1] < w[0]).count();
    eprintln!("reorder 5%: {late} of {} arrivals out of order", order.len());
    assert_eq!(order.len(), n as usize);
    assert!((50..=150).contains(&late), "out of order {late}");
}

#[test]
fn max_throughput() {
    let _g = serial();
    let Some(path) = up("tput", PathSpec::symmetric(Duration::from_millis(2), 0.0, None)) else {
        return;
    };
    let b = path.addr_b();
    let listener = path.in_b(move || TcpListener::bind(SocketAddr::from((b, 0)))).unwrap().unwrap();
    let to = listener.local_addr().unwrap();
    let client = path.in_a(move || TcpStream::connect(to)).unwrap().unwrap();
    let secs = 3.0;
    let (bytes, elapsed) = std::thread::scope(|s| {
        s.spawn(move || {
            let mut c = client;
            let buf = vec![0u8; 256 * 1024];
            while c.write_all(&buf).is_ok() {}
        });
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 256 * 1024];
        let t0 = Instant::now();
        let mut bytes = 0u64;
        while t0.elapsed().as_secs_f64() < secs {
            match conn.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => bytes += n as u64,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!("{e}"),
            }
        }
        let el = t0.elapsed().as_secs_f64();
        let _ = conn.shutdown(std::net::Shutdown::Both);
        (bytes, el)
    });
    let st = path.stats();
    let gbps = bytes as f64 * 8.0 / elapsed / 1e9;
    let cpu = (st.a_to_b.cpu_ns + st.b_to_a.cpu_ns) as f64 / 1e9 / elapsed;
    eprintln!(
        "max throughput (TCP, MTU 1500, rtt 2 ms): {gbps:.2} Gbit/s goodput; emulator CPU {:.2} cores ({:.2} a>b + {:.2} b>a), {:.2} cores per Gbit/s, of which user space {:.2} cores",
        cpu,
        st.a_to_b.cpu_ns as f64 / 1e9 / elapsed,
        st.b_to_a.cpu_ns as f64 / 1e9 / elapsed,
        cpu / gbps,
        (st.a_to_b.user_ns + st.b_to_a.user_ns) as f64 / 1e9 / elapsed
    );
    // The machine is shared with the endpoints (and maybe builds): 1 Gbit/s is
    // required only under SOKU_NETEM_STRICT=1, a floor of 0.5 always.
    let floor = if std::env::var("SOKU_NETEM_STRICT").as_deref() == Ok("1") { 1.0 } else { 0.5 };
    assert!(gbps >= floor, "{gbps:.2} Gbit/s below {floor}");
}

#[test]
fn mtu_and_addresses_applied() {
    let _g = serial();
    let mut spec = PathSpec::default();
    spec.a_to_b.mtu = 1280;
    spec.b_to_a.mtu = 9000;
    let Some(path) = up("mtu", spec) else {
        return;
    };
    let show = |ns: &str| {
        let out = std::process::Command::new("ip")
            .args(["-n", ns, "-d", "addr", "show", "soku0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (a, b) = (show(path.ns_a()), show(path.ns_b()));
    assert!(a.contains("mtu 1280") && a.contains("10.77.0.1/24"), "{a}");
    assert!(b.contains("mtu 9000") && b.contains("10.77.0.2/24"), "{b}");
    path.flush_tcp_metrics().unwrap();
    // A datagram as large as B's MTU arrives whole (the pool slots fit it).
    let bb = path.addr_b();
    let a_addr = path.addr_a();
    let ra = path.in_a(move || UdpSocket::bind(SocketAddr::from((a_addr, 0)))).unwrap().unwrap();
    big_rcvbuf(&ra);
    ra.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let tb = path.in_b(move || UdpSocket::bind(SocketAddr::from((bb, 0)))).unwrap().unwrap();
    tb.send_to(&vec![7u8; 9000 - 28], ra.local_addr().unwrap()).unwrap();
    let mut buf = vec![0u8; 10_000];
    let n = ra.recv(&mut buf).expect("jumbo datagram B->A");
    assert_eq!(n, 9000 - 28);
}

#[test]
fn path_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Path>();
}

#[test]
fn teardown_leaves_nothing() {
    let _g = serial();
    let Some(path) = up("down", PathSpec::default()) else {
        return;
    };
    let (a, b) = (path.ns_a().to_string(), path.ns_b().to_string());
    assert!(netns::exists(&a) && netns::exists(&b));
    assert!(path.is_running());
    drop(path);
    assert!(!netns::exists(&a) && !netns::exists(&b));

    // A half-built path (B already taken) must clean up the A it made.
    let name = unique("clash");
    netns::create(&format!("{name}-b")).unwrap();
    let r = Path::up(&name, PathSpec::default());
    assert!(matches!(r, Err(NetemError::NamespaceExists(_))), "{r:?}");
    assert!(!netns::exists(&format!("{name}-a")));
    Path::cleanup(&name).unwrap();
    assert!(!netns::exists(&format!("{name}-b")));
}
