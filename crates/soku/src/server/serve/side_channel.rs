//! The ssh channel beside a QUIC or TCP data path, on the server's side: its end means
//! the client, or its login, is gone; the client's pings come on it, and the server's
//! summary leaves on it (`client/session/side_channel.rs` reads it).

use std::sync::Arc;
use std::time::Duration;

use soku_proto::frame;
use soku_proto::hello::{ClientNote, ServerNote, ServerSummary, MAX_CLIENT_NOTE};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Returns when the ssh channel (our stdin) ends: the client, or its login, is gone.
pub async fn channel_closed<R: AsyncRead + Unpin>(mut stdin: R) {
    let mut sink = [0u8; 256];
    while stdin.read(&mut sink).await.is_ok_and(|n| n > 0) {}
}

/// [`channel_closed`], answering each of the client's pings there with a pong on
/// `stdout` at once (the client times round trips over ssh beside QUIC's, see
/// `crate::carrier::shaping`). Pings are the only notes a client sends; anything that does not
/// decode as one is not answered, and once the framing breaks nothing more is (the
/// reading goes on, to see the channel end). The decoder holds at most one small frame.
pub async fn answer_pings_until_closed<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    mut stdin: R,
    stdout: Arc<tokio::sync::Mutex<W>>,
) {
    let mut decoder = frame::Decoder::new(MAX_CLIENT_NOTE);
    let mut buf = [0u8; 256];
    let mut answering = true;
    while let Ok(n @ 1..) = stdin.read(&mut buf).await {
        if !answering {
            continue;
        }
        decoder.feed(&buf[..n]);
        loop {
            match decoder.next_payload() {
                Ok(Some(payload)) => {
                    let Ok(ClientNote::Ping { seq }) = soku_proto::hello::decode_hello(&payload)
                    else {
                        continue;
                    };
                    let Ok(pong) = frame::to_vec(&ServerNote::Pong { seq }) else { continue };
                    let mut out = stdout.lock().await;
                    if out.write_all(&pong).await.is_err() || out.flush().await.is_err() {
                        answering = false;
                        break;
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    answering = false;
                    break;
                }
            }
        }
    }
}

/// Writes the server's summary on the ssh channel for the client's `--report` (read by
/// `client/session/side_channel.rs`; a client that does not read it loses nothing). Only
/// over QUIC or TCP: over the ssh channel, stdout carries the data itself.
pub async fn send_summary<W: AsyncWrite + Unpin>(stdout: &mut W, summary: ServerSummary) {
    let mut note = Vec::new();
    if frame::encode(&ServerNote::Summary(summary), &mut note).is_err() {
        return;
    }
    let write = async {
        stdout.write_all(&note).await?;
        stdout.flush().await
    };
    // A client gone already must not hold the server up.
    let _ = tokio::time::timeout(Duration::from_secs(2), write).await;
}
