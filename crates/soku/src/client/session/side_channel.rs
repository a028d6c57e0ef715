//! The ssh channel beside a QUIC or TCP data path: the server's notes come on it (a UDP
//! rate limit, its summary, the transport choice seen, pongs), and its end tells that
//! the server or the login is gone.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use soku_proto::frame;
use soku_proto::hello::{ServerNote, ServerSummary};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use crate::carrier::policing;
use crate::carrier::shaping::{self, RoundTrips};

/// Our half of the channel the server reads, as the session keeps it: ssh's stdin, or
/// any other writer that `Session::over` was given.
pub type ChannelWriter = Box<dyn AsyncWrite + Send + Unpin>;

/// Code of the QUIC close when the ssh session ended under a running copy.
pub const SSH_ENDED: u32 = 2;

/// The channel beside the data, while the data moves over QUIC or TCP.
pub struct SideChannel {
    /// Ends when ssh's output does (see [`watch`]).
    watch: tokio::task::JoinHandle<()>,
    /// Kept open: closing it tells the server to exit. Shared only with the pinger,
    /// which holds it weakly (see `crate::carrier::shaping`).
    writer: Arc<tokio::sync::Mutex<ChannelWriter>>,
    /// Round trips over ssh, timed beside QUIC's to tell a UDP shaper, and the task
    /// that pings (see `crate::carrier::shaping`).
    pings: Option<(Arc<RoundTrips>, tokio::task::JoinHandle<()>)>,
    /// Why the server closed QUIC for a UDP rate limit, as it said.
    policed: Arc<OnceLock<String>>,
    /// With `diagnose`: when the transport choice left, and when the server's
    /// [`ServerNote::ChoiceSeen`] came back (see [`SideChannel::round_trip`]).
    choice_sent: tokio::time::Instant,
    choice_seen: Arc<OnceLock<tokio::time::Instant>>,
}

/// The ssh channel once the transport choice has left on it, before a carrier takes it.
pub struct Halves<R> {
    /// What the server says: what was read of it first, then the rest.
    pub reader: R,
    pub writer: ChannelWriter,
    /// When our transport choice left.
    pub choice_sent: tokio::time::Instant,
    /// Where the server's figures at the end of its job go.
    pub summary: Arc<OnceLock<ServerSummary>>,
}

impl SideChannel {
    /// Starts reading the server's notes; the writer is kept for the pinger and for the
    /// end of the channel. `conn`: the QUIC connection that notes close; `ping`: time
    /// round trips over ssh (`crate::carrier::shaping`).
    pub fn start<R>(halves: Halves<R>, conn: Option<quinn::Connection>, ping: bool) -> SideChannel
    where
        R: AsyncRead + Send + Unpin + 'static,
    {
        let Halves { reader, writer, choice_sent, summary } = halves;
        let writer = Arc::new(tokio::sync::Mutex::new(writer));
        let pings = ping.then(|| {
            let pings = Arc::new(RoundTrips::default());
            let pinging =
                shaping::ping(Arc::downgrade(&writer), pings.clone(), policing::WATCH_FOR);
            (pings, tokio::spawn(pinging))
        });
        let policed = Arc::new(OnceLock::new());
        let choice_seen = Arc::new(OnceLock::new());
        let notes = Notes {
            summary,
            pings: pings.as_ref().map(|(pings, _)| pings.clone()),
            conn,
            policed: policed.clone(),
            choice_seen: choice_seen.clone(),
        };
        let watch = tokio::spawn(watch(reader, notes));
        SideChannel { watch, writer, pings, policed, choice_sent, choice_seen }
    }

    /// The round trips the pings complete, if the channel pings.
    pub fn round_trips(&self) -> Option<Arc<RoundTrips>> {
        self.pings.as_ref().map(|(pings, _)| pings.clone())
    }

    /// Whether ssh's output ended (the server or the login is gone).
    pub fn ended(&self) -> bool {
        self.watch.is_finished()
    }

    /// Why the server closed QUIC for a UDP rate limit, if it said so.
    pub fn policed(&self) -> Option<String> {
        self.policed.get().cloned()
    }

    /// The time from our transport choice to the server's note that it read it, a round
    /// trip over ssh (waits up to `patience`; only `diagnose` asks for the note).
    pub async fn round_trip(&self, patience: Duration) -> Option<Duration> {
        let deadline = tokio::time::Instant::now() + patience;
        // Bounded: polls every 5 ms until the note or the deadline.
        loop {
            if let Some(seen) = self.choice_seen.get() {
                return Some(seen.saturating_duration_since(self.choice_sent));
            }
            if tokio::time::Instant::now() >= deadline || self.ended() {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops pinging at once, and with `reading` the reading of the notes too.
    pub fn stop(&self, reading: bool) {
        if let Some((_, pinging)) = &self.pings {
            pinging.abort();
        }
        if reading {
            self.watch.abort();
        }
    }

    /// Ends our side of the channel, which tells the server to exit, and returns the
    /// reader, which ends once ssh's output has.
    pub fn end(self) -> tokio::task::JoinHandle<()> {
        if let Some((_, pinging)) = self.pings {
            pinging.abort();
        }
        drop(self.writer);
        self.watch
    }
}

/// What the reader of the notes fills in, and the connection it closes.
struct Notes {
    summary: Arc<OnceLock<ServerSummary>>,
    pings: Option<Arc<RoundTrips>>,
    conn: Option<quinn::Connection>,
    policed: Arc<OnceLock<String>>,
    choice_seen: Arc<OnceLock<tokio::time::Instant>>,
}

/// Reads what the server still says on the ssh channel (a [`ServerNote`]) until ssh's
/// output ends, and closes the QUIC connection then, if there is one. The server exits
/// when its ssh channel ends (`server/serve.rs`), and ssh ends when the server does: so
/// either side stopping (killed, or its login dropped) is noticed at once, not after
/// QUIC's idle timeout of a minute (TCP connections end with the server anyway;
/// [`SideChannel::ended`] then says why). A policed note is kept and closes QUIC with
/// the policed code at once.
async fn watch<R: AsyncRead + Unpin>(mut stdout: R, notes: Notes) {
    let Notes { summary, pings, conn, policed, choice_seen: seen } = notes;
    let mut decoder = frame::Decoder::new(64 * 1024);
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = stdout.read(&mut buf).await {
        decoder.feed(&buf[..n]);
        // Anything else than a note is not ours to act on; a malformed frame ends the
        // reading, not the copy.
        while let Ok(Some(payload)) = decoder.next_payload() {
            match soku_proto::hello::decode_hello(&payload) {
                Ok(ServerNote::Policed { why }) => {
                    // Kept first: the copy, failing on the close, looks for it.
                    let _ = policed.set(why.clone());
                    if let Some(conn) = &conn {
                        soku_transport::close(conn, policing::POLICED, why.as_bytes());
                    }
                }
                Ok(ServerNote::Summary(said)) => {
                    let _ = summary.set(said);
                }
                Ok(ServerNote::ChoiceSeen) => {
                    let _ = seen.set(tokio::time::Instant::now());
                }
                Ok(ServerNote::Pong { seq }) => {
                    if let Some(pings) = &pings {
                        pings.answered(seq, tokio::time::Instant::now());
                    }
                }
                // Read at the start of the session (`preview::read_answer`), never here.
                Ok(ServerNote::Holds { .. }) | Err(_) => {}
            }
        }
    }
    if let Some(conn) = conn {
        soku_transport::close(&conn, SSH_ENDED, b"the ssh session ended");
    }
}
