//! The command line: one definition from which `--help`, the man page and the shell
//! completions are all generated (`soku man`, `soku completions SHELL`).
//!
//! The copy command has scp's syntax and meaning, so `soku` is a drop-in for `scp`:
//! `soku [OPTIONS] SOURCE... TARGET`. Everything else is a subcommand; a local file that
//! happens to be named like a subcommand is written `./serve`, as with any program.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::cli::transport_mode::TransportMode;

/// Seconds to wait for QUIC and TCP before moving on, when neither the command line nor
/// a config file says.
pub const DEFAULT_QUIC_TIMEOUT_SECS: f64 = 4.0;
/// Seconds to keep reconnecting after the connection is lost, by default.
pub const DEFAULT_RETRY_FOR_SECS: u64 = 300;

/// `--chunk-size`: bytes, or with a K/KiB or M/MiB suffix, within the protocol's bounds.
fn parse_chunk_size(s: &str) -> Result<u32, String> {
    crate::cli::size::parse_size(s)
        .and_then(|b| u32::try_from(b).ok())
        .and_then(|b| soku_proto::chunk::check_chunk_size(b).ok())
        .ok_or_else(|| format!("bad chunk size {s:?}: expected 16K to 16M, e.g. 4M"))
}

/// Fast, secure file copy: scp's syntax, ssh's authentication, data over QUIC.
#[derive(Debug, Parser)]
#[command(
    name = "soku",
    version,
    about,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Examples:\n  soku big.iso user@host:/data/\n  soku -r host:results/ ./\n  soku demo            (a local copy through soku serve, no remote needed)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub copy: CopyArgs,
}

/// The scp-compatible copy: options keep scp's letters and meaning.
#[derive(Debug, Args, Clone, Default)]
pub struct CopyArgs {
    /// Sources then target: `[user@]host:path`, `[user@][v6addr]:path` or a local path.
    #[arg(value_name = "SOURCE... TARGET", required = true, num_args = 1.., action = clap::ArgAction::Append, value_parser = clap::value_parser!(std::ffi::OsString))]
    pub paths: Vec<std::ffi::OsString>,

    /// Copy directories recursively.
    #[arg(short = 'r')]
    pub recursive: bool,

    /// Preserve modification times, access times and modes. The setuid, setgid and
    /// sticky bits of what this side receives are cleared, as OpenSSH's scp clears
    /// them (--keep-special-bits keeps them).
    #[arg(short = 'p')]
    pub preserve: bool,

    /// With -p, as root: keep the setuid, setgid and sticky bits of the files and
    /// directories this side receives (a download), from a source you trust. The
    /// remote side of an upload always clears them.
    #[arg(long = "keep-special-bits", requires = "preserve")]
    pub keep_special_bits: bool,

    /// Limit the bandwidth, in Kbit/s.
    #[arg(short = 'l', value_name = "LIMIT")]
    pub limit_kbps: Option<u64>,

    /// Quiet: no progress meter, no summary, no warnings.
    #[arg(short = 'q')]
    pub quiet: bool,

    /// Verbose: say what soku does; repeat for more (also passed to ssh).
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Compress data (zstd per chunk; incompressible chunks are sent raw).
    #[arg(short = 'C')]
    pub compress: bool,

    /// Cipher for the data: aes128-gcm, aes256-gcm or chacha20-poly1305. An ssh cipher
    /// (aes128-ctr, aes256-gcm@openssh.com, ...; a comma-separated list) goes to ssh for
    /// the login, as scp's -c does; the data then keeps soku's cipher of the same
    /// algorithm, or its default.
    #[arg(short = 'c', value_name = "CIPHER")]
    pub cipher: Option<String>,

    /// Between two remote hosts, copy through this host (scp's -3, and its default):
    /// a session to each, every chunk passed on as it arrives (nothing stored here)
    /// and verified at the destination by the origin's hash.
    #[arg(short = '3', conflicts_with = "origin_copies")]
    pub through_here: bool,

    /// Between two remote hosts, have the origin host copy to the destination: soku
    /// there runs the copy over the origin's own ssh (scp's -R). The origin must be
    /// able to log in to the destination (its own keys, or yours with -A).
    #[arg(short = 'R')]
    pub origin_copies: bool,

