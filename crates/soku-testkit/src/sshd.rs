//! A real OpenSSH `sshd` on 127.0.0.1 with fresh host and user keys, for end-to-end tests.
//!
//! Everything lives in one temp dir: keys, `authorized_keys`, `known_hosts`,
//! `sshd_config`, an `ssh_config` for the clients, the pid file and `sshd.log`.
//! [`Sshd::start`] waits for the daemon by polling its port (bounded, no blind sleep);
//! dropping the [`Sshd`] kills the daemon by PID and removes the dir.

use std::fmt::Write as _;
use std::net::TcpStream;
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

/// A running `sshd` on 127.0.0.1 that accepts the test user key; killed on drop.
pub struct Sshd {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Sshd {
    /// Generates keys and config in a temp dir and starts `sshd -D -e` on a free port.
    ///
    /// Panics with a clear message if `/usr/sbin/sshd` is missing or never listens.
    pub fn start() -> Sshd {
        assert!(
            Path::new(SSHD).is_file(),
            "{SSHD} not found: install openssh-server (apt-get install openssh-server)"
        );
        // sshd refuses to start without its privilege-separation dir.
        let _ = std::fs::create_dir_all("/run/sshd");
        let dir = tempfile::Builder::new().prefix("soku-sshd-").tempdir().expect("temp dir");
        let d = dir.path();
        keygen(&d.join("host_key"));
        keygen(&d.join("user_key"));
        std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys")).expect("authorized_keys");
        let mut last_log = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = crate::free_port();
            write_configs(d, port);
            let log = std::fs::File::create(d.join("sshd.log")).expect("create sshd.log");
            let child = Command::new(SSHD)
                .arg("-D")
                .arg("-e")
                .arg("-f")
                .arg(d.join("sshd_config"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {SSHD}: {e}"));
            let mut child = child;
            if wait_ready(&mut child, d, port) {
                return Sshd { child, port, dir };
            }
            let _ = child.kill();
            let _ = child.wait();
            last_log = std::fs::read_to_string(d.join("sshd.log")).unwrap_or_default();
        }
        panic!("sshd did not start listening after {PORT_ATTEMPTS} ports; last log:\n{last_log}");
    }

    /// The port sshd listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The address sshd listens on: `127.0.0.1`.
    pub fn host(&self) -> &str {
        "127.0.0.1"
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

    /// The `known_hosts` file: `[127.0.0.1]:PORT` and `soku-test-host` (for
    /// `-o HostKeyAlias=soku-test-host` when connecting through a relay on another port).
    pub fn known_hosts_file(&self) -> PathBuf {
        self.dir().join("known_hosts")
    }

    /// Client options for ssh, scp, sftp and soku, without the port: the key, the
    /// known_hosts file, strict host key checking, batch mode, quiet logging.
    pub fn ssh_args(&self) -> Vec<String> {
        let opts = [
            format!("IdentityFile={}", self.identity_file().display()),
            format!("UserKnownHostsFile={}", self.known_hosts_file().display()),
            "GlobalKnownHostsFile=/dev/null".to_string(),
            "StrictHostKeyChecking=yes".to_string(),
            "BatchMode=yes".to_string(),
            "IdentitiesOnly=yes".to_string(),
            "LogLevel=ERROR".to_string(),
        ];
        opts.into_iter().flat_map(|o| ["-o".to_string(), o]).collect()
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

    /// The `sshd.log` so far (sshd runs with `-e`), for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir().join("sshd.log")).unwrap_or_default()
    }

    fn stop(&mut self) {
        // Child::kill sends SIGKILL to this PID only; sessions already open end with
        // their clients.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Polls until sshd wrote its pid file and accepts TCP connections; false if it
/// exited (e.g. the port was taken meanwhile) or did not listen within the timeout.
fn wait_ready(child: &mut Child, dir: &Path, port: u16) -> bool {
    let pid_file = dir.join("sshd.pid");
    let addr = (std::net::Ipv4Addr::LOCALHOST, port).into();
    let deadline = Instant::now() + READY_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if pid_file.is_file()
            && TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn keygen(path: &Path) {
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-q", "-t", "ed25519", "-N", "", "-C", "soku-test", "-f"]).arg(path);
    crate::run(&mut cmd);
}

fn current_user() -> String {
    if let Some(user) = std::env::var_os("USER").filter(|u| !u.is_empty()) {
        return user.to_string_lossy().into_owned();
    }
    let out = crate::run(Command::new("id").arg("-un"));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn write_configs(d: &Path, port: u16) {
    let host_pub = std::fs::read_to_string(d.join("host_key.pub")).expect("host_key.pub");
    let key: Vec<&str> = host_pub.split_whitespace().take(2).collect();
    let key = key.join(" ");
    let known = format!("[127.0.0.1]:{port} {key}\n{TEST_HOST} {key}\n");
    std::fs::write(d.join("known_hosts"), known).expect("write known_hosts");

    let mut cfg = String::new();
    let p = |name: &str| d.join(name).display().to_string();
    for line in [
        "ListenAddress 127.0.0.1".to_string(),
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
        "Subsystem sftp internal-sftp".to_string(),
    ] {
        let _ = writeln!(cfg, "{line}");
    }
    std::fs::write(d.join("sshd_config"), cfg).expect("write sshd_config");

    let client = format!(
        "Host {TEST_HOST}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  \
         IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n  \
         GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n  \
         LogLevel ERROR\n",
        user = current_user(),
        key = p("user_key"),
        known = p("known_hosts"),
    );
    std::fs::write(d.join("ssh_config"), client).expect("write ssh_config");
}
