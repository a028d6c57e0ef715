//! One ssh login shared by the copies to a host that follow each other: OpenSSH's
//! connection multiplexing (`ControlMaster`, ssh_config(5)), set up by soku when the
//! user's own configuration does not mention it.
//!
//! A login costs many round trips (TCP, key exchange, authentication, session, exec:
//! ~14 on OpenSSH 9, 1.4-1.8 s at 100 ms); a copy that opens a session on an existing
//! master pays about two. The first copy's ssh becomes the master
//! (`ControlMaster=auto`) and stays [`PERSIST`] after its last session, so a copy that
//! follows within that time (a script's next file, a rerun) skips the login.
//!
//! - **The user decides first.** Nothing is added when the user's options name any
//!   `Control*` option (`-o ControlMaster=no` turns sharing off), or when `ssh -G`
//!   shows a ControlMaster or ControlPath of their config: theirs applies as it is.
//! - **Which master.** The socket's name is a hash of `ssh -G`'s whole resolved
//!   configuration (host, port, user, keys, known_hosts, jump hosts, ...), of the
//!   network namespace and of the user id: a copy with other options or from another
//!   namespace never lands on a master made for something else.
//! - **A master that does not answer** (its network went away while it idled) is asked
//!   to stop listening (`ssh -O stop`; its open sessions go on) once a copy got no hello
//!   through it within [`ATTACH_TIMEOUT`]; that copy logs in afresh. The master is
//!   given a `ServerAliveInterval` of [`KEEPALIVE`] (unless the user's config sets one;
//!   `BatchMode`'s implied 300 s does not count) so that it ends on its own within a
//!   minute on a dead path.
//! - **Reconnects** after a lost connection log in afresh, without the master (the
//!   path that failed may be the master's own).
//! - A master refusing another session (sshd's `MaxSessions`, 10 by default) makes ssh
//!   log in on its own; [`is_multiplexing_chatter`] keeps its notes about that off the
//!   user's terminal (`stderr.rs`).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::carrier::tcp_probe::LoginAddress;
use crate::client::private_dir::soku_runtime_dir;

/// How long the master stays after its last session ends.
pub const PERSIST: Duration = Duration::from_secs(60);
/// Keep-alive interval asked of the master: a master on a dead path ends after three
/// unanswered ones (ssh's `ServerAliveCountMax`).
const KEEPALIVE: Duration = Duration::from_secs(15);
/// How long a copy waits for the server's hello through an existing master before it
/// gives up on that master: a session on a live one takes about two round trips and
/// the remote shell's start.
pub const ATTACH_TIMEOUT: Duration = Duration::from_secs(5);
/// Bounds `ssh -G` and `ssh -O stop`: both only read config or talk to a local socket.
const LOCAL_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest socket path: `sun_path` holds 108 bytes with its NUL, and ssh binds the
/// master's socket under a temporary name 17 bytes longer before renaming it.
const MAX_SOCKET_PATH: usize = 107 - 17;

/// A login shared through a master at `socket`.
#[derive(Debug, Clone)]
pub struct SharedLogin {
    /// The master's control socket.
    socket: PathBuf,
    /// Ask the master for keep-alives (the user's config sets none).
    keepalive: bool,
    /// How soku dials the login's TCP connection itself, if it does (see [`Dial`]).
    dial: Option<Dial>,
    /// Where ssh connects, when it connects to the host itself.
    login_at: Option<LoginAddress>,
}

/// The login's TCP connection made by soku with `TCP_NODELAY` and handed to ssh
/// (`ProxyCommand=soku proxy --pass-fd %h %p`, `ProxyUseFdpass=yes`; see
/// `soku_relay::dial` for why). Only when ssh would connect directly: the user's
/// config names no ProxyCommand, ProxyJump, BindAddress or BindInterface; ssh's
/// AddressFamily and ConnectTimeout are passed on. Measured on the emulated
/// 100 Mbit/s x 100 ms path: `lab/2026-11-25-nodelay-login`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Dial {
    /// `any`, `inet` or `inet6`.
    family: String,
    /// Seconds, if the user's config sets a ConnectTimeout.
    timeout: Option<u64>,
    /// Where the dialer leaves its error: ssh sends a persistent master's ProxyCommand
    /// output to /dev/null, so the copy reads it from here when ssh fails.
    errors: PathBuf,
}

