//! [`Path`]: two namespaces joined by the emulator, alive until dropped.

use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::delay_line::{DelayLine, Pool};
use crate::error::{NetemError, Result};
use crate::forward::{DirCounters, DirStats, Direction, Faults, Stop};
use crate::model::LinkModel;
use crate::netns;
use crate::spec::{LinkSpec, PathSpec};
use crate::sys;

/// Name of the TUN device inside each namespace.
pub const TUN_NAME: &str = "soku0";

/// Length of each TUN device's transmit ring, packets. The ring is where packets wait
/// for the emulator to read them; it only fills when the emulator is starved of CPU,
/// and then drops (visible as TX dropped in `ip -n NS -s link show soku0`). 4096 full
/// packets ride out a 49 ms stall at 1 Gbit/s.
pub const TUN_TXQUEUELEN: u32 = 4096;

/// Counters of both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Packets sent by A towards B.
    pub a_to_b: DirStats,
    /// Packets sent by B towards A.
    pub b_to_a: DirStats,
}

/// Deletes namespaces on drop unless disarmed: keeps a half-built path from leaking.
struct NsGuard {
    names: Vec<String>,
}

impl Drop for NsGuard {
    fn drop(&mut self) {
        for n in self.names.drain(..) {
            let _ = netns::delete(&n);
        }
    }
}

/// A running emulated path: namespaces `ns_a()` and `ns_b()`, each with a TUN device
/// `soku0` carrying `addr_a()`/`addr_b()`, and two forwarding threads between them.
///
/// Dropping it stops the threads, closes the devices and deletes both namespaces.
pub struct Path {
    ns_a: String,
    ns_b: String,
    spec: PathSpec,
    counters: [Arc<DirCounters>; 2],
    faults: Arc<Faults>,
    stop: Arc<Stop>,
    threads: Vec<JoinHandle<std::io::Result<()>>>,
    guard: NsGuard,
}

impl std::fmt::Debug for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Path")
            .field("ns_a", &self.ns_a)
            .field("ns_b", &self.ns_b)
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

fn seed_or_clock(seed: u64, salt: u64) -> u64 {
    if seed != 0 {
        return seed;
    }
    let t = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    t ^ (std::process::id() as u64) << 32 ^ salt
}

/// Buffer slots for one direction: enough for the bytes that can be in flight
/// (queue plus rate x delay) at full-size packets, twice over, plus room for a few
/// thousand small packets (ACKs). Unused slots cost no memory (see [`Pool::new`]).
fn pool_slots(spec: &LinkSpec, queue: usize) -> u32 {
    let hold = spec.delay + spec.jitter + spec.reorder_delay;
    // Without a rate limit assume the emulator's own ceiling, a few Gbit/s.
    let rate = spec.rate_bps.unwrap_or(4_000_000_000) as u128;
    let flight = rate * hold.as_nanos() / 8_000_000_000;
    let queue = if spec.rate_bps.is_some() { queue as u128 } else { 0 };
    let pkts = (flight + queue) / spec.mtu as u128 * 2 + 4096;
    pkts.min(1 << 18) as u32
}

fn slot_size(mtu: u16) -> usize {
    (mtu as usize).div_ceil(64) * 64 + 64
}

impl Path {
    /// Creates namespaces `{name}-a` and `{name}-b`, their TUN devices and addresses,
    /// and starts forwarding with `spec`. Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN).
    pub fn up(name: &str, spec: PathSpec) -> Result<Path> {
        spec.validate()?;
        let ns_a = format!("{name}-a");
        let ns_b = format!("{name}-b");
        netns::check_name(&ns_a)?;
        netns::check_name(&ns_b)?;
        let mut guard = NsGuard { names: Vec::new() };
        for ns in [&ns_a, &ns_b] {
            netns::create(ns)?;
            guard.names.push(ns.clone());
        }
        let tun_a =
            Arc::new(Self::setup_end(&ns_a, spec.addr_a, spec.prefix_len, spec.a_to_b.mtu)?);
        let tun_b =
            Arc::new(Self::setup_end(&ns_b, spec.addr_b, spec.prefix_len, spec.b_to_a.mtu)?);
        let stop = Arc::new(Stop {
            flag: AtomicBool::new(false),
            fd: sys::eventfd().map_err(NetemError::io("creating eventfd"))?,
        });
        let epoch = Instant::now();
        let rtt = spec.rtt();
        let counters = [Arc::default(), Arc::default()];
        let faults = Arc::new(Faults::default());
        let mut path = Path {
            ns_a,
            ns_b,
            spec: spec.clone(),
            counters,
            faults,
            stop,
            threads: Vec::new(),
            guard,
        };
        let dirs = [
            (&spec.a_to_b, &tun_a, &tun_b, "netem a>b", 1),
            (&spec.b_to_a, &tun_b, &tun_a, "netem b>a", 2),
        ];
        for (i, (link, input, output, tname, salt)) in dirs.into_iter().enumerate() {
            let queue = link.effective_queue_bytes(rtt);
            let slots = pool_slots(link, queue);
            let dir = Direction {
                input: Arc::clone(input),
                output: Arc::clone(output),
                model: LinkModel::new(link, queue, seed_or_clock(link.seed, salt)),
                pool: Pool::new(
                    slots,
                    slot_size(link.mtu.max(spec.a_to_b.mtu.max(spec.b_to_a.mtu))),
                ),
                line: DelayLine::with_capacity(slots as usize),
                counters: Arc::clone(&path.counters[i]),
                faults: Arc::clone(&path.faults),
                udp_limits: Default::default(),
                stop: Arc::clone(&path.stop),
                epoch,
                realtime: spec.realtime,
            };
            let h = std::thread::Builder::new()
                .name(tname.to_string())
                .spawn(move || dir.run())
                .map_err(NetemError::io("spawning forwarding thread"))?;
            path.threads.push(h);
        }
        Ok(path)
    }

