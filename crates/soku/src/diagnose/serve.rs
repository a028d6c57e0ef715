//! The server's side of `soku diagnose` (a [`Job::Diagnose`](soku_proto::message::Job)):
//! measure this host and write into the target, say so, then serve the client's probes
//! until it closes the connection.

use std::path::Path;
use std::time::Duration;

use soku_engine::link::{Inbound, Link};
use soku_proto::diagnose::{ProbeDirection, ProbeReport};
use soku_proto::message::Message;

use super::host::{self, DiskTest};
use super::probe::{self, HEADER_LEN};

/// Most probe streams taken in one session: the client runs two probes, each of up to
/// [`probe::STREAMS`] streams (an added stream that comes after its probe ended lands
/// here, and is dropped).
const MAX_STREAMS: usize = 8 * probe::STREAMS as usize;
/// How long to wait for the client's next probe before giving up on it.
const NEXT_PROBE: Duration = Duration::from_secs(30);
/// Beyond a probe's own duration, how long its data may take to end.
const PROBE_SLACK: Duration = Duration::from_secs(10);

/// Runs the diagnose job; `target` is where to measure the disk (home-relative paths
/// already expanded), if anywhere.
pub async fn serve(
    link: &mut Link,
    quic: Option<&quinn::Connection>,
    target: Option<&Path>,
) -> anyhow::Result<()> {
    let test = target.map(|target| DiskTest::Write(target.to_path_buf()));
    let facts = tokio::task::spawn_blocking(move || host::facts(test)).await?;
    link.tx.send_control(Message::DiagnoseFacts(facts)).await?;
    let Some(conn) = quic else {
        // Over TCP there is nothing to probe with soku-cc: the client closes when done.
        // Bounded: each wait ends within NEXT_PROBE, and the end of control ends it.
        loop {
            match tokio::time::timeout(NEXT_PROBE, link.recv()).await {
                Ok(Some(Ok(Inbound::Control(_) | Inbound::Chunk(_)))) => continue,
                _ => return Ok(()),
            }
        }
    };
    for _ in 0..MAX_STREAMS {
        let (send, mut recv) = match tokio::time::timeout(NEXT_PROBE, conn.accept_bi()).await {
            Ok(Ok(streams)) => streams,
            // The client closed the connection (done), or went quiet.
            Ok(Err(_)) | Err(_) => return Ok(()),
        };
        let mut head = [0u8; HEADER_LEN];
        let report = match tokio::time::timeout(PROBE_SLACK, recv.read_exact(&mut head)).await {
            // A stream added to a probe that has ended: nothing to answer.
            Ok(Ok(_)) if probe::parse_header(head).is_ok_and(|p| p.extra) => continue,
            Ok(Ok(_)) => run_probe(conn, head, send, recv).await,
            // A stream reset or silent before its header is one the client added to a
            // probe and dropped at its end (its header can arrive after the end, on a
            // path that reorders): it asked for nothing. A report here, with no
            // direction to give it, would be taken for the next probe's.
            Ok(Err(_)) | Err(_) => continue,
        };
        link.tx.send_control(Message::DiagnoseProbe(report)).await?;
    }
    Ok(())
}

/// One probe, as the header asks.
async fn run_probe(
    conn: &quinn::Connection,
    head: [u8; HEADER_LEN],
    send: quinn::SendStream,
    recv: quinn::RecvStream,
) -> ProbeReport {
    let probe = match probe::parse_header(head) {
        Ok(parsed) => parsed,
        Err(e) => return failed(ProbeDirection::Upload, e.to_string()),
    };
    let direction = probe.direction;
    let result =
        match direction {
            ProbeDirection::Upload => receive_probe(conn, recv, probe).await.map(|received| {
                ProbeReport { direction, received: Some(received), sent: None, error: None }
            }),
            ProbeDirection::Download => send_probe(conn, send, probe).await.map(|sent| {
                ProbeReport { direction, received: None, sent: Some(sent), error: None }
            }),
        };
    result.unwrap_or_else(|e| failed(direction, e.to_string()))
}

/// An upload probe: the client's streams, received.
async fn receive_probe(
    conn: &quinn::Connection,
    recv: quinn::RecvStream,
    probe: probe::Probe,
) -> Result<soku_proto::diagnose::Received, probe::ProbeError> {
    probe::receive(conn, recv, probe, probe.duration + PROBE_SLACK).await
}

/// A download probe: sent on the client's stream and as many more as it asked for.
async fn send_probe(
    conn: &quinn::Connection,
    send: quinn::SendStream,
    probe: probe::Probe,
) -> Result<soku_proto::diagnose::Sent, probe::ProbeError> {
    let sends = probe::with_more(conn, send, probe).await?;
    probe::send_for(conn, sends, probe::MIN_PROBE.min(probe.duration), probe.duration).await
}

fn failed(direction: ProbeDirection, error: String) -> ProbeReport {
    ProbeReport { direction, received: None, sent: None, error: Some(error) }
}
