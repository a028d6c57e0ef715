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

/// Most probes served in one session (the client runs two).
const MAX_PROBES: usize = 8;
/// How long to wait for the client's next probe before giving up on it.
const NEXT_PROBE: Duration = Duration::from_secs(30);
/// Beyond a probe's own duration, how long its data may take to end.
const PROBE_SLACK: Duration = Duration::from_secs(10);

/// Runs the diagnose job; `target` is where to measure the disk (home-relative paths
/// already expanded).
pub async fn serve(
    link: &mut Link,
    quic: Option<&quinn::Connection>,
    target: &Path,
) -> anyhow::Result<()> {
    let test = DiskTest::Write(target.to_path_buf());
    let facts = tokio::task::spawn_blocking(move || host::facts(Some(test))).await?;
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
    for _ in 0..MAX_PROBES {
        let (mut send, mut recv) = match tokio::time::timeout(NEXT_PROBE, conn.accept_bi()).await {
            Ok(Ok(streams)) => streams,
            // The client closed the connection (done), or went quiet.
            Ok(Err(_)) | Err(_) => return Ok(()),
        };
        let mut head = [0u8; HEADER_LEN];
        let report = match tokio::time::timeout(PROBE_SLACK, recv.read_exact(&mut head)).await {
            Ok(Ok(_)) => run_probe(conn, head, &mut send, &mut recv).await,
            Ok(Err(e)) => failed(ProbeDirection::Upload, e.to_string()),
            Err(_) => failed(ProbeDirection::Upload, "no probe header".into()),
        };
        link.tx.send_control(Message::DiagnoseProbe(report)).await?;
    }
    Ok(())
}

/// One probe, as the header asks.
async fn run_probe(
    conn: &quinn::Connection,
    head: [u8; HEADER_LEN],
    send: &mut quinn::SendStream,
    recv: &mut quinn::RecvStream,
) -> ProbeReport {
    let (direction, duration) = match probe::parse_header(head) {
        Ok(parsed) => parsed,
        Err(e) => return failed(ProbeDirection::Upload, e.to_string()),
    };
    match direction {
        ProbeDirection::Upload => match probe::receive(recv, duration + PROBE_SLACK).await {
            Ok(received) => {
                ProbeReport { direction, received: Some(received), sent: None, error: None }
            }
            Err(e) => failed(direction, e.to_string()),
        },
        ProbeDirection::Download => match probe::send_for(conn, send, duration).await {
            Ok(sent) => ProbeReport { direction, received: None, sent: Some(sent), error: None },
            Err(e) => failed(direction, e.to_string()),
        },
    }
}

fn failed(direction: ProbeDirection, error: String) -> ProbeReport {
    ProbeReport { direction, received: None, sent: None, error: Some(error) }
}