    /// scp's legacy SCP protocol: no effect (soku speaks its own protocol over ssh).
    #[arg(short = 'O', help_heading = "scp's options that change nothing in soku")]
    pub legacy_scp: bool,

    /// scp's SFTP protocol: no effect (soku speaks its own protocol over ssh).
    #[arg(short = 's', help_heading = "scp's options that change nothing in soku")]
    pub sftp: bool,

    /// scp's "no strict filename checking": no effect. soku checks every name the
    /// server sends against the request as the server resolved it, which rejects no
    /// file the request matched.
    #[arg(short = 'T', help_heading = "scp's options that change nothing in soku")]
    pub no_name_check: bool,

    /// scp's local SFTP server program: no effect (soku runs no SFTP server).
    #[arg(
        short = 'D',
        value_name = "SFTP_SERVER_PATH",
        help_heading = "scp's options that change nothing in soku"
    )]
    pub sftp_server: Option<String>,

    /// scp's SFTP tuning (nrequests=, buffer=): no effect (soku's own pipeline sets how
    /// much is in flight).
    #[arg(
        short = 'X',
        value_name = "SFTP_OPTION",
        help_heading = "scp's options that change nothing in soku"
    )]
    pub sftp_options: Vec<String>,

    /// How to reach the remote host.
    #[command(flatten)]
    pub ssh: SshArgs,

    /// What carries the data: auto (QUIC; TLS over TCP when UDP does not get through;
    /// the ssh channel when TCP does not either), quic, tcp or ssh.
    /// Default: auto.
    #[arg(long = "transport", value_name = "HOW", value_enum)]
    pub transport: Option<TransportMode>,

    /// Seconds to wait for QUIC and TCP before moving to the next choice (default: 4).
    #[arg(long = "quic-timeout", value_name = "SECONDS")]
    pub quic_timeout: Option<f64>,

    /// Carry the data over the ssh channel itself (the same as --transport ssh).
    #[arg(long = "ssh-channel")]
    pub force_ssh_channel: bool,

    /// Yield to other traffic: the data sender's congestion controller backs off when a
    /// queue builds, so interactive and other bulk traffic keep the link (over QUIC;
    /// over TCP the kernel's congestion control runs as it is).
    #[arg(long)]
    pub background: bool,

    /// Start every file over: do not continue what an interrupted copy left, nor skip
    /// files already complete at the target (by default both are checked by hash).
    #[arg(long = "no-resume")]
    pub no_resume: bool,

    /// Do not flush each file to disk before it takes its final name (faster on slow
    /// disks; after a power cut a final name may then hold a file with missing data).
    #[arg(long = "no-fsync")]
    pub no_fsync: bool,

    /// Log in on its own instead of sharing one ssh login with the copies to the same
    /// host just before and after (by default the first copy's ssh stays a minute as
    /// an OpenSSH ControlMaster; see the README).
    #[arg(long = "no-share-login")]
    pub no_share_login: bool,

    /// When the connection is lost, log in again and resume for up to this many seconds
    /// (0: give up at once, leaving what was copied for a later run to resume; default: 300).
    #[arg(long = "retry-for", value_name = "SECONDS")]
    pub retry_for: Option<u64>,

    /// Size of the chunks each file is cut into, hashed and resumed by: 16K to 16M
    /// (default: 1M; larger chunks cost fewer hashes, smaller ones lose less to a cut).
    #[arg(long = "chunk-size", value_name = "SIZE", value_parser = parse_chunk_size)]
    pub chunk_size: Option<u32>,

    /// Seconds without a word from the peer before the copy takes it for stalled
    /// (default: 120); for tests, which cannot wait that long.
    #[arg(long = "stall-timeout", value_name = "SECONDS", hide = true)]
    pub stall_timeout: Option<u64>,

    /// Print machine-readable events (JSON lines) on stderr instead of the progress meter.
    #[arg(long = "json")]
    pub json: bool,

    /// After the copy, write a report to FILE: one self-contained HTML page (no script,
    /// nothing fetched) with goodput, RTT, loss, the congestion window and phase over
    /// time, both sides' CPU, the files, and what limited the copy.
    #[arg(long = "report", value_name = "FILE.html")]
    pub report: Option<PathBuf>,

    /// With -r (and in `soku sync`): leave out paths matching PATTERN, gitignore-style
    /// (`*.o` at any depth, `/build` from the top, `cache/` directories only, `**`
    /// across directories); repeatable. The first --include or --exclude that matches a
    /// path decides, as in rsync.
    #[arg(long, value_name = "PATTERN", help_heading = "Filters")]
    pub exclude: Vec<String>,

    /// With -r (and in `soku sync`): send paths matching PATTERN even where a later
    /// --exclude matches them.
    #[arg(long, value_name = "PATTERN", help_heading = "Filters")]
    pub include: Vec<String>,

    /// Read exclude patterns from FILE, one per line (blank lines and lines starting
    /// with `#` are skipped), in the place of this option among the others.
    #[arg(long = "exclude-from", value_name = "FILE", help_heading = "Filters")]
    pub exclude_from: Vec<PathBuf>,

    /// The include and exclude rules in command-line order, set from the above once
    /// parsed (`crate::cli::filters`).
    #[arg(skip)]
    pub filter: Vec<soku_proto::sync::FilterRule>,

    /// What `soku sync` adds to the copy; `None` for the scp-compatible command.
    #[arg(skip)]
    pub sync: Option<soku_proto::sync::SyncRules>,
}

