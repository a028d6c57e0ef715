//! Starting the remote end: the user's own `ssh` (or `-S program`, or `-e CMD`), or a
//! local `soku serve` for `soku demo` and local-to-local copies. Copies through ssh
//! share one login per host while they follow each other (`shared_login.rs`).

pub mod deploy;
pub mod remote_soku;
pub mod shared_login;
pub mod shell;
mod stderr;

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

pub use self::shared_login::{NotShared, SharedLogin};
pub use self::shell::{shell_quote_all, shell_words};
pub use self::stderr::{remote_out_of_memory, ssh_login_failed, Forward};
use crate::cli::args::SshArgs;
use crate::cli::spec::Remote;
use crate::client::kept::KeptKey;

/// How long a reconnecting ssh waits for the host to answer (see [`Launcher::command`]).
pub const RECONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How to reach the host that runs `soku serve`.
#[derive(Debug, Clone)]
pub enum Launcher {
    /// Through ssh (or a program that understands ssh's options), as scp does.
    Ssh {
        /// The program (`ssh` unless `-S`).
        program: String,
        /// Options derived from scp-style flags and `-o`.
        options: Vec<String>,
        /// The login shared with the copies before and after this one, if it is.
        shared: Option<SharedLogin>,
    },
    /// A remote-shell command line replacing ssh (rsync's `-e`): `CMD [-l user] host command`.
    Rsh {
        /// The command split into words.
        words: Vec<String>,
    },
    /// This machine: run our own binary directly.
    Local,
}

impl Launcher {
    /// Builds the launcher from the ssh options; `verbose` and `quiet` are passed on.
    pub fn from_args(args: &SshArgs, verbose: u8, quiet: bool) -> anyhow::Result<Self> {
        if let Some(rsh) = &args.rsh {
            let words = shell_words(rsh)?;
            if words.is_empty() {
                anyhow::bail!("-e: empty remote shell command");
            }
            return Ok(Launcher::Rsh { words });
        }
        let mut options = vec![
            // As scp does: no X11 or agent forwarding (unless -A), no port forwards, no tty.
            "-x".to_string(),
            if args.forward_agent { "-A" } else { "-a" }.into(),
            "-T".into(),
            "-oClearAllForwardings=yes".into(),
            "-oPermitLocalCommand=no".into(),
            "-oRemoteCommand=none".into(),
            "-oRequestTTY=no".into(),
        ];
        if let Some(config) = &args.ssh_config {
            options.push("-F".into());
            options.push(config.display().to_string());
        }
        if let Some(port) = args.port {
            options.push("-p".into());
            options.push(port.to_string());
        }
        if let Some(identity) = &args.identity {
            options.push("-i".into());
            options.push(identity.display().to_string());
        }
        if let Some(jump) = &args.jump {
            options.push("-J".into());
            options.push(jump.clone());
        }
        for option in &args.ssh_options {
            options.push("-o".into());
            options.push(option.clone());
        }
        if args.batch {
            options.push("-oBatchMode=yes".into());
        }
        if let Some(cipher) = &args.ssh_cipher {
            options.push("-c".into());
            options.push(cipher.clone());
        }
        if args.ipv4 {
            options.push("-4".into());
        }
        if args.ipv6 {
            options.push("-6".into());
        }
        for _ in 0..verbose {
            options.push("-v".into());
        }
        if quiet {
            options.push("-q".into());
        }
        let program = args.ssh_program.clone().unwrap_or_else(|| "ssh".into());
        Ok(Launcher::Ssh { program, options, shared: None })
    }

    /// Makes the copies to `remote` share one ssh login (see `shared_login.rs`), unless
    /// the user's options or config decide that, or this is not ssh; says why not.
    pub async fn share_login(&mut self, remote: &Remote) -> Result<(), NotShared> {
        let Launcher::Ssh { program, options, shared } = self else {
            return Err(NotShared::NoConfig("not launched through ssh".into()));
        };
        *shared =
            Some(SharedLogin::for_destination(program, options, &remote.destination()).await?);
        Ok(())
    }

    /// How long to wait for the server's hello when the next command attaches to an
    /// existing master: one that does not answer is given up for a fresh login.
    pub fn attach_timeout(&self, reconnect: bool) -> Option<Duration> {
        match self {
            Launcher::Ssh { shared: Some(shared), .. } if !reconnect && shared.master_exists() => {
                Some(shared_login::ATTACH_TIMEOUT)
            }
            _ => None,
        }
    }

