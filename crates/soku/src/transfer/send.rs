//! The sender: walks the sources, announces the plan and each entry on the control
//! channel, and sends every file as chunks, many in flight at once.
//!
//! The entry of a file is queued on the control channel before its first chunk is sent,
//! so on the ssh channel (one ordered stream) the receiver always knows the file first;
//! on QUIC, chunks travel on their own streams and the receiver waits for the entry.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use soku_proto::chunk::{root_hash, ChunkPlan};
use soku_proto::manifest::Entry;
use soku_proto::message::Message;
use tokio::io::AsyncRead;
use tokio::sync::Semaphore;

use super::ahead::Walked;
use super::codec;
use super::compress_policy::{self, CompressPolicy};
use super::throttle::Throttle;
use super::walk::{self, Item};
use super::{lock, CopyOptions};
use crate::events::{EventSink, TransferEvent};
use crate::link::{read_message, ChunkOut, ControlTx};

/// What the receiver reported at the end.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendOutcome {
    /// Files verified by the receiver.
    pub files: u32,
    /// Bytes verified by the receiver.
    pub bytes: u64,
    /// Files that failed on either side.
    pub failures: u32,
}

/// Chunk hashes of one file, filled in as chunks are read; the last one sends the summary.
struct FileHashes {
    id: u32,
    size: u64,
    hashes: Mutex<Vec<[u8; 32]>>,
    remaining: AtomicUsize,
    aborted: AtomicBool,
}

/// Sends the `walked` sources to the receiver at the other end of `control`/`chunks`.
pub async fn run<R: AsyncRead + Unpin + Send + 'static>(
    walked: Walked,
    opts: CopyOptions,
    control: ControlTx,
    control_in: R,
    chunks: ChunkOut,
    in_flight: usize,
    events: Arc<dyn EventSink>,
) -> anyhow::Result<SendOutcome> {
    let Walked { items, mut known } = walked;
    let (files, bytes) = items.iter().fold((0u32, 0u64), |(n, b), item| match item {
        Item::File { size, .. } => (n + 1, b + size),
        _ => (n, b),
    });
    control.send(Message::Plan { files, bytes }).await?;
    events.event(TransferEvent::Planned { files, bytes });
    let start = Instant::now();

    // The receiver's reports arrive while we send.
    let names: Arc<Mutex<Vec<String>>> = Arc::default();
    // Chunks in flight stay within the bulk budget, so control frames always have
    // room on the connection (see `soku_transport::BULK_BUDGET`).
    let budget = soku_transport::BULK_BUDGET / u64::from(opts.chunk_size.max(1));
    let in_flight = in_flight.min(usize::try_from(budget).unwrap_or(usize::MAX)).max(1);
    let pipeline = in_flight as u64 * u64::from(opts.chunk_size);
    let policy =
        opts.compress.then(|| Arc::new(Mutex::new(CompressPolicy::new(Instant::now(), pipeline))));
    let reader =
        tokio::spawn(read_reports(control_in, names.clone(), events.clone(), policy.clone()));

    let permits = Arc::new(Semaphore::new(in_flight));
    let failed: Arc<Mutex<Option<anyhow::Error>>> = Arc::default();
    let mut next_id = 0u32;
    let mut sent_bytes = 0u64;
    let mut chunk_order = 0u64;
    let throttle = Throttle::new(opts.rate_limit_bps).map(Arc::new);
    for item in items {
        if let Some(err) = lock(&failed).take() {
            return Err(err);
        }
        match item {
            Item::Error { path, message } => {
                events.event(TransferEvent::FileFailed {
                    path: path.clone(),
                    message: message.clone(),
                });
                control.send(Message::SourceError { path, message }).await?;
            }
            Item::Dir { wire, meta } => {
                control.send(Message::Entry(Entry::Dir { path: wire, meta })).await?
            }
            Item::File { wire, local, size, meta } => {
                let opened = {
                    let local = local.clone();
                    tokio::task::spawn_blocking(move || {
                        let file = std::fs::File::open(local)?;
                        let md = file.metadata()?;
                        Ok::<_, std::io::Error>((file, md))
                    })
                    .await?
                };
                let (file, ahead) = match opened {
                    Ok((file, md)) => (Arc::new(file), known.take(&local, &md).unwrap_or_default()),
                    Err(e) => {
                        let (path, message) = (local.display().to_string(), walk::describe(&e));
                        events.event(TransferEvent::FileFailed {
                            path: path.clone(),
                            message: message.clone(),
                        });
                        control.send(Message::SourceError { path, message }).await?;
                        continue;
                    }
                };
                let id = next_id;
                next_id += 1;
                sent_bytes += size;
                lock(&names).push(local.display().to_string());
                control.send(Message::Entry(Entry::File { id, path: wire, size, meta })).await?;
                let plan = ChunkPlan::new(size, opts.chunk_size);
                let count =
                    usize::try_from(plan.count()).context("file too large for this machine")?;
                let hashes = Arc::new(FileHashes {
                    id,
                    size,
                    hashes: Mutex::new(vec![[0; 32]; count]),
                    remaining: AtomicUsize::new(count),
                    aborted: AtomicBool::new(false),
                });
                if count == 0 {
                    control.send(Message::FileSummary { file: id, root: root_hash(0, []) }).await?;
                }
                for index in 0..count {
                    let index = u32::try_from(index).context("file has too many chunks")?;
                    let Some((offset, len)) = plan.span(index) else { break };
                    if hashes.aborted.load(Ordering::Relaxed) {
                        break;
                    }
                    let permit = permits.clone().acquire_owned().await?;
                    let mode = policy.as_ref().map(|p| lock(p).next_chunk(Instant::now()));
                    let task = ChunkTask {
                        file: file.clone(),
                        hashes: hashes.clone(),
                        index,
                        known: ahead.get(index as usize).copied().flatten(),
                        order: chunk_order,
                        throttle: throttle.clone(),
                        offset,
                        len,
                        mode,
                        policy: policy.clone(),
                        chunks: chunks.clone(),
                        control: control.clone(),
                        events: events.clone(),
                        path: local.display().to_string(),
                    };
                    chunk_order += 1;
                    let failed = failed.clone();
                    tokio::spawn(async move {
                        if let Err(e) = task.run().await {
                            lock(&failed).get_or_insert(e);
                        }
                        drop(permit);
                    });
                }
            }
        }
    }
    // Wait for every chunk in flight.
    let all = u32::try_from(in_flight).unwrap_or(u32::MAX);
    let _all_back = permits.acquire_many(all).await?;
    if let Some(err) = lock(&failed).take() {
        return Err(err);
    }
    control.send(Message::EndOfManifest { files: next_id, bytes: sent_bytes }).await?;
    // The receiver counts our source errors in its failures: it got each of them.
    let outcome = reader.await??;
    events.event(TransferEvent::Finished {
        files: outcome.files,
        bytes: outcome.bytes,
        failures: outcome.failures,
        elapsed: start.elapsed(),
    });
    Ok(outcome)
}