impl CopyArgs {
    /// What the request asks of both sides, as these options say.
    pub fn copy_flags(&self) -> soku_proto::message::CopyFlags {
        soku_proto::message::CopyFlags {
            recursive: self.recursive,
            preserve: self.preserve,
            compress: self.compress,
            chunk_size: self.chunk_size.unwrap_or(soku_proto::chunk::DEFAULT_CHUNK_SIZE),
            rate_limit_bps: self.limit_kbps.map(|kbps| kbps.saturating_mul(1000)),
            resume: !self.no_resume,
            fsync: !self.no_fsync,
        }
    }

    /// What carries the data: `--ssh-channel`, `--transport`, or the default.
    pub fn transport_mode(&self) -> TransportMode {
        if self.force_ssh_channel {
            TransportMode::Ssh
        } else {
            self.transport.unwrap_or_default()
        }
    }

    /// How long to wait for QUIC and TCP before the next choice.
    pub fn quic_wait(&self) -> std::time::Duration {
        let secs = self.quic_timeout.unwrap_or(DEFAULT_QUIC_TIMEOUT_SECS).clamp(0.1, 600.0);
        std::time::Duration::from_secs_f64(secs)
    }

    /// How long the peer may say nothing before the copy takes it for stalled.
    pub fn stall_limit(&self) -> std::time::Duration {
        self.stall_timeout
            .map_or(soku_engine::link::DEFAULT_STALL_LIMIT, std::time::Duration::from_secs)
    }
}

/// How soku reaches the remote host: options passed to ssh, as scp passes them.
#[derive(Debug, Args, Clone, Default)]
pub struct SshArgs {
    /// Port to connect to on the remote host (passed to ssh as -p).
    #[arg(short = 'P', value_name = "PORT")]
    pub port: Option<u16>,

    /// Identity (private key) file for ssh.
    #[arg(short = 'i', value_name = "IDENTITY_FILE")]
    pub identity: Option<PathBuf>,

    /// Alternative ssh configuration file.
    #[arg(short = 'F', value_name = "SSH_CONFIG")]
    pub ssh_config: Option<PathBuf>,

    /// Option passed to ssh in ssh_config format (repeatable).
    #[arg(short = 'o', value_name = "SSH_OPTION")]
    pub ssh_options: Vec<String>,

    /// Connect through this jump host (passed to ssh as -J).
    #[arg(short = 'J', value_name = "DESTINATION")]
    pub jump: Option<String>,

    /// Batch mode: never ask for passwords or passphrases (ssh BatchMode=yes).
    #[arg(short = 'B')]
    pub batch: bool,

    /// Forward the ssh agent to the remote host (ssh -A), for a remote that logs in
    /// further with your keys (-R between two remote hosts). Off by default, as scp's.
    #[arg(short = 'A')]
    pub forward_agent: bool,

