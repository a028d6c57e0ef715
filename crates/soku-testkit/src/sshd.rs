//! A real OpenSSH `sshd` with fresh host and user keys, for end-to-end tests (on
//! 127.0.0.1, [`Sshd::start`]) and for the benchmarks (on any address, possibly inside
//! a network namespace, [`Sshd::start_at`]).
//!
//! Everything lives in one temp dir: keys, `authorized_keys`, `known_hosts`,
//! `sshd_config`, an `ssh_config` for the clients, the pid file and `sshd.log`. Start
//! waits for the daemon's pid file (sshd writes it once it listens) and, on loopback,
//! for the port to accept (bounded, no blind sleep); dropping the [`Sshd`] kills the
//! daemon by PID and removes the dir.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The absolute path sshd must be started with (it re-executes itself).
const SSHD: &str = "/usr/sbin/sshd";
/// The `Host` name in [`Sshd::ssh_config_file`], also a `HostKeyAlias` known to `known_hosts`.
pub const TEST_HOST: &str = "soku-test-host";
/// How long [`Sshd::start`] waits for the daemon to listen.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Ports tried before giving up (another process may take the free port first).
const PORT_ATTEMPTS: usize = 5;

/// A running `sshd` that accepts the test user key; killed on drop.
pub struct Sshd {
    child: Child,
    /// The daemon's PID from its pid file (differs from `child` when a wrapper such
    /// as `ip netns exec` forked it).
    pid: u32,
    addr: Ipv4Addr,
    port: u16,
    dir: tempfile::TempDir,
}

impl Sshd {
    /// Generates keys and config in a temp dir and starts `sshd -D -e` on a free port
    /// of 127.0.0.1.
    ///
    /// Panics with a clear message if `/usr/sbin/sshd` is missing or never listens.
    pub fn start() -> Sshd {
        let mut last = String::new();
        for _ in 0..PORT_ATTEMPTS {
            match Sshd::start_at(Command::new(SSHD), Ipv4Addr::LOCALHOST, crate::port::free_port())
            {
                Ok(sshd) => return sshd,
                // Another process may have taken the port meanwhile: try another.
                Err(e) => last = e,
            }
        }
        panic!("sshd did not start after {PORT_ATTEMPTS} ports: {last}");
    }

