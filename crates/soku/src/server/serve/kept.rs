//! The kept server: it stays after its job for the client's next copies, as ssh's
//! `ControlPersist` keeps a login (ssh_config(5)): the next copy to this host reaches it
//! over QUIC alone, one handshake instead of an ssh session and the remote shell's
//! start (two round trips and ~0.1 s before the handshake could begin).
//!
//! - **Who gets in.** Only the certificate the client's hello pinned over ssh: the
//!   client keeps its key in a file only its user can read (`crate::client::kept`), as ssh keeps
//!   its control socket. Anyone else's handshake fails, as during the first job.
//! - **How long.** [`IDLE`] after its last job ended, and never while a job runs; a
//!   handshake under way is no job (a stranger's, failing or left pending, neither
//!   extends its life nor takes a job's place). Told to stop (SIGTERM), it closes its
//!   connections with a reason first: a client under a copy then reconnects at once,
//!   through ssh, and resumes. A server gone without a word (killed) has no ssh
//!   channel whose end would tell: the client finds it 8 s into QUIC's silence, by TCP
//!   handshakes with sshd that go on answering (`crate::carrier::tcp_probe`), or after QUIC's
//!   idle timeout where it cannot make them. A job whose client is gone (killed, cut
//!   off, or closed and its close lost) ends, and frees its partial files for the
//!   client's next session: after 15 s of silence, or at once when a session about to
//!   take partial files nudges this user's kept servers (SIGUSR1,
//!   [`nudge_silent_jobs`](super::nudge::nudge_silent_jobs)) and the client does not
//!   answer (`silent_client.rs`).
//! - **Whose authority.** Only while the ssh login that started it lives: it watches
//!   that login's sshd process ([`Login`]) and, once it has ended, takes no new job and
//!   ends when the jobs under way have. The user's authorisation is what sshd checked
//!   at the login (which key or certificate, `AuthorizedKeysCommand`, the account's
//!   state, PAM, the groups the process got), and nothing inside the session can check
//!   it again: a per-job look at authorized_keys would not know which key logged in,
//!   and could not drop the groups. Tying the server to the login hands every check to
//!   sshd: the login's master ends a minute after its last ssh session
//!   (`client/launch/shared_login.rs`, `PERSIST`), or sooner when someone ends it, and the
//!   next copy logs in afresh, where a revoked key is refused; copies that follow each
//!   other through the server alone would otherwise keep it, and the key's power, for
//!   as long as they come. A copy that finds it ended waits at most 2 s and opens an
//!   ssh session.
//! - **What it does.** One job per connection, as the first: the client opens the
//!   stream, sends a first frame (`KeptOpening`) and its request, and the engine runs
//!   it. A job that went well ends with the server's summary on a stream the server
//!   opens (the ssh channel carried it on the first job). A job that sends the data
//!   watches for a UDP rate limit as the first did (`crate::carrier::policing`), if the client
//!   can move to TCP. Up to [`MAX_JOBS`] at once; more are refused at once, so that their
//!   clients log in through ssh instead of waiting.
//! - **Its output.** stdout and stderr were the ssh channel, which is gone: they are
//!   pointed at /dev/null, so that nothing written there fails or blocks.
//! - **Its name.** `ps` shows it as [`PROCESS_NAME`] from then on, so that a user (or a
//!   benchmark that must count every process's CPU) can tell it and end it.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use soku_proto::frame;
use soku_proto::hello::{ServerNote, ServerSummary};
use soku_transport::{Fingerprint, Identity, TransportOptions};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::fence::Fence;
use super::job::serve_job;
use super::nudge::PROCESS_NAME;
use super::patience::{within, CLOSE_PATIENCE};
use super::silent_client::end_when_silent;
use super::small_frame::read_small_frame;
use crate::carrier::policing;
use crate::client::preview;
use crate::report::ServerSampler;
use soku_engine::link;

/// How long the server stays after its last job: as long as the shared ssh login
/// (`client/launch/shared_login.rs`, `PERSIST`), which the client counts on in its record.
pub const IDLE: Duration = crate::client::launch::shared_login::PERSIST;
/// QUIC close code of a kept server told to stop (beside 1, a job aborted;
/// `client/session/side_channel.rs`, `SSH_ENDED`, 2; `policing::POLICED`, 3).
const STOPPED: u32 = 4;
/// Most jobs at once (sshd's `MaxSessions` is 10 sessions per login).
const MAX_JOBS: usize = 8;
/// Most handshakes under way at once.
const MAX_HANDSHAKES: usize = 8;