/// One chunk: read, hash, maybe compress (on the blocking pool), then send.
struct ChunkTask {
    file: Arc<std::fs::File>,
    hashes: Arc<FileHashes>,
    index: u32,
    /// Its hash, if hashed ahead of the copy ([`super::ahead`]).
    known: Option<[u8; 32]>,
    /// Place of this chunk in the copy's send order (its stream priority).
    order: u64,
    /// scp's `-l`, shared by all chunks of the copy.
    throttle: Option<Arc<Throttle>>,
    offset: u64,
    len: u32,
    /// The compression policy's choice for this chunk (`None`: no `-C`).
    mode: Option<compress_policy::Mode>,
    policy: Option<Arc<Mutex<CompressPolicy>>>,
    chunks: ChunkOut,
    control: ControlTx,
    events: Arc<dyn EventSink>,
    path: String,
}

impl ChunkTask {
    /// Errors returned are fatal to the copy (the link broke); a read error only aborts
    /// this file.
    async fn run(self) -> anyhow::Result<()> {
        let compress = self.mode == Some(compress_policy::Mode::Compress);
        let (file, id, index, span, known) =
            (self.file.clone(), self.hashes.id, self.index, (self.offset, self.len), self.known);
        let read = tokio::task::spawn_blocking(move || {
            codec::read_chunk(&file, id, index, span, known, compress)
        })
        .await?;
        let encoded = match read {
            Ok(encoded) => encoded,
            Err(e) => {
                if !self.hashes.aborted.swap(true, Ordering::Relaxed) {
                    let message = walk::describe(&e);
                    self.events.event(TransferEvent::FileFailed {
                        path: self.path,
                        message: message.clone(),
                    });
                    self.control.send(Message::FileAborted { file: id, message }).await?;
                }
                return Ok(());
            }
        };
        let hash = encoded.header.hash;
        let wire_len = u64::from(encoded.header.wire_len);
        if let (Some(policy), Some(took)) = (&self.policy, encoded.compress_time) {
            lock(policy).on_compressed(u64::from(self.len), wire_len, took);
        }
        if let Some(throttle) = &self.throttle {
            throttle.take(wire_len).await;
        }
        self.chunks.send(encoded.header, encoded.wire, self.order).await?;
        let root = {
            let mut hashes = lock(&self.hashes.hashes);
            if let Some(slot) = hashes.get_mut(index as usize) {
                *slot = hash;
            }
            let last = self.hashes.remaining.fetch_sub(1, Ordering::AcqRel) == 1;
            last.then(|| root_hash(self.hashes.size, hashes.iter()))
        };
        if let Some(root) = root {
            if !self.hashes.aborted.load(Ordering::Relaxed) {
                self.control.send(Message::FileSummary { file: id, root }).await?;
            }
        }
        Ok(())
    }
}

/// Reads the receiver's reports until it says it has finished.
async fn read_reports<R: AsyncRead + Unpin>(
    mut input: R,
    names: Arc<Mutex<Vec<String>>>,
    events: Arc<dyn EventSink>,
    policy: Option<Arc<Mutex<CompressPolicy>>>,
) -> anyhow::Result<SendOutcome> {
    loop {
        let Some(msg) = read_message(&mut input).await? else {
            anyhow::bail!("the receiver closed the connection before confirming the copy");
        };
        match msg {
            Message::Progress { verified_bytes } => {
                if let Some(policy) = &policy {
                    lock(policy).on_verified(verified_bytes, Instant::now());
                }
                events.event(TransferEvent::Verified { bytes: verified_bytes });
            }
            Message::FileFailed { file, message } => {
                let path = lock(&names)
                    .get(file as usize)
                    .cloned()
                    .unwrap_or_else(|| format!("file #{file}"));
                events.event(TransferEvent::FileFailed { path, message });
            }
            Message::Finished { files, bytes, failures } => {
                events.event(TransferEvent::Verified { bytes });
                return Ok(SendOutcome { files, bytes, failures });
            }
            Message::Fatal { message } => anyhow::bail!("remote: {message}"),
            other => anyhow::bail!(
                "protocol violation: the receiver sent {}",
                crate::transfer::message_name(&other)
            ),
        }
    }
}