    /// Starts `command` (`/usr/sbin/sshd`, possibly behind a wrapper such as `ip netns
    /// exec NS`) listening on `addr:port`, with fresh keys and config.
    pub fn start_at(mut command: Command, addr: Ipv4Addr, port: u16) -> Result<Sshd, String> {
        if !Path::new(SSHD).is_file() {
            return Err(format!(
                "{SSHD} not found: install openssh-server (apt-get install openssh-server)"
            ));
        }
        // sshd refuses to start without its privilege-separation dir.
        let _ = std::fs::create_dir_all("/run/sshd");
        let dir = tempfile::Builder::new()
            .prefix("soku-sshd-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let d = dir.path();
        keygen(&d.join("host_key"))?;
        keygen(&d.join("user_key"))?;
        std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys"))
            .map_err(|e| format!("authorized_keys: {e}"))?;
        write_configs(d, addr, port).map_err(|e| format!("writing sshd's configs: {e}"))?;
        let log =
            std::fs::File::create(d.join("sshd.log")).map_err(|e| format!("sshd.log: {e}"))?;
        let mut child = command
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {SSHD}: {e}"))?;
        match wait_ready(&mut child, d, addr, port) {
            Some(pid) => Ok(Sshd { child, pid, addr, port, dir }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(d.join("sshd.log")).unwrap_or_default();
                Err(format!("sshd did not start listening on {addr}:{port}; its log:\n{log}"))
            }
        }
    }

    /// The daemon's PID (the listener that forks and reaps the sessions).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The port sshd listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The address sshd listens on (`127.0.0.1` for [`Sshd::start`]).
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// The user the tests log in as: the current user.
    pub fn user(&self) -> String {
        current_user()
    }

    /// `user@127.0.0.1`, a destination for ssh (add [`Sshd::ssh_port_args`]).
    pub fn destination(&self) -> String {
        format!("{}@{}", self.user(), self.host())
    }

    /// The temp dir holding keys, configs and `sshd.log`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The private user key sshd accepts.
    pub fn identity_file(&self) -> PathBuf {
        self.dir().join("user_key")
    }

    /// The `known_hosts` file: `[ADDR]:PORT` (or `ADDR` on port 22) and `soku-test-host` (for
    /// `-o HostKeyAlias=soku-test-host` when connecting through a relay on another port).
    pub fn known_hosts_file(&self) -> PathBuf {
        self.dir().join("known_hosts")
    }

    /// Client options for ssh, scp, sftp and soku, without the port, as `-o` values:
    /// the key, the known_hosts file, strict host key checking, batch mode, quiet logging.
    pub fn ssh_options(&self) -> Vec<String> {
        vec![
            format!("IdentityFile={}", self.identity_file().display()),
            format!("UserKnownHostsFile={}", self.known_hosts_file().display()),
            "GlobalKnownHostsFile=/dev/null".to_string(),
            "StrictHostKeyChecking=yes".to_string(),
            "BatchMode=yes".to_string(),
            "IdentitiesOnly=yes".to_string(),
            "LogLevel=ERROR".to_string(),
        ]
    }

    /// [`Sshd::ssh_options`] as arguments: `["-o", opt, "-o", opt, ...]`.
    pub fn ssh_args(&self) -> Vec<String> {
        self.ssh_options().into_iter().flat_map(|o| ["-o".to_string(), o]).collect()
    }

    /// `["-p", PORT]`, ssh's port flag (scp and sftp use `-P`: [`Sshd::scp_port_args`]).
    pub fn ssh_port_args(&self) -> Vec<String> {
        vec!["-p".to_string(), self.port.to_string()]
    }

    /// `["-P", PORT]`, the port flag of scp and sftp.
    pub fn scp_port_args(&self) -> Vec<String> {
        vec!["-P".to_string(), self.port.to_string()]
    }

    /// An ssh_config with `Host soku-test-host` (HostName, Port, User, key, known_hosts,
    /// strict checking, batch mode): use `-F FILE soku-test-host:path`.
    pub fn ssh_config_file(&self) -> PathBuf {
        self.dir().join("ssh_config")
    }

    /// Puts `options` before the user key in `authorized_keys`, as an administrator
    /// restricts a key (`restrict,command="soku serve --read-only"`): sshd reads the
    /// file at each login, so every later login with the key is held to them.
    pub fn restrict_key(&self, options: &str) -> std::io::Result<()> {
        let key = std::fs::read_to_string(self.dir().join("user_key.pub"))?;
        std::fs::write(self.dir().join("authorized_keys"), format!("{options} {key}"))
    }

    /// The `sshd.log` so far (sshd runs with `-e`), for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir().join("sshd.log")).unwrap_or_default()
    }

    fn stop(&mut self) {
        // The sessions first, by PID: a client that ended without a goodbye (soku stops
        // its ssh once a copy is verified) leaves its session to notice the closed
        // connection, which it never does once the test's namespaces are gone.
        let sessions = children_of(self.pid);
        for session in &sessions {
            let _ = Command::new("kill").arg("-9").arg(session.to_string()).status();
        }
        // Our own child, by PID.
        let forked = self.pid != self.child.id();
        if forked {
            // A wrapper forked the daemon: it is the pid-file PID, also ours.
            let _ = Command::new("kill").arg(self.pid.to_string()).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // `kill` only sends the signal. Until a session (even the one that answered
        // `wait_ready`'s probe) is gone, its copy of the listening socket keeps the port
        // accepting; a forked daemon likewise. Bounded: init reaps them at once.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut left: Vec<u32> = sessions;
        if forked {
            left.push(self.pid);
        }
        while left.iter().any(|&pid| alive(pid)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        // A session forked after the list above (sshd accepting `wait_ready`'s probe
        // only now) holds a copy of the listening socket until it closes it, and the
        // kernel completes connections for it meanwhile. It is init's once the daemon
        // is gone: wait, bounded, until the port stops accepting (`tests/sshd.rs` once
        // found it open).
        while self.addr.is_loopback() && accepts(self.addr, self.port) && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Whether something listens on `addr:port`. A port from the ephemeral range can
/// connect to itself (TCP simultaneous open, RFC 9293 3.5): a stream whose two ends are
/// one address reached no listener.
fn accepts(addr: Ipv4Addr, port: u16) -> bool {
    TcpStream::connect_timeout(&(addr, port).into(), Duration::from_millis(200))
        .is_ok_and(|s| s.local_addr().ok() != s.peer_addr().ok())
}

/// Whether `pid` still runs (a zombie has released its descriptors already).
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rfind(')').and_then(|i| stat.get(i + 2..i + 3));
    state.is_some_and(|s| s != "Z")
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The processes whose parent is `pid` (from `/proc/PID/stat`'s fourth field).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|&child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            // The command name may hold spaces: the fields after it start after ')'.
            let ppid = stat
                .rfind(')')
                .and_then(|i| stat.get(i + 2..))
                .and_then(|rest| rest.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok()));
            ppid == Some(pid)
        })
        .collect()
}