    /// An ssh cipher for the login (ssh -c), from the copy's -c.
    #[arg(skip)]
    pub ssh_cipher: Option<String>,

    /// Use IPv4 addresses only.
    #[arg(short = '4', conflicts_with = "ipv6")]
    pub ipv4: bool,

    /// Use IPv6 addresses only.
    #[arg(short = '6')]
    pub ipv6: bool,

    /// Program to use for the ssh connection; it must understand ssh's options (as scp -S).
    #[arg(short = 'S', value_name = "PROGRAM")]
    pub ssh_program: Option<String>,

    /// Remote shell command replacing ssh entirely (as rsync -e); run as `CMD host command`.
    #[arg(short = 'e', long = "rsh", value_name = "CMD")]
    pub rsh: Option<String>,

    /// Ports the remote soku may listen on for the data, QUIC and TCP (`LO-HI`, for a
    /// firewall that opens only those); default: any free port.
    #[arg(long = "remote-ports", value_name = "LO-HI", value_parser = crate::server::ports::parse_range)]
    pub remote_ports: Option<std::ops::RangeInclusive<u16>>,

    /// Path of soku on the remote host; a leading `~` is the remote home (default: the
    /// first `soku` on the remote PATH, in ~/.local/bin, ~/.cargo/bin or ~/bin).
    #[arg(long = "remote-soku", value_name = "PATH")]
    pub remote_soku: Option<String>,