    fn setup_end(ns: &str, addr: Ipv4Addr, prefix: u8, mtu: u16) -> Result<OwnedFd> {
        let fd = netns::in_ns(ns, || {
            // No IPv6 in the namespace: router solicitations and MLD reports would
            // otherwise cross the emulated link and disturb packet counts. Best effort
            // (a kernel without IPv6 has no such files).
            for conf in ["all", "default"] {
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6"), "1");
            }
            sys::open_tun(TUN_NAME)
        })?
        .map_err(NetemError::io("opening /dev/net/tun"))?;
        let cidr = format!("{addr}/{prefix}");
        let mtu = mtu.to_string();
        let qlen = TUN_TXQUEUELEN.to_string();
        netns::ip(&["-n", ns, "link", "set", "lo", "up"])?;
        netns::ip(&["-n", ns, "addr", "add", &cidr, "dev", TUN_NAME])?;
        netns::ip(&[
            "-n",
            ns,
            "link",
            "set",
            "dev",
            TUN_NAME,
            "mtu",
            &mtu,
            "txqueuelen",
            &qlen,
            "up",
        ])?;
        Ok(fd)
    }

    /// Name of namespace A.
    pub fn ns_a(&self) -> &str {
        &self.ns_a
    }

    /// Name of namespace B.
    pub fn ns_b(&self) -> &str {
        &self.ns_b
    }

    /// Address of A's end.
    pub fn addr_a(&self) -> Ipv4Addr {
        self.spec.addr_a
    }

    /// Address of B's end.
    pub fn addr_b(&self) -> Ipv4Addr {
        self.spec.addr_b
    }

    /// The spec the path runs with.
    pub fn spec(&self) -> &PathSpec {
        &self.spec
    }

    /// The faults of this path, to switch on and off while it runs.
    pub fn faults(&self) -> Arc<Faults> {
        Arc::clone(&self.faults)
    }

    /// Current counters of both directions.
    pub fn stats(&self) -> PathStats {
        PathStats { a_to_b: self.counters[0].snapshot(), b_to_a: self.counters[1].snapshot() }
    }

    /// Runs `f` on a thread inside namespace A (sockets made there live in A).
    pub fn in_a<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T> {
        netns::in_ns(&self.ns_a, f)
    }

    /// Runs `f` on a thread inside namespace B (sockets made there live in B).
    pub fn in_b<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T> {
        netns::in_ns(&self.ns_b, f)
    }

    /// A `Command` running `program` in namespace A.
    pub fn command_a(&self, program: &str) -> std::process::Command {
        netns::command_in(&self.ns_a, program)
    }

    /// A `Command` running `program` in namespace B.
    pub fn command_b(&self, program: &str) -> std::process::Command {
        netns::command_in(&self.ns_b, program)
    }

    /// Forgets cached TCP metrics (ssthresh, RTT) in both namespaces, so one run's
    /// losses do not shape the next (`ip tcp_metrics flush all`). Call before each
    /// TCP measurement.
    pub fn flush_tcp_metrics(&self) -> Result<()> {
        for ns in [&self.ns_a, &self.ns_b] {
            netns::ip(&["-n", ns, "tcp_metrics", "flush", "all"])?;
        }
        Ok(())
    }

    /// True while both forwarding threads are running.
    pub fn is_running(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }

    /// Stops forwarding and deletes the namespaces, reporting the first error.
    pub fn down(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        self.stop.trigger();
        let mut first = Ok(());
        for t in self.threads.drain(..) {
            let r = t.join().unwrap_or_else(|_| Err(std::io::Error::other("panicked")));
            if let (Err(e), Ok(())) = (r, &first) {
                first = Err(NetemError::Io { what: "forwarding thread", source: e });
            }
        }
        // The TUN fds close when the last Arc (the threads') is gone; then the
        // namespaces can go.
        for n in std::mem::take(&mut self.guard.names) {
            if let (Err(e), Ok(())) = (netns::delete(&n), &first) {
                first = Err(e);
            }
        }
        first
    }

    /// Deletes the namespaces of a path called `name` left behind by a crashed run.
    pub fn cleanup(name: &str) -> Result<()> {
        netns::delete(&format!("{name}-a"))?;
        netns::delete(&format!("{name}-b"))
    }
}

impl Drop for Path {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn pool_is_bounded_and_sufficient() {
        let l = LinkSpec {
            delay: Duration::from_millis(50),
            rate_bps: Some(1_000_000_000),
            ..LinkSpec::default()
        };
        let q = l.effective_queue_bytes(Duration::from_millis(100));
        let s = pool_slots(&l, q);
        // 6.25 MB in flight + 12.5 MB queue = 12 500 full packets, doubled.
        assert!(s as usize >= 2 * 12_500);
        let huge = LinkSpec { delay: Duration::from_secs(10), ..LinkSpec::default() };
        assert_eq!(pool_slots(&huge, usize::MAX), 1 << 18);
        assert_eq!(slot_size(1500), 1600);
    }
}