    /// Where the record of a server kept for the next copies to this host is (see
    /// `crate::client::kept`): only for a shared login.
    pub fn kept_key(&self, serve: &ServeCommand, background: bool) -> Option<KeptKey> {
        match self {
            Launcher::Ssh { program, shared: Some(shared), .. } => {
                let command = [program.clone(), serve.remote_line()];
                KeptKey::new(shared.socket(), &command, background)
            }
            _ => None,
        }
    }

    /// Where ssh connects to log in, for a shared login that connects to the host
    /// itself (`shared_login.rs`).
    pub fn login_address(&self) -> Option<crate::carrier::tcp_probe::LoginAddress> {
        match self {
            Launcher::Ssh { shared: Some(shared), .. } => shared.login_address().cloned(),
            _ => None,
        }
    }

    /// Whether soku dials the login's TCP connection for ssh (`shared_login.rs`, `Dial`).
    pub fn dials_login(&self) -> bool {
        self.dial_errors(false).is_some()
    }

    /// Where soku's dialer leaves its error for a first (not reconnecting) login.
    pub fn dial_errors(&self, reconnect: bool) -> Option<std::path::PathBuf> {
        match self {
            Launcher::Ssh { shared: Some(shared), .. } if !reconnect => {
                shared.dial_errors().map(std::path::Path::to_path_buf)
            }
            _ => None,
        }
    }

    /// After a master did not answer: asks it to stop taking sessions, and logs in
    /// without one for the rest of this command.
    pub async fn give_up_shared_login(&mut self, remote: &Remote) {
        if let Launcher::Ssh { program, options, shared } = self {
            if let Some(login) = shared.take() {
                login.retire_master(program, options, &remote.destination()).await;
            }
        }
    }

    /// The command that starts `soku serve` on `remote` (or locally). A `reconnect`
    /// after a lost connection logs in afresh, not through a shared login's master,
    /// and gives up on an unreachable host after [`RECONNECT_TIMEOUT`] instead of the
    /// kernel's two minutes (an earlier `ConnectTimeout` of the user's wins: ssh takes
    /// the first value it is given). The child's error output comes piped, for
    /// [`Forward`].
    pub fn command(
        &self,
        remote: Option<&Remote>,
        serve: &ServeCommand,
        reconnect: bool,
    ) -> anyhow::Result<Command> {
        let mut cmd = match (self, remote) {
            (Launcher::Local, _) | (_, None) => {
                let exe = std::env::current_exe()?;
                let mut cmd = Command::new(exe);
                cmd.args(serve.args()).arg("--bind").arg("127.0.0.1");
                // Our own child, not a forced command (`server/serve/fence.rs`), even when this
                // client runs in a session that sshd started as one.
                cmd.env_remove("SSH_ORIGINAL_COMMAND");
                cmd
            }
            (_, Some(remote)) => self.remote_shell(remote, serve.remote_line(), reconnect),
        };
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.kill_on_drop(true);
        Ok(cmd)
    }

    /// ssh (or `-e`'s program) running `line` in the remote shell; a local launcher
    /// runs it in `sh`.
    pub fn remote_shell(&self, remote: &Remote, line: String, reconnect: bool) -> Command {
        match self {
            Launcher::Ssh { program, options, shared } => {
                let mut cmd = Command::new(program);
                cmd.args(options);
                if reconnect {
                    cmd.arg(format!("-oConnectTimeout={}", RECONNECT_TIMEOUT.as_secs()));
                } else if let Some(shared) = shared {
                    cmd.args(shared.ssh_options());
                }
                cmd.arg("--").arg(remote.destination());
                cmd.arg(line);
                cmd
            }
            Launcher::Rsh { words } => {
                let mut cmd = Command::new(&words[0]);
                cmd.args(&words[1..]);
                if let Some(user) = &remote.user {
                    cmd.arg("-l").arg(user);
                }
                cmd.arg(&remote.host).arg(line);
                cmd
            }
            Launcher::Local => {
                let mut cmd = Command::new("sh");
                cmd.arg("-c").arg(line);
                cmd
            }
        }
    }
}

/// The remote end's command line: which soku, and what `soku serve` is told.
#[derive(Debug, Clone)]
pub struct ServeCommand {
    /// The remote soku the user named (`--remote-soku`); `None`: the first found on
    /// PATH or where users install it (`remote_soku.rs`).
    pub program: Option<String>,
    /// The ports it may listen on for the data (`--remote-ports`).
    pub ports: Option<std::ops::RangeInclusive<u16>>,
}

impl ServeCommand {
    /// From the options every command that reaches a remote host shares.
    pub fn from_args(args: &SshArgs) -> ServeCommand {
        ServeCommand { program: args.remote_soku.clone(), ports: args.remote_ports.clone() }
    }