/// What the first job hands the kept server for the jobs after it.
pub struct Handover {
    /// The endpoint the first job ran on.
    pub endpoint: quinn::Endpoint,
    /// Our certificate, pinned by the client.
    pub identity: Identity,
    /// The client's certificate, as its hello said.
    pub client: Fingerprint,
    /// The first job's transport options: its path memory and background mode (from
    /// the client's hello) and its path's board.
    pub transport: TransportOptions,
    /// The address the endpoint is bound to, and the client's as ssh saw it (for the
    /// MTU bound, as in `crate::server::ports`).
    pub bind_ip: IpAddr,
    pub client_ip: Option<IpAddr>,
    /// The client's stall limit (`--stall-timeout`).
    pub stall: Duration,
    /// The client can move to TCP (its first choice said so): each job sending the data
    /// watches for a UDP rate limit and closes its connection with the reason, as the
    /// first job did (`crate::carrier::policing`).
    pub tcp_ready: bool,
    /// The administrator's fences, which every job here is held to as the first was.
    pub fence: Arc<Fence>,
    /// The ssh login that started the server, found while the first job ran.
    pub login: Option<Login>,
    /// The protocol version the first job's hellos agreed on: its client's, whose
    /// certificate every job here is pinned to.
    pub version: u16,
}

/// The ssh login a server was started in: the nearest sshd process above it (the
/// connection's own, which ends with the connection), else its parent. Known by its PID
/// and start time, so that a PID used again by another process is never taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Login {
    pid: i32,
    start: u64,
}

/// How often a kept server looks whether its login still runs: one read of a small
/// /proc file.
const LOGIN_LOOK: Duration = Duration::from_secs(1);

impl Login {
    /// The login of this process, while it still runs in it (during the first job).
    pub fn of_this_process() -> Option<Login> {
        let parent = rustix::process::getppid()?.as_raw_nonzero().get();
        let mut pid = parent;
        // Bounded: a process tree deeper than this has no sshd near us.
        for _ in 0..8 {
            let Some(stat) = Stat::of(pid) else { break };
            if stat.comm.starts_with("sshd") {
                return Some(Login { pid, start: stat.start });
            }
            if stat.ppid == pid || stat.ppid <= 1 {
                break;
            }
            pid = stat.ppid;
        }
        Stat::of(parent).map(|stat| Login { pid: parent, start: stat.start })
    }

    /// Whether the process still runs (a zombie has ended).
    fn runs(&self) -> bool {
        Stat::of(self.pid).is_some_and(|stat| stat.start == self.start && !stat.ended)
    }
}

/// What a kept server reads of a process in `/proc/PID/stat`.
struct Stat {
    comm: String,
    ppid: i32,
    start: u64,
    ended: bool,
}

impl Stat {
    fn of(pid: i32) -> Option<Stat> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `PID (comm) state ppid ...`: the name may hold spaces and parentheses.
        let (open, close) = (stat.find('(')?, stat.rfind(')')?);
        let comm = stat.get(open + 1..close)?.to_string();
        let fields: Vec<&str> = stat.get(close + 2..)?.split(' ').collect();
        // Fields 3, 4 and 22 of proc_pid_stat(5), counted from the state.
        let state = *fields.first()?;
        let ppid = fields.get(1)?.parse().ok()?;
        let start = fields.get(19)?.parse().ok()?;
        Some(Stat { comm, ppid, start, ended: matches!(state, "Z" | "X" | "x") })
    }
}