/// Polls until sshd wrote its pid file (it does once it listens) and, on loopback,
/// accepts TCP connections; `None` if it exited (e.g. the port was taken meanwhile)
/// or did not get there within the timeout. Returns the pid-file PID.
fn wait_ready(child: &mut Child, dir: &Path, addr: Ipv4Addr, port: u16) -> Option<u32> {
    let pid_file = dir.join("sshd.pid");
    let deadline = Instant::now() + READY_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        let pid = std::fs::read_to_string(&pid_file).ok().and_then(|s| s.trim().parse().ok());
        let accepts = || {
            !addr.is_loopback()
                || TcpStream::connect_timeout(&(addr, port).into(), Duration::from_millis(200))
                    .is_ok()
        };
        if let Some(pid) = pid.filter(|_| accepts()) {
            return Some(pid);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn keygen(path: &Path) -> Result<(), String> {
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-q", "-t", "ed25519", "-N", "", "-C", "soku-test", "-f"]).arg(path);
    let out = crate::cmd::output(&mut cmd);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ssh-keygen failed\n{}", crate::describe(&cmd, &out)))
    }
}

fn current_user() -> String {
    if let Some(user) = std::env::var_os("USER").filter(|u| !u.is_empty()) {
        return user.to_string_lossy().into_owned();
    }
    let out = crate::run(Command::new("id").arg("-un"));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Where distributions install OpenSSH's sftp-server (Debian and Ubuntu, Fedora and
/// RHEL, Arch, a source build).
const SFTP_SERVERS: [&str; 4] = [
    "/usr/lib/openssh/sftp-server",
    "/usr/libexec/openssh/sftp-server",
    "/usr/lib/ssh/sftp-server",
    "/usr/libexec/sftp-server",
];

/// The sftp server as stock sshd configs run it: the external `sftp-server`, started
/// through the user's shell like any remote command (`soku serve` included), so that
/// scp, sftp and soku pay the same start-up (the user's shell rc: 85 ms for root on the
/// bench machine). `internal-sftp` (in sshd itself) only where none is installed.
fn sftp_server() -> &'static str {
    SFTP_SERVERS.into_iter().find(|p| Path::new(p).exists()).unwrap_or("internal-sftp")
}

fn write_configs(d: &Path, addr: Ipv4Addr, port: u16) -> std::io::Result<()> {
    let host_pub = std::fs::read_to_string(d.join("host_key.pub"))?;
    let key: Vec<&str> = host_pub.split_whitespace().take(2).collect();
    let key = key.join(" ");
    let name = if port == 22 { addr.to_string() } else { format!("[{addr}]:{port}") };
    let known = format!("{name} {key}\n{TEST_HOST} {key}\n");
    std::fs::write(d.join("known_hosts"), known)?;

    let mut cfg = String::new();
    let p = |name: &str| d.join(name).display().to_string();
    for line in [
        format!("ListenAddress {addr}"),
        format!("Port {port}"),
        format!("HostKey {}", p("host_key")),
        format!("AuthorizedKeysFile {}", p("authorized_keys")),
        format!("PidFile {}", p("sshd.pid")),
        "PubkeyAuthentication yes".to_string(),
        "PasswordAuthentication no".to_string(),
        "KbdInteractiveAuthentication no".to_string(),
        "UsePAM no".to_string(),
        "PermitRootLogin prohibit-password".to_string(),
        "StrictModes no".to_string(),
        "MaxStartups 200".to_string(),
        "MaxSessions 100".to_string(),
        // A test key may set the remote account's HOME and PATH (`environment=` in
        // authorized_keys), and nothing else.
        "PermitUserEnvironment HOME,PATH".to_string(),
        format!("Subsystem sftp {}", sftp_server()),
    ] {
        let _ = writeln!(cfg, "{line}");
    }
    std::fs::write(d.join("sshd_config"), cfg)?;

    let client = format!(
        "Host {TEST_HOST}\n  HostName {addr}\n  Port {port}\n  User {user}\n  \
         IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n  \
         GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n  \
         LogLevel ERROR\n",
        user = current_user(),
        key = p("user_key"),
        known = p("known_hosts"),
    );
    std::fs::write(d.join("ssh_config"), client)
}