    /// `serve [--ports LO-HI]`.
    fn args(&self) -> Vec<String> {
        let mut words = vec!["serve".to_string()];
        if let Some(ports) = &self.ports {
            words.push("--ports".into());
            words.push(format!("{}-{}", ports.start(), ports.end()));
        }
        words
    }

    /// The command line the remote shell runs.
    fn remote_line(&self) -> String {
        remote_soku::command_line(self.program.as_deref(), &shell_quote_all(&self.args()))
    }
}

#[cfg(test)]
mod tests {
    use super::shell::shell_quote;

    /// `--remote-ports` reaches `soku serve` as `--ports`, through ssh and through `-e`.
    #[test]
    fn the_port_range_is_passed_to_the_server() {
        let serve = ServeCommand { program: Some("soku".into()), ports: Some(40000..=40100) };
        let remote =
            Remote { user: None, host: "h".into(), path: soku_proto::name::Name::default() };
        let want = "soku serve --ports 40000-40100";
        let ssh = Launcher::Ssh { program: "ssh".into(), options: vec![], shared: None };
        let rsh = Launcher::Rsh { words: vec!["rsh".into(), "-x".into()] };
        for launcher in [ssh, rsh] {
            let cmd = launcher.command(Some(&remote), &serve, false).expect("command");
            let last = cmd.as_std().get_args().last().expect("args").to_str().expect("utf-8");
            assert_eq!(last, want);
        }
    }
    use super::*;

    /// Without `--remote-soku` the remote shell runs the script that finds soku, with
    /// the server's arguments after it, as the forced-command fence reads them
    /// (`server/serve/fence.rs`).
    #[test]
    fn without_a_named_soku_the_remote_looks_for_one() {
        let serve = ServeCommand { program: None, ports: Some(40000..=40100) };
        let remote =
            Remote { user: None, host: "h".into(), path: soku_proto::name::Name::default() };
        let ssh = Launcher::Ssh { program: "ssh".into(), options: vec![], shared: None };
        let cmd = ssh.command(Some(&remote), &serve, false).expect("command");
        let last = cmd.as_std().get_args().last().expect("args").to_str().expect("utf-8");
        let version = env!("CARGO_PKG_VERSION");
        let want = ["sh", "-c", remote_soku::FIND_SOKU, version, "serve", "--ports", "40000-40100"];
        assert_eq!(shell_words(last).expect("splits"), want);
    }

    /// A local copy's server is ours, whatever the session this client runs in: with
    /// sshd's `SSH_ORIGINAL_COMMAND` inherited, it took itself for a forced command
    /// and refused the copy.
    /// `-A` turns ssh's agent forwarding on in place of scp's `-a`; an ssh cipher from
    /// `-c` goes to ssh as its `-c`.
    #[test]
    fn the_agent_and_an_ssh_cipher_reach_ssh() {
        let plain = SshArgs::default();
        let Launcher::Ssh { options, .. } = Launcher::from_args(&plain, 0, false).expect("ssh")
        else {
            panic!("not ssh");
        };
        assert!(options.contains(&"-a".to_string()) && !options.contains(&"-A".to_string()));
        let asked = SshArgs {
            forward_agent: true,
            ssh_cipher: Some("aes128-ctr".into()),
            ..SshArgs::default()
        };
        let Launcher::Ssh { options, .. } = Launcher::from_args(&asked, 0, false).expect("ssh")
        else {
            panic!("not ssh");
        };
        assert!(options.contains(&"-A".to_string()) && !options.contains(&"-a".to_string()));
        assert!(options.windows(2).any(|w| w[0] == "-c" && w[1] == "aes128-ctr"));
    }

    #[test]
    fn a_local_server_is_never_taken_for_a_forced_command() {
        let serve = ServeCommand { program: None, ports: None };
        let cmd = Launcher::Local.command(None, &serve, false).expect("command");
        let mut envs = cmd.as_std().get_envs();
        assert!(envs.any(|(k, v)| k == "SSH_ORIGINAL_COMMAND" && v.is_none()));
    }

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(
            shell_words(r#"ssh -p 2222 -o "A B" 'c d' e\ f"#).expect("ok"),
            ["ssh", "-p", "2222", "-o", "A B", "c d", "e f"]
        );
        assert!(shell_words("'open").is_err());
    }