/// Takes the client's next connections until [`IDLE`] passes without a job.
pub async fn run(handover: Handover) -> anyhow::Result<()> {
    detach_output();
    // Before the name that nudges look for: SIGUSR1's default action ends a process.
    let mut nudges = signal(SignalKind::user_defined1())?;
    let nudged = Arc::new(Notify::new());
    // The thread group leader's name, whichever thread writes it.
    let _ = std::fs::write("/proc/self/comm", PROCESS_NAME);
    let Handover {
        endpoint,
        identity,
        client,
        transport,
        bind_ip,
        client_ip,
        stall,
        tcp_ready,
        fence,
        login,
        version,
    } = handover;
    let mut login_looks = tokio::time::interval(LOGIN_LOOK);
    // Once the login has ended: no new job, and an end once the running ones are done.
    let mut login_gone = false;
    let mtu_bound = soku_transport::server_mtu_bound(bind_ip, client_ip);
    // The first job's accept stopped taking connections (`serve::accept_client`).
    let config = soku_transport::server_config(&identity, client, &transport, mtu_bound)?;
    endpoint.set_server_config(Some(config));
    // Handshakes apart from jobs: a stranger's pending ones neither count as jobs nor
    // keep the server from ending, and at most MAX_HANDSHAKES wait at once.
    let mut handshakes: JoinSet<Option<quinn::Connection>> = JoinSet::new();
    let mut jobs: JoinSet<bool> = JoinSet::new();
    // The jobs' connections, so that a stop closes each with its window open
    // (`soku_transport::close`): under a copy, a close made by the endpoint stayed
    // behind a full congestion window.
    let mut live: Vec<quinn::Connection> = Vec::new();
    let mut idle_since = tokio::time::Instant::now();
    let mut stop = signal(SignalKind::terminate())?;
    loop {
        tokio::select! {
            Some(()) = nudges.recv() => nudged.notify_waiters(),
            _ = stop.recv() => {
                for conn in &live {
                    soku_transport::close(conn, STOPPED, b"the remote soku was stopped");
                }
                endpoint.close(STOPPED.into(), b"the remote soku was stopped");
                break;
            }
            _ = login_looks.tick(), if !login_gone && login.is_some() => {
                login_gone = login.is_some_and(|login| !login.runs());
                if login_gone && jobs.is_empty() {
                    break;
                }
            }
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                if login_gone || jobs.len() >= MAX_JOBS || handshakes.len() >= MAX_HANDSHAKES {
                    incoming.refuse();
                    continue;
                }
                // A stranger's certificate, or a forged packet, fails here.
                handshakes.spawn(async move { incoming.await.ok() });
            }
            Some(done) = handshakes.join_next(), if !handshakes.is_empty() => {
                if let Ok(Some(conn)) = done {
                    if login_gone {
                        soku_transport::close(&conn, STOPPED, b"the ssh login that started it ended");
                        continue;
                    }
                    live.retain(|c| c.close_reason().is_none());
                    live.push(conn.clone());
                    jobs.spawn(serve_one(conn, stall, tcp_ready, nudged.clone(), fence.clone(), version));
                }
            }
            Some(done) = jobs.join_next(), if !jobs.is_empty() => {
                if done.unwrap_or(false) {
                    idle_since = tokio::time::Instant::now();
                }
                if login_gone && jobs.is_empty() {
                    break;
                }
            }
            () = tokio::time::sleep_until(idle_since + IDLE), if jobs.is_empty() => break,
        }
    }
    endpoint.close(0u32.into(), b"");
    let _ = tokio::time::timeout(CLOSE_PATIENCE, endpoint.wait_idle()).await;
    Ok(())
}

/// One connection's job; whether there was one (the client opened its stream).
async fn serve_one(
    conn: quinn::Connection,
    stall: Duration,
    tcp_ready: bool,
    nudged: Arc<Notify>,
    fence: Arc<Fence>,
    version: u16,
) -> bool {
    let started = Instant::now();
    let _wake = soku_transport::wake_when_silent(&conn);
    let Ok(Ok((send, mut recv))) = within(stall, conn.accept_bi()).await else {
        soku_transport::close(&conn, 1, b"no job");
        return false;
    };
    let opening = match within(stall, read_small_frame(&mut recv)).await {
        Ok(Ok(payload)) => soku_proto::hello::decode_kept_opening(&payload).ok(),
        _ => None,
    };
    let Some(opening) = opening else {
        soku_transport::close(&conn, 1, b"no opening frame");
        return false;
    };
    let mut link = link::quic::link(conn.clone(), send, recv);
    link.set_stall_limit(Some(stall));
    let sampler = ServerSampler::start(started, Some(&conn));
    // Only a download's "nothing held" (`KeptOpening`); an upload's preview, asked
    // nothing, promises nothing.
    let promise = preview::Promise::new(opening.receive_preview, None);
    let watching = tcp_ready.then(|| tokio::spawn(policing::watch(conn.clone())));
    let silence = tokio::spawn(end_when_silent(conn.clone(), nudged));
    let result =
        serve_job(&mut link, Some(&conn), &promise, &fence, version, opening.open_files).await;
    silence.abort();
    if let Some(watching) = watching {
        // A verdict closed the connection itself, with the reason for the client.
        watching.abort();
    }
    if let Ok(sent_data) = result {
        send_summary(&conn, sampler.finish(sent_data)).await;
    }
    let _ = link.close(CLOSE_PATIENCE).await;
    if result.is_err() {
        soku_transport::close(&conn, 1, b"aborted");
    }
    let _ = tokio::time::timeout(CLOSE_PATIENCE, conn.closed()).await;
    true
}

/// The server's summary on a stream of its own (the first job's went on the ssh
/// channel): a bidirectional one, which the engine never takes (its data streams are
/// unidirectional, `soku_engine::link::quic`); bounded, so that a client gone already does not hold the job up.
async fn send_summary(conn: &quinn::Connection, summary: ServerSummary) {
    let Ok(note) = frame::to_vec(&ServerNote::Summary(summary)) else { return };
    let write = async {
        let (mut stream, _) = conn.open_bi().await.ok()?;
        stream.write_all(&note).await.ok()?;
        stream.finish().ok()
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), write).await;
}

/// Points stdout and stderr at /dev/null: the ssh channel they were is closed once the
/// client's ssh has gone, and a write there would fail (and `eprintln!` panic).
fn detach_output() {
    let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else { return };
    let _ = rustix::stdio::dup2_stdout(&null);
    let _ = rustix::stdio::dup2_stderr(&null);
}