    /// When the remote host has no soku this one can talk to, do not send one into its
    /// ~/.cache/soku/bin (by default this soku, if it is the static build for the
    /// remote's machine, or one put in ~/.cache/soku/dist).
    #[arg(long = "no-deploy")]
    pub no_deploy: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Copy a generated file through a local `soku serve` over loopback and show the result.
    Demo(DemoArgs),
    /// The remote end of a copy, started over ssh by the client; an administrator
    /// fences it in a forced command.
    #[command(
        long_about = "The remote end of a copy, `soku tunnel` and `soku diagnose`: the client \
starts it over ssh, on stdin and stdout, and it is no command to run by hand.\n\n\
An administrator can fence it for a key in authorized_keys, as rrsync fences rsync:\n\n\
  restrict,command=\"soku serve --root /data --read-only\" ssh-ed25519 AAAA...\n\n\
sshd then runs this command whatever the client asks, and soku serve takes the client's \
own serve options (the port range) from SSH_ORIGINAL_COMMAND; the fences here always win, \
and the client may only add --read-only, --write-only or --no-tunnel. A forced command, or \
a soku serve given any fence, carries no TCP connections (`soku tunnel`) unless it is also \
given --allow-tunnel. Refused jobs end with a `remote: ...` line on the client naming the \
fence."
    )]
    Serve(ServeArgs),
    /// Relay stdin/stdout to HOST:PORT with large buffers: `ssh -o ProxyCommand='soku proxy %h %p'`.
    Proxy(ProxyArgs),
    /// A standalone TCP relay with large socket buffers (many connections at once).
    Relay(RelayArgs),
    /// Carry TCP connections to a remote destination over soku's QUIC transport.
    Tunnel(TunnelArgs),
    /// Print the settings a copy to HOST would use (config files, defaults) and where
    /// each came from.
    Config(ConfigArgs),
    /// Measure the path to a host and say what limits a copy there, and what to do.
    #[command(
        long_about = "Measure the path to a host in a few seconds, over your ssh with soku \
serve on the far side, and say what limits a copy there and what to do about it.\n\n\
Measured: round trip over ssh and over QUIC, path MTU, whether UDP and TCP get through, \
the rate each way under soku's congestion controller (2.5 s of data each way), loss and \
whether it comes with a queue, each host's UDP buffer caps (net.core.rmem_max, wmem_max) \
against what the path needs, cipher speed and cores, the read speed of the local file \
system and the write speed of the remote one. It then estimates what scp and soku get \
on an upload and names the limit: the link, a UDP buffer, a disk, the CPU, or UDP being \
blocked.",
        after_help = "Examples:\n  soku diagnose user@host\n  soku diagnose --remote-path /data --json host"
    )]
    Diagnose(DiagnoseArgs),
    /// Synchronise a tree as rsync does: copy what changed, skip what did not (same
    /// size and modification time), optionally delete what the source lacks.
    #[command(
        long_about = "Synchronise as `rsync -a` does, at soku's speed: `soku sync [OPTIONS] \
SOURCE... [host:]TARGET`.\n\n\
TARGET is a directory (made if missing; the directory above it must exist). A source \
directory written with a trailing slash (`src/`) sends what it holds into TARGET; without \
one, it lands as TARGET/src, as rsync reads it. Directories are always walked, and \
modification times and modes are kept.\n\n\
A file whose copy at the target has the same size and modification time is skipped \
without either side reading it (rsync's quick check); --checksum compares the files by \
BLAKE3 instead. Everything sent is verified end to end and resumed after a cut, as in any \
copy. The summary says how many files were sent, resumed, skipped and deleted.\n\n\
The scp-compatible options apply (-P, -i, -o, -l, -C, -q, -v, ...); -r matters only \
with --files-from.",
        after_help = "Examples:\n  soku sync -n --delete src/ host:backup/src/\n  soku sync --exclude '*.o' --exclude target/ project host:work/\n  fpart -n 2 -o part src && ls part.* | parallel soku sync --files-from {} src/ host:dst/"
    )]
    Sync(Box<SyncArgs>),
    /// An interactive session as sftp's, over one login: look around, get and put at
    /// soku's speed.
    #[command(
        long_about = "An interactive session as sftp(1)'s: `soku sftp [OPTIONS] \
[user@]host[:dir]`.\n\n\
One ssh login serves the whole session (shared as a copy shares it), and a remote soku \
serve answers listings and changes for as long as it lasts. Every get and put is a soku \
copy through that login: QUIC or TCP as a copy chooses, verified end to end, resumed when \
run again, with the progress line and the summary. Ctrl-C stops a transfer, not the \
session.\n\n\
Commands: ls [-1alnrSt] [path], cd, pwd, lcd, lpwd, lls, get [-rp] remote [local], put \
[-rp] local [remote], mget, mput (globs on either side), mkdir, lmkdir, rmdir, rm, rename, \
chmod, df [-hi], !command, help, bye, exit, quit. Tab completes commands and local and \
remote paths; history is kept in $XDG_DATA_HOME/soku/sftp_history.\n\n\
With -b FILE (`-` for stdin) the commands are read from FILE as sftp reads them: each is \
echoed, the first that fails ends the batch with exit status 1 unless it is written with \
a leading `-`, and ssh may not ask for a password (BatchMode).\n\n\
The copy options apply to every transfer (-P, -i, -o, -l, -C, -q, -v, --transport, ...); \
-r and -p make every get and put recursive or preserving.",
        after_help = "Examples:\n  soku sftp user@host\n  soku sftp host:/data/results\n  printf 'cd out\\nget -r run7\\n' | soku sftp -b - host"
    )]
    Sftp(Box<SftpArgs>),
    /// Print the man page (roff) on stdout.
    Man,
    /// Print shell completions on stdout.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

/// `soku sync`: the copy's options, and rsync's that a synchronisation adds.
#[derive(Debug, Args, Clone)]
pub struct SyncArgs {
    /// The copy's options (the filters among them).
    #[command(flatten)]
    pub copy: CopyArgs,

    /// Compare files of the same size by their BLAKE3 hashes (both sides read them)
    /// instead of trusting size and modification time; only chunks that differ are
    /// sent.
    #[arg(long, help_heading = "Sync")]
    pub checksum: bool,

    /// Skip files whose copy at the target is newer than the source.
    #[arg(short = 'u', long, help_heading = "Sync")]
    pub update: bool,

    /// Delete what the target's synced directories hold that the source does not (and
    /// no --exclude protects): only after a copy in which nothing failed.
    #[arg(long, help_heading = "Sync")]
    pub delete: bool,

    /// List what would be sent and deleted, on stdout (`would send: PATH`, `would
    /// delete: PATH`), and change nothing.
    #[arg(short = 'n', long = "dry-run", help_heading = "Sync")]
    pub dry_run: bool,