    #[test]
    fn unsplittable_lines_say_why() {
        let why = |line: &str| shell_words(line).expect_err(line).to_string();
        assert_eq!(why("ssh 'open"), r#"unterminated ' in "ssh 'open""#);
        assert_eq!(why(r#"ssh -o "A"#), r#"unterminated " in "ssh -o \"A""#);
        assert_eq!(why(r"ssh \"), r#"trailing \ in "ssh \\""#);
        assert!(why(r#"ssh "a\"#).starts_with("unterminated \""));
        assert_eq!(shell_words("ssh # a comment's end").expect("ok"), ["ssh"]);
    }

    #[test]
    fn quoting_survives_a_shell() {
        assert_eq!(shell_quote("plain/path"), "plain/path");
        assert_eq!(shell_quote("it's here"), r"'it'\''s here'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("A=b"), "'A=b'", "not an assignment when it is the first word");
    }

    mod props {
        //! Properties of the quoting for the remote shell and of `-e` splitting; proptest
        //! keeps the seeds of failures it finds in `crates/soku/proptest-regressions/`
        //! (worth committing).

        use std::ffi::OsStr;

        use proptest::prelude::*;

        use super::*;

        /// Words as users name paths and programs: anything, the characters a shell
        /// treats specially, and a few known troublemakers.
        fn word() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<String>(),
                "[ -~]{0,12}",
                "[a-z'\" \t\n$`\\\\#~*?!={}()<>|&;é]{0,10}",
                prop::sample::select(vec![
                    "", "'", "\"", "\\", "''", "'\\''", "$HOME", "`id`", "$(id)", "#x", "~", "a b",
                    "\n", "it's", "ü ñ", "-e", "--", "*", "a=b", "\u{a0}", "\r\n",
                ])
                .prop_map(str::to_string),
            ]
        }

        fn words() -> impl Strategy<Value = Vec<String>> {
            prop::collection::vec(word(), 0..5)
        }

        proptest! {
            /// Catches: a word that is not quoted although it needs it (whitespace, a
            /// quote, `#` starting a comment), a `'` inside a word closed badly, an empty
            /// word that vanishes, and words that run together.
            #[test]
            fn quoted_words_split_back_to_themselves(words in words()) {
                let line = shell_quote_all(&words);
                prop_assert_eq!(shlex::split(&line), Some(words), "{:?}", line);
            }

            /// Catches: the same for the command soku really hands to ssh, whatever
            /// `--remote-soku` names, and the `--` that keeps the host from being read as
            /// an option.
            #[test]
            fn the_remote_command_splits_back(
                remote_soku in word(),
                host in "[a-z][a-z0-9.-]{0,10}",
            ) {
                let options = vec!["-T".to_string()];
                let launcher = Launcher::Ssh { program: "ssh".into(), options, shared: None };
                let remote = Remote { user: None, host: host.clone(), path: soku_proto::name::Name::default() };
                let serve = ServeCommand { program: Some(remote_soku.clone()), ports: None };
                let cmd = launcher.command(Some(&remote), &serve, false).expect("command");
                let args: Vec<&OsStr> = cmd.as_std().get_args().collect();
                let head = [OsStr::new("-T"), OsStr::new("--"), OsStr::new(&host)];
                prop_assert_eq!(&args[..3], head);
                let line = args[3].to_str().expect("utf-8");
                let want = vec![remote_soku, "serve".to_string()];
                prop_assert_eq!(shlex::split(line), Some(want));
            }

            /// Catches: `-e` lines that a POSIX shell would split differently from
            /// `shell_words` (lines quoted by shlex's own quoting must come back whole).
            #[test]
            fn joined_words_split_back_through_shell_words(words in words()) {
                let words: Vec<String> =
                    words.into_iter().map(|w| w.replace('\0', "")).collect();
                let line = shlex::try_join(words.iter().map(String::as_str)).expect("no NUL");
                prop_assert_eq!(shell_words(&line).expect("splits"), words);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// Catches what shlex does not model: a character left unquoted that a real
            /// shell expands or interprets (`$`, `` ` ``, `*`, `~`, `{a,b}`, `!`, `;`):
            /// `/bin/sh` must hand the words back unchanged.
            #[test]
            fn quoted_words_survive_a_real_shell(words in words()) {
                let words: Vec<String> =
                    words.into_iter().map(|w| w.replace('\0', "")).collect();
                let script = format!("printf '%s\\0' {}", shell_quote_all(&words));
                let out =
                    std::process::Command::new("sh").arg("-c").arg(&script).output().expect("sh");
                let stderr = String::from_utf8_lossy(&out.stderr);
                prop_assert!(out.status.success(), "{:?}: {}", script, stderr);
                let mut got: Vec<String> = String::from_utf8(out.stdout)
                    .expect("utf-8")
                    .split('\0')
                    .map(str::to_string)
                    .collect();
                // printf with no words still prints the format once.
                prop_assert_eq!(got.pop(), Some(String::new()));
                if words.is_empty() {
                    prop_assert_eq!(got, vec![String::new()]);
                } else {
                    prop_assert_eq!(got, words, "{:?}", script);
                }
            }
        }
    }
}