/// Why a copy does not share its login, for `-v`.
#[derive(Debug, PartialEq, Eq)]
pub enum NotShared {
    /// The user's options or config set up multiplexing their own way.
    UsersOwn,
    /// `ssh -G` failed or does not look like OpenSSH's.
    NoConfig(String),
    /// This system's ssh shares no logins (Windows' `ssh.exe`).
    NotHere,
    /// No directory for the socket (no `$XDG_RUNTIME_DIR`, `$XDG_CACHE_HOME` or
    /// `$HOME`), or one that is not private to this user, or a path too long.
    NoPlace(String),
}

impl std::fmt::Display for NotShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotShared::UsersOwn => f.write_str("your ssh options or config set ControlMaster"),
            NotShared::NoConfig(why) => write!(f, "`ssh -G` did not say how ssh connects: {why}"),
            NotShared::NotHere => f.write_str("this system's ssh has no ControlMaster"),
            NotShared::NoPlace(why) => write!(f, "no place for the control socket: {why}"),
        }
    }
}

impl SharedLogin {
    /// Decides whether copies to `destination` through `program` with `options` share
    /// a login, and where its master's socket is.
    pub async fn for_destination(
        program: &str,
        options: &[String],
        destination: &str,
    ) -> Result<SharedLogin, NotShared> {
        if !crate::sys::SSH_SHARES_LOGINS {
            return Err(NotShared::NotHere);
        }
        if options.iter().any(|o| names_control_option(o)) {
            return Err(NotShared::UsersOwn);
        }
        let config = resolved_config(program, options, destination).await?;
        let settings = ResolvedConfig::parse(&config)?;
        if settings.users_own_multiplexing() {
            return Err(NotShared::UsersOwn);
        }
        let dir = soku_runtime_dir("ssh").map_err(NotShared::NoPlace)?;
        let socket = dir.join(socket_name(program, &config));
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(NotShared::NoPlace(format!("{} is too long", socket.display())));
        }
        let login_at = settings.login_address();
        let mut dial = settings.dial.clone();
        // ssh asks about a host key it has not seen with the address it connected to,
        // which a passed socket does not tell it: the question would read
        // `(<no hostip for proxy command>)`. The first login connects as ssh does. A live
        // master means a login already took the key, so there is nothing to look up.
        if dial.is_some()
            && settings.asks_about_keys
            && !socket.exists()
            && !host_key_known(&settings).await
        {
            dial = None;
        }
        let dial = dial.filter(|_| std::env::var_os("SOKU_NO_DIAL").is_none()).map(|d| {
            let errors = dir.join(format!("dial-{}.err", std::process::id()));
            let _ = std::fs::remove_file(&errors);
            Dial { errors, ..d }
        });
        Ok(SharedLogin { socket, keepalive: settings.keepalive_unset, dial, login_at })
    }

    /// The ssh options that make or use the master.
    pub fn ssh_options(&self) -> Vec<String> {
        let mut options = vec![
            "-oControlMaster=auto".to_string(),
            format!("-oControlPath={}", self.socket.display()),
            format!("-oControlPersist={}", PERSIST.as_secs()),
        ];
        if self.keepalive {
            options.push(format!("-oServerAliveInterval={}", KEEPALIVE.as_secs()));
        }
        if let Some(command) = self.dial.as_ref().and_then(Dial::proxy_command) {
            options.push(format!("-oProxyCommand={command}"));
            options.push("-oProxyUseFdpass=yes".to_string());
        }
        options
    }

    /// Where the dialer leaves its error, when soku dials the login's connection.
    pub fn dial_errors(&self) -> Option<&std::path::Path> {
        self.dial.as_ref().map(|d| d.errors.as_path())
    }

    /// Where ssh connects to log in, when it connects to the host itself (no proxy):
    /// a copy through a kept server times TCP handshakes there (`crate::carrier::tcp_probe`).
    pub fn login_address(&self) -> Option<&LoginAddress> {
        self.login_at.as_ref()
    }

    /// The master's control socket.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// Whether a master is there to attach to (its socket exists).
    pub fn master_exists(&self) -> bool {
        self.socket.exists()
    }

    /// Asks the master to stop taking sessions and remove its socket (`ssh -O stop`);
    /// its open sessions go on. If it does not answer, its socket is removed here, so
    /// the next copy makes a master of its own.
    pub async fn retire_master(&self, program: &str, options: &[String], destination: &str) {
        let mut cmd = Command::new(program);
        cmd.args(options)
            .arg(format!("-oControlPath={}", self.socket.display()))
            .args(["-O", "stop", "--", destination])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let stopped = match cmd.spawn() {
            Ok(mut child) => tokio::time::timeout(LOCAL_TIMEOUT, child.wait())
                .await
                .is_ok_and(|status| status.is_ok_and(|s| s.success())),
            Err(_) => false,
        };
        if !stopped {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

/// Whether an ssh option (`-oKey=value`, or a value that followed `-o`) is one of
/// `ControlMaster`, `ControlPath` or `ControlPersist`, spelled in any case.
fn names_control_option(option: &str) -> bool {
    let option = option.strip_prefix("-o").unwrap_or(option).trim_start();
    let key = option.split(|c: char| c == '=' || c.is_whitespace()).next().unwrap_or("");
    ["controlmaster", "controlpath", "controlpersist"].contains(&key.to_ascii_lowercase().as_str())
}

/// `ssh [options] -G -- destination`: the configuration ssh would use, resolved.
async fn resolved_config(
    program: &str,
    options: &[String],
    destination: &str,
) -> Result<String, NotShared> {
    let mut cmd = Command::new(program);
    cmd.args(options)
        .args(["-G", "--", destination])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(LOCAL_TIMEOUT, cmd.output())
        .await
        .map_err(|_| NotShared::NoConfig(format!("no answer in {} s", LOCAL_TIMEOUT.as_secs())))?
        .map_err(|e| NotShared::NoConfig(format!("cannot run {program}: {e}")))?;
    if !out.status.success() {
        return Err(NotShared::NoConfig(format!("{program} -G exited with {}", out.status)));
    }
    String::from_utf8(out.stdout).map_err(|_| NotShared::NoConfig("output not UTF-8".into()))
}

impl Dial {
    /// ssh's ProxyCommand line: this soku, quoted for the shell ssh runs it with, and
    /// `%` doubled where ssh would expand it. None if a path cannot be named.
    fn proxy_command(&self) -> Option<String> {
        let word = |path: &std::path::Path| {
            path.to_str().map(|p| crate::client::launch::shell::shell_quote(p).replace('%', "%%"))
        };
        let exe = word(&std::env::current_exe().ok()?)?;
        let mut command = format!("{exe} proxy --pass-fd --family {}", self.family);
        if let Some(secs) = self.timeout {
            command.push_str(&format!(" --connect-timeout {secs}"));
        }
        command.push_str(&format!(" --error-file {} %h %p", word(&self.errors)?));
        Some(command)
    }
}

/// What soku reads of `ssh -G`'s output (lowercase keywords, one `key value` per line).
#[derive(Debug, PartialEq, Eq)]
struct ResolvedConfig {
    control_master: String,
    control_path: bool,
    keepalive_unset: bool,
    /// Set when ssh would connect directly, so soku may dial for it.
    dial: Option<Dial>,
    /// `hostname` and `port`.
    host: String,
    port: Option<u16>,
    /// ssh may ask the user about an unknown host key: `stricthostkeychecking ask`
    /// without `batchmode yes`.
    asks_about_keys: bool,
    /// The name ssh looks the host key up by: `hostkeyalias`, else `hostname`
    /// (as `[hostname]:port` off port 22).
    key_name: String,
    /// `userknownhostsfile` and `globalknownhostsfile`, in ssh's order.
    known_hosts: Vec<PathBuf>,
}

impl ResolvedConfig {
    fn parse(config: &str) -> Result<ResolvedConfig, NotShared> {
        let mut control_master = None;
        let mut control_path = false;
        let mut keepalive = "0".to_string();
        let mut batch_mode = false;
        let mut dial =
            Some(Dial { family: "any".to_string(), timeout: None, errors: PathBuf::new() });
        let (mut host, mut port) = (String::new(), None);
        let (mut strict, mut alias, mut known_hosts) = (String::new(), None, Vec::new());
        for line in config.lines() {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            match key {
                "controlmaster" => control_master = Some(value.to_string()),
                "controlpath" => control_path = !value.is_empty() && value != "none",
                "serveraliveinterval" => keepalive = value.to_string(),
                "batchmode" => batch_mode = value == "yes",
                "hostname" => host = value.to_string(),
                "port" => port = value.parse().ok(),
                "stricthostkeychecking" => strict = value.to_string(),
                "hostkeyalias" if !value.is_empty() && value != "none" => {
                    alias = Some(value.to_string())
                }
                "userknownhostsfile" | "globalknownhostsfile" => {
                    known_hosts.extend(value.split_whitespace().map(PathBuf::from))
                }
                // The user's own way of connecting: ssh connects as they said.
                "proxycommand" | "proxyjump" | "bindaddress" | "bindinterface"
                    if !value.is_empty() && value != "none" =>
                {
                    dial = None
                }
                "addressfamily" => {
                    if let Some(d) = dial.as_mut().filter(|_| is_family(value)) {
                        d.family = value.to_string();
                    } else {
                        dial = None;
                    }
                }
                "connecttimeout" if value != "none" => match value.parse::<u64>() {
                    Ok(secs) => {
                        if let Some(d) = dial.as_mut() {
                            d.timeout = Some(secs);
                        }
                    }
                    Err(_) => dial = None,
                },
                _ => {}
            }
        }
        // ssh_config(5): BatchMode sets ServerAliveInterval to 300 unless it is given.
        let keepalive_unset = keepalive == "0" || batch_mode && keepalive == "300";
        // OpenSSH's -G always prints controlmaster: without it, this is not that ssh.
        let control_master =
            control_master.ok_or_else(|| NotShared::NoConfig("no controlmaster line".into()))?;
        let asks_about_keys = strict == "ask" && !batch_mode;
        let key_name = match (alias, port) {
            (Some(alias), _) => alias,
            (None, Some(port)) if port != 22 => format!("[{host}]:{port}"),
            (None, _) => host.clone(),
        };
        Ok(ResolvedConfig {
            control_master,
            control_path,
            keepalive_unset,
            dial,
            host,
            port,
            asks_about_keys,
            key_name,
            known_hosts,
        })
    }

    /// Where ssh connects, when it connects to the host itself (as soku may dial it).
    fn login_address(&self) -> Option<LoginAddress> {
        let dial = self.dial.as_ref()?;
        let port = self.port?;
        (!self.host.is_empty()).then(|| LoginAddress {
            host: self.host.clone(),
            port,
            family: dial.family.clone(),
        })
    }

    /// The user's config multiplexes: a master of theirs (any ControlMaster but `false`),
    /// or a ControlPath that ssh uses to find one.
    fn users_own_multiplexing(&self) -> bool {
        self.control_master != "false" || self.control_path
    }
}

/// Whether one of ssh's known_hosts files holds a key for the host, as
/// `ssh-keygen -F` finds it (hashed names included). Anything that cannot be read
/// counts as not known: the login then connects as ssh does, which is always safe.
async fn host_key_known(config: &ResolvedConfig) -> bool {
    for file in config.known_hosts.iter().filter(|f| f.is_file()) {
        let mut cmd = Command::new("ssh-keygen");
        cmd.arg("-F")
            .arg(&config.key_name)
            .arg("-f")
            .arg(file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if let Ok(Ok(status)) = tokio::time::timeout(LOCAL_TIMEOUT, cmd.status()).await {
            if status.success() {
                return true;
            }
        }
    }
    false
}

fn is_family(value: &str) -> bool {
    matches!(value, "any" | "inet" | "inet6")
}

/// 24 hex digits of BLAKE3 over the program, `ssh -G`'s output, this process's network
/// namespace and user id: equal only for copies that would log in the same way from
/// the same place. The log level (`-v`, `-q`) is left out: it changes how ssh talks
/// to the user, not where it logs in.
fn socket_name(program: &str, config: &str) -> String {
    let netns = crate::sys::netns_id();
    let uid = crate::sys::user_id();
    let mut hasher = blake3::Hasher::new();
    hasher.update(program.as_bytes()).update(&[0]);
    for line in config.lines().filter(|line| !line.starts_with("loglevel ")) {
        hasher.update(line.as_bytes()).update(b"\n");
    }
    hasher.update(&netns.to_le_bytes()).update(&uid.to_le_bytes());
    let hex = hasher.finalize().to_hex();
    hex[..24].to_string()
}

/// Lines ssh prints when a master refuses a session or another copy made the master
/// first; ssh then logs in on its own, so they say nothing the user must act on.
pub fn is_multiplexing_chatter(line: &str) -> bool {
    line.starts_with("mux_client_")
        || line.starts_with("muxclient")
        || line.starts_with("ControlSocket ")
        || line.starts_with("Control socket ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_control_options_are_found_in_any_spelling() {
        for option in [
            "ControlMaster=no",
            "-oControlPath=none",
            "controlpersist 10",
            "CONTROLMASTER=auto",
            "-o ControlMaster=yes",
        ] {
            assert!(names_control_option(option), "{option}");
        }
        for option in ["-oClearAllForwardings=yes", "Port=22", "ControlMasterX=1", "-T"] {
            assert!(!names_control_option(option), "{option}");
        }
    }

    #[test]
    fn ssh_g_output_says_whose_multiplexing_applies() {
        let plain = "user root\nhostname h\ncontrolmaster false\nserveraliveinterval 0\n";
        let parsed = ResolvedConfig::parse(plain).expect("parses");
        assert!(!parsed.users_own_multiplexing());
        assert!(parsed.keepalive_unset);

        let auto = "controlmaster auto\ncontrolpath ~/.ssh/cm-%C\n";
        assert!(ResolvedConfig::parse(auto).expect("parses").users_own_multiplexing());
        let path_only = "controlmaster false\ncontrolpath /tmp/m\n";
        assert!(ResolvedConfig::parse(path_only).expect("parses").users_own_multiplexing());
        let keepalive = "controlmaster false\nserveraliveinterval 30\n";
        assert!(!ResolvedConfig::parse(keepalive).expect("parses").keepalive_unset);
        let batch = "controlmaster false\nbatchmode yes\nserveraliveinterval 300\n";
        assert!(ResolvedConfig::parse(batch).expect("parses").keepalive_unset, "implied");
        let chosen = "controlmaster false\nbatchmode no\nserveraliveinterval 300\n";
        assert!(!ResolvedConfig::parse(chosen).expect("parses").keepalive_unset);

        let not_openssh = "usage: something else\n";
        assert!(matches!(ResolvedConfig::parse(not_openssh), Err(NotShared::NoConfig(_))));
    }

    #[test]
    fn soku_dials_only_where_ssh_would_connect_directly() {
        let direct = "controlmaster false\naddressfamily any\nconnecttimeout none\n";
        let dial = ResolvedConfig::parse(direct).expect("parses").dial;
        assert_eq!(
            dial,
            Some(Dial { family: "any".into(), timeout: None, errors: PathBuf::new() })
        );
        let chosen = "connecttimeout 7\ncontrolmaster false\naddressfamily inet6\n";
        let dial = ResolvedConfig::parse(chosen).expect("parses").dial;
        assert_eq!(
            dial,
            Some(Dial { family: "inet6".into(), timeout: Some(7), errors: PathBuf::new() })
        );
        for users_own in [
            "proxycommand nc %h %p",
            "proxyjump bastion",
            "bindaddress 192.0.2.1",
            "bindinterface eth1",
            "addressfamily something-new",
            "connecttimeout soon",
        ] {
            let config = format!("controlmaster false\n{users_own}\naddressfamily any\n");
            let parsed = ResolvedConfig::parse(&config).expect("parses");
            assert_eq!(parsed.dial, None, "{users_own}");
        }
        let unset = "controlmaster false\nproxycommand none\nproxyjump none\n";
        assert!(ResolvedConfig::parse(unset).expect("parses").dial.is_some());
    }

    #[test]
    fn the_host_key_is_looked_up_by_the_name_ssh_uses() {
        let config = |extra: &str| {
            let text = format!("hostname h.example\ncontrolmaster false\n{extra}");
            ResolvedConfig::parse(&text).expect("parses")
        };
        assert_eq!(config("port 22\n").key_name, "h.example");
        assert_eq!(config("port 2222\n").key_name, "[h.example]:2222");
        assert_eq!(config("port 2222\nhostkeyalias box\n").key_name, "box");
        let files = config("userknownhostsfile /u/kh /u/kh2\nglobalknownhostsfile /etc/kh\n");
        let want: Vec<PathBuf> = ["/u/kh", "/u/kh2", "/etc/kh"].map(PathBuf::from).into();
        assert_eq!(files.known_hosts, want);
        assert!(config("stricthostkeychecking ask\n").asks_about_keys);
        assert!(!config("stricthostkeychecking ask\nbatchmode yes\n").asks_about_keys);
        for strict in ["yes", "accept-new", "false"] {
            let parsed = config(&format!("stricthostkeychecking {strict}\n"));
            assert!(!parsed.asks_about_keys, "{strict}");
        }
    }

    #[test]
    fn the_login_address_is_known_only_where_ssh_connects_itself() {
        let direct = "hostname 10.0.0.2\nport 2222\ncontrolmaster false\naddressfamily inet\n";
        let at = ResolvedConfig::parse(direct).expect("parses").login_address();
        let want = LoginAddress { host: "10.0.0.2".into(), port: 2222, family: "inet".into() };
        assert_eq!(at, Some(want));
        for config in [
            "hostname h\nport 22\ncontrolmaster false\nproxyjump bastion\n",
            "hostname h\ncontrolmaster false\n",
            "port 22\ncontrolmaster false\n",
        ] {
            let parsed = ResolvedConfig::parse(config).expect("parses");
            assert_eq!(parsed.login_address(), None, "{config}");
        }
    }

    #[test]
    fn the_dialing_command_names_this_soku_and_ssh_tokens() {
        let errors = PathBuf::from("/run/user/0/soku/ssh/dial 100%.err");
        let dial = Dial { family: "inet".into(), timeout: Some(5), errors };
        let command = dial.proxy_command().expect("this executable has a name");
        assert!(
            command.ends_with(" %h %p")
                && command.contains(" proxy --pass-fd --family inet --connect-timeout 5 "),
            "{command}"
        );
        let words =
            crate::client::launch::shell::shell_words(&command).expect("splits as a shell would");
        let exe = std::env::current_exe().expect("exe");
        assert_eq!(words[0].replace("%%", "%"), exe.to_str().expect("utf-8"));
        let at = words.iter().position(|w| w == "--error-file").expect("error file");
        assert_eq!(words[at + 1], "/run/user/0/soku/ssh/dial 100%%.err", "ssh halves the %%");
    }

    #[test]
    fn socket_names_differ_with_the_config_and_fit_a_socket_path() {
        let a = socket_name("ssh", "hostname a\nport 22\n");
        let b = socket_name("ssh", "hostname a\nport 2222\n");
        assert_ne!(a, b);
        assert_eq!(a, socket_name("ssh", "hostname a\nport 22\n"));
        assert_eq!(a, socket_name("ssh", "hostname a\nloglevel DEBUG1\nport 22\n"), "-v shares");
        assert_eq!(a.len(), 24);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn only_multiplexing_notes_are_kept_off_the_terminal() {
        assert!(is_multiplexing_chatter(
            "mux_client_request_session: session request failed: Session open refused by peer"
        ));
        assert!(is_multiplexing_chatter(
            "ControlSocket /run/user/0/soku/ssh/ab already exists, disabling multiplexing"
        ));
        assert!(!is_multiplexing_chatter("Permission denied (publickey)."));
        assert!(!is_multiplexing_chatter("Host key verification failed."));
    }
}