    /// Send only the paths listed in FILE (`-`: stdin), one per line, relative to the
    /// one source directory, each to the same path below TARGET (as rsync's
    /// --files-from; a list from `fpart` shards a tree over several soku processes).
    /// Listed directories are made, and walked only with -r.
    #[arg(long = "files-from", value_name = "FILE", help_heading = "Sync")]
    pub files_from: Option<PathBuf>,
}

/// `soku sftp`: the copy's options (applied to every transfer), the destination, and
/// sftp's batch file.
#[derive(Debug, Args, Clone)]
pub struct SftpArgs {
    /// The copy's options; its one path is the destination, `[user@]host[:dir]`.
    #[command(flatten)]
    pub copy: CopyArgs,

    /// Read the commands from FILE (`-`: stdin); the first that fails ends the batch
    /// (exit status 1) unless written with a leading `-`.
    #[arg(short = 'b', value_name = "FILE", help_heading = "Session")]
    pub batch_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// The host, as it would be written in a copy (`[user@]host`); without it, the
    /// settings of a local copy.
    pub host: Option<String>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Size of the generated file, in MiB.
    #[arg(long, default_value_t = 256)]
    pub size_mib: u64,
    /// Carry the data over the control channel instead of QUIC (exercises the fallback).
    #[arg(long = "ssh-channel")]
    pub force_ssh_channel: bool,
    /// What carries the data: auto, quic, tcp or ssh (as for a copy).
    #[arg(long = "transport", value_name = "HOW", value_enum, default_value_t = TransportMode::Auto)]
    pub transport: TransportMode,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address family and interface to bind the UDP port on (default: from SSH_CONNECTION).
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<std::net::IpAddr>,
    /// Listen for the data (QUIC and TLS over TCP) only on ports in LO-HI (a range a
    /// firewall opens); default: any free port.
    #[arg(long = "ports", value_name = "LO-HI", value_parser = crate::server::ports::parse_range)]
    pub ports: Option<std::ops::RangeInclusive<u16>>,
    /// Seconds without a word from the client (not even a keep-alive) before it is
    /// taken for stalled and the server exits (tests shorten it).
    #[arg(long = "stall-timeout", value_name = "SECONDS", default_value_t = 120, hide = true)]
    pub stall_timeout: u64,
    /// Refuse every job that would write, create, delete or rename anything: uploads
    /// are refused; downloads go on, and `soku diagnose` without its disk write test.
    #[arg(long = "read-only", conflicts_with = "write_only")]
    pub read_only: bool,
    /// Refuse downloads and whatever shows what is there: uploads only, each file
    /// sent whole (the sender is told of nothing held, which resume would compare).
    #[arg(long = "write-only")]
    pub write_only: bool,
    /// Serve only what lies beneath DIR: every path the client names is taken from
    /// DIR, an absolute one too (`/x` is DIR/x, as rrsync and sftp's ChrootDirectory
    /// take it), and no `..` or symbolic link leads out of it.
    #[arg(long = "root", value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Carry no TCP connections: `soku tunnel` is refused.
    #[arg(long = "no-tunnel", conflicts_with = "allow_tunnel")]
    pub no_tunnel: bool,
    /// Carry TCP connections (`soku tunnel`) even as a forced command or with the
    /// fences above, which otherwise carry none.
    #[arg(long = "allow-tunnel")]
    pub allow_tunnel: bool,
}

#[derive(Debug, Args)]
pub struct TunnelArgs {
    /// Local address to accept connections on, `[ADDR:]PORT` (ADDR defaults to 127.0.0.1).
    #[arg(short = 'L', long = "listen", value_name = "[ADDR:]PORT")]
    pub listen: String,
    /// Where the remote end connects each tunnelled connection, HOST:PORT as seen from
    /// the remote host.
    #[arg(long = "to", value_name = "HOST:PORT", default_value = "127.0.0.1:22")]
    pub to: String,
    /// The remote host, `[user@]host`, reached through ssh like a copy.
    pub remote: String,
    /// Compress the tunnelled bytes (zstd).
    #[arg(short = 'C')]
    pub compress: bool,
    /// Verbose: say what soku does.
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// How to reach the remote host.
    #[command(flatten)]
    pub ssh: SshArgs,
}

#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// The remote host, `[user@]host`, reached through ssh like a copy.
    pub remote: String,
    /// Remote directory whose write speed to measure (default: the remote home).
    #[arg(long = "remote-path", value_name = "DIR")]
    pub remote_path: Option<String>,
    /// Local directory whose read speed to measure (default: the current directory).
    #[arg(long = "local-path", value_name = "DIR")]
    pub local_path: Option<std::path::PathBuf>,
    /// Print one JSON object (the measurements and the verdict) instead of the report.
    #[arg(long = "json")]
    pub json: bool,
    /// Verbose: passed to ssh.
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// How to reach the remote host.
    #[command(flatten)]
    pub ssh: SshArgs,
}

#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// Host to connect to (ssh's %h).
    pub host: String,
    /// Port to connect to (ssh's %p).
    pub port: u16,
    /// Socket send buffer, bytes (default: as large as the kernel allows).
    #[arg(long, value_name = "BYTES")]
    pub sndbuf: Option<usize>,
    /// Socket receive buffer, bytes (default: as large as the kernel allows).
    #[arg(long, value_name = "BYTES")]
    pub rcvbuf: Option<usize>,
    /// Connect with TCP_NODELAY and hand the socket to ssh instead of relaying
    /// (`-o ProxyUseFdpass=yes`); how soku's own logins connect.
    #[arg(long, conflicts_with_all = ["sndbuf", "rcvbuf"])]
    pub pass_fd: bool,
    /// With --pass-fd: ssh's AddressFamily (any, inet, inet6).
    #[arg(long, value_name = "FAMILY", default_value = "any", requires = "pass_fd")]
    pub family: String,
    /// With --pass-fd: ssh's ConnectTimeout, seconds per address.
    #[arg(long, value_name = "SECS", requires = "pass_fd")]
    pub connect_timeout: Option<u64>,
    /// With --pass-fd: also write a failure's message to this file (ssh sends a
    /// persistent master's ProxyCommand errors to /dev/null).
    #[arg(long, value_name = "PATH", requires = "pass_fd")]
    pub error_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Address to listen on, e.g. 127.0.0.1:2222.
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// Destination, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub to: String,
    /// Socket send buffer, bytes.
    #[arg(long, value_name = "BYTES")]
    pub sndbuf: Option<usize>,
    /// Socket receive buffer, bytes.
    #[arg(long, value_name = "BYTES")]
    pub rcvbuf: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn scp_style_invocation_parses() {
        let cli = Cli::try_parse_from([
            "soku",
            "-r",
            "-p",
            "-P",
            "2222",
            "-o",
            "BatchMode=yes",
            "a",
            "b",
            "host:dir/",
        ])
        .expect("parses");
        assert!(cli.command.is_none());
        assert!(cli.copy.recursive && cli.copy.preserve);
        assert_eq!(cli.copy.ssh.port, Some(2222));
        assert_eq!(cli.copy.paths, ["a", "b", "host:dir/"]);
    }

    #[test]
    fn options_may_follow_paths() {
        let cli = Cli::try_parse_from(["soku", "host:.", "-r", "dst"]).expect("parses");
        assert!(cli.copy.recursive);
        assert_eq!(cli.copy.paths, ["host:.", "dst"]);
    }

    #[test]
    fn report_takes_a_file() {
        let cli = Cli::try_parse_from(["soku", "--report", "r.html", "a", "h:"]).expect("parses");
        assert_eq!(cli.copy.report, Some(PathBuf::from("r.html")));
        assert_eq!(cli.copy.paths, ["a", "h:"]);
    }

    #[test]
    fn diagnose_takes_the_ssh_options() {
        let cli = Cli::try_parse_from([
            "soku", "diagnose", "-P", "2222", "-i", "key", "-o", "A=b", "--json", "u@h",
        ])
        .expect("parses");
        let Some(Command::Diagnose(args)) = cli.command else { panic!("not diagnose") };
        assert_eq!(args.remote, "u@h");
        assert_eq!(args.ssh.port, Some(2222));
        assert!(args.json);
    }

    #[test]
    fn subcommand_parses() {
        let cli = Cli::try_parse_from(["soku", "proxy", "example.org", "22"]).expect("parses");
        assert!(matches!(cli.command, Some(Command::Proxy(_))));
    }
}
