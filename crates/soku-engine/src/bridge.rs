//! A copy between two remote hosts through this one (scp's `-3`): the origin's sender
//! and the destination's receiver talk to each other as in any copy, and this side only
//! passes their messages and chunks from one link to the other.
//!
//! Nothing is stored here: a chunk is forwarded as it arrives, with the header (and
//! BLAKE3) the origin gave it, and the destination verifies it as it verifies any
//! chunk, so the check is end to end. What the destination holds (resume) is told to
//! the origin in its own reports, which pass here too. Memory stays bounded: at most
//! [`CHUNKS_FORWARDED`] chunks are being sent on at once, and while they are, nothing
//! more is read from the origin, whose link then holds back what it receives.
//!
//! Two rules keep the order each side relies on, whichever links carry it:
//! - a chunk that overtook its file's entry (QUIC carries them apart) waits here until
//!   the entry is passed on;
//! - the end of the manifest is passed on only once every chunk the origin's summaries
//!   counted has been, so a destination on one ordered stream sees every chunk first.
//!
//! The origin's entries are checked against the names the user asked for, as a
//! download's receiver checks them: a hostile origin cannot place other names at the
//! destination through this host.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use soku_proto::chunk::ChunkPlan;
use soku_proto::manifest::Entry;
use soku_proto::message::Message;
use soku_proto::name::shown;
use soku_proto::path::NameFilter;
use soku_proto::ProtoError;
use tokio::task::JoinSet;

use crate::events::{EventSink, TransferEvent};
use crate::link::{Inbound, Incoming, Link, Transport};
use crate::options::Outcome;
use crate::{EngineError, LinkError};

/// Chunks being sent on to the destination at once, at most.
pub const CHUNKS_FORWARDED: usize = 64;

/// What the bridge keeps while the copy passes through.
struct Bridge {
    /// Files announced so far (their ids count up from 0).
    announced: u32,
    /// Chunks that came before their file's entry, by file.
    early: HashMap<u32, Vec<Incoming>>,
    /// Per file not yet all passed on: chunks passed on, and how many the origin's
    /// summary says it sent (once it came).
    owed: HashMap<u32, (u32, Option<u32>)>,
    /// Each file's chunk plan, while it is owed.
    plans: HashMap<u32, ChunkPlan>,
    /// Chunks the destination said it holds, by file, until the file is all passed on:
    /// one the origin sends all the same (its bytes differ) was not held after all.
    held: HashMap<u32, HashSet<u32>>,
    /// Bytes of held chunks the origin did not send again: what was already there.
    resumed: u64,
    /// Plain bytes of the chunks handed on to the destination ([`TransferEvent::Sent`]).
    handed: u64,
    chunk_size: u32,
    /// The origin's end of the manifest, held until every chunk is passed on.
    end: Option<Message>,
    /// Chunks being sent on.
    sending: JoinSet<Result<(), LinkError>>,
    /// Place of the next chunk in the send order.
    order: u64,
    names: Option<NameFilter>,
    events: Arc<dyn EventSink>,
    /// Paths by file id, for the lines about them.
    paths: Vec<String>,
    /// The destination's finish report, once it came.
    finished: Option<Outcome>,
}

/// Passes a copy between `origin` (whose server was asked to send) and `destination`
/// (whose server was asked to receive), until the destination's finish report has
/// reached the origin. Top-level names must pass `names` (the requested sources').
///
/// `chunk_size` is the copy's (both servers were asked for it): what a held chunk of
/// the destination's is worth, for the count of bytes already there.
pub async fn run(
    origin: &mut Link,
    destination: &mut Link,
    names: Option<NameFilter>,
    chunk_size: u32,
    events: Arc<dyn EventSink>,
) -> Result<Outcome, EngineError> {
    let start = Instant::now();
    let mut bridge = Bridge {
        announced: 0,
        early: HashMap::new(),
        owed: HashMap::new(),
        plans: HashMap::new(),
        held: HashMap::new(),
        resumed: 0,
        handed: 0,
        chunk_size,
        end: None,
        sending: JoinSet::new(),
        order: 0,
        names,
        events: events.clone(),
        paths: Vec::new(),
        finished: None,
    };
    let to_destination = destination.tx.clone();
    let to_origin = origin.tx.clone();
    let result = loop {
        if let Some(outcome) = bridge.finished {
            break Ok(outcome);
        }
        let room = bridge.sending.len() < CHUNKS_FORWARDED;
        let step = tokio::select! {
            Some(sent) = bridge.sending.join_next(), if !bridge.sending.is_empty() => {
                sent.map_err(EngineError::from).and_then(|sent| Ok(sent?))
            }
            inbound = origin.recv(), if room => {
                bridge.on_origin(inbound, &to_destination).await
            }
            inbound = destination.recv() => bridge.on_destination(inbound, &to_origin).await,
        };
        if let Err(err) = step {
            break Err(err);
        }
        if let Err(err) = bridge.maybe_end(&to_destination).await {
            break Err(err);
        }
    };
    match &result {
        Ok(outcome) => events.event(TransferEvent::Finished {
            files: outcome.files,
            bytes: outcome.bytes,
            failures: outcome.failures,
            resumed: outcome.resumed,
            elapsed: start.elapsed(),
        }),
        // Each side hears why the copy stops, unless it is the one that said so.
        Err(EngineError::Remote(_)) => {}
        Err(err) if err.tell_peer() => {
            let fatal = || Message::Fatal { message: err.to_string() };
            let _ = to_origin.send_control(fatal()).await;
            let _ = to_destination.send_control(fatal()).await;
        }
        Err(_) => {}
    }
    result
}

impl Bridge {
    /// Handles what the origin (the sender) sent.
    async fn on_origin(
        &mut self,
        inbound: Option<Result<Inbound, LinkError>>,
        to: &Arc<dyn Transport>,
    ) -> Result<(), EngineError> {
        let msg = match inbound {
            None | Some(Ok(Inbound::Closed)) => {
                return Err(EngineError::PeerClosed { peer: "origin", what: "the copy finished" })
            }
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(Inbound::Chunk(chunk))) => {
                let file = chunk.header.file;
                if file < self.announced {
                    self.send_on(chunk, to);
                } else {
                    self.early.entry(file).or_default().push(chunk);
                }
                return Ok(());
            }
            Some(Ok(Inbound::Control(msg))) => msg,
        };
        match &msg {
            Message::Plan { files, bytes } => {
                self.events.event(TransferEvent::Planned { files: *files, bytes: *bytes })
            }
            Message::Entry(entry) => {
                if let Some(names) = &self.names {
                    let top = entry.path().top().cloned().unwrap_or_default();
                    names.check(&top)?;
                }
                if let Entry::File { id, path, size, .. } = entry {
                    if *id != self.announced {
                        let expected = self.announced;
                        return Err(ProtoError::Violation(format!(
                            "file id {id} from the origin, expected {expected}"
                        ))
                        .into());
                    }
                    self.announced += 1;
                    self.owed.insert(*id, (0, None));
                    self.plans.insert(*id, ChunkPlan::new(*size, self.chunk_size));
                    self.paths.push(path.to_string());
                    let path = path.to_string();
                    self.events.event(TransferEvent::File { path, bytes: *size });
                }
            }
            Message::FileSummary { file, sent, .. } => {
                if let Some(owed) = self.owed.get_mut(file) {
                    owed.1 = Some(*sent);
                }
                self.settle(*file);
            }
            Message::FileAborted { file, message } => {
                self.forget(*file);
                let target = self.path(*file);
                self.events.event(TransferEvent::SourceFailed { target, message: message.clone() });
            }
            Message::SourceError { path, message } => {
                let message = format!("{path}: {message}");
                self.events.event(TransferEvent::SourceFailed { target: String::new(), message });
            }
            Message::EndOfManifest { .. } => {
                self.end = Some(msg);
                return Ok(());
            }
            Message::Fatal { message } => {
                let _ = to.send_control(msg.clone()).await;
                return Err(EngineError::Remote(message.clone()));
            }
            other => {
                return Err(ProtoError::Violation(format!(
                    "the origin sent {} as a sender",
                    other.kind()
                ))
                .into())
            }
        }
        let announced = match &msg {
            Message::Entry(Entry::File { id, .. }) => Some(*id),
            _ => None,
        };
        to.send_control(msg).await?;
        if let Some(early) = announced.and_then(|id| self.early.remove(&id)) {
            for chunk in early {
                self.send_on(chunk, to);
            }
        }
        Ok(())
    }

    /// Handles what the destination (the receiver) sent: everything goes on to the
    /// origin, whose rules check it.
    async fn on_destination(
        &mut self,
        inbound: Option<Result<Inbound, LinkError>>,
        to: &Arc<dyn Transport>,
    ) -> Result<(), EngineError> {
        let msg = match inbound {
            None | Some(Ok(Inbound::Closed)) => {
                return Err(EngineError::PeerClosed {
                    peer: "destination",
                    what: "confirming the copy",
                })
            }
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(Inbound::Chunk(_))) => {
                return Err(ProtoError::Violation("the destination sent a chunk".into()).into())
            }
            Some(Ok(Inbound::Control(msg))) => msg,
        };
        match &msg {
            Message::Progress { verified_bytes } => {
                self.events.event(TransferEvent::Verified { bytes: *verified_bytes })
            }
            Message::Held(held) => {
                let counted = self.plans.get(&held.file).map(|plan| {
                    held.chunks
                        .iter()
                        .filter_map(|c| plan.span(c.index))
                        .map(|(_, len)| u64::from(len))
                        .sum::<u64>()
                });
                if let Some(bytes) = counted.filter(|bytes| *bytes > 0) {
                    self.held
                        .entry(held.file)
                        .or_default()
                        .extend(held.chunks.iter().map(|c| c.index));
                    self.resumed += bytes;
                    self.events.event(TransferEvent::Resumed { bytes: self.resumed });
                }
            }
            Message::FileFailed { file, message } => {
                // The origin sends nothing more of it, and never its summary.
                self.forget(*file);
                self.early.remove(file);
                let source = self.path(*file);
                self.events.event(TransferEvent::TargetFailed { source, message: message.clone() });
            }
            Message::Finished { files, bytes, failures } => {
                self.events.event(TransferEvent::Verified { bytes: *bytes });
                self.finished = Some(Outcome {
                    files: *files,
                    bytes: *bytes,
                    failures: *failures,
                    resumed: self.resumed,
                    ..Outcome::default()
                });
            }
            Message::Fatal { message } => {
                let _ = to.send_control(msg.clone()).await;
                return Err(EngineError::Remote(message.clone()));
            }
            _ => {}
        }
        Ok(to.send_control(msg).await?)
    }

    /// Starts sending `chunk` on to the destination.
    fn send_on(&mut self, chunk: Incoming, to: &Arc<dyn Transport>) {
        let file = chunk.header.file;
        if let Some(owed) = self.owed.get_mut(&file) {
            owed.0 += 1;
        }
        let index = chunk.header.index;
        let len = self.plans.get(&file).and_then(|plan| plan.span(index)).map_or(0, |s| s.1);
        if self.held.get_mut(&file).is_some_and(|held| held.remove(&index)) {
            self.resumed = self.resumed.saturating_sub(u64::from(len));
        }
        // Counted once handed on, as a sender counts its chunks: a command that makes new
        // sessions tells what its earlier ones sent from what the target held before.
        self.handed += u64::from(len);
        self.events.event(TransferEvent::Sent { bytes: self.handed });
        self.settle(file);
        let Incoming { header, wire, .. } = chunk;
        // One copy, and the origin's link may take more meanwhile.
        let wire = Bytes::copy_from_slice(wire.bytes());
        let (to, order) = (to.clone(), self.order);
        self.order += 1;
        self.sending.spawn(async move { to.send_chunk(header, wire, order).await });
    }

    /// Forgets file `file` once every chunk its summary counted is passed on.
    fn settle(&mut self, file: u32) {
        if let Some((passed, Some(sent))) = self.owed.get(&file) {
            if passed >= sent {
                self.forget(file);
            }
        }
    }

    /// Forgets what is kept of file `file`: nothing more of it passes.
    fn forget(&mut self, file: u32) {
        self.owed.remove(&file);
        self.plans.remove(&file);
        self.held.remove(&file);
    }

    /// Passes the end of the manifest on once nothing is owed and every chunk is in the
    /// destination link's hands.
    async fn maybe_end(&mut self, to: &Arc<dyn Transport>) -> Result<(), EngineError> {
        if self.end.is_none() || !self.owed.is_empty() || !self.early.is_empty() {
            return Ok(());
        }
        while let Some(sent) = self.sending.join_next().await {
            sent??;
        }
        match self.end.take() {
            Some(end) => Ok(to.send_control(end).await?),
            None => Ok(()),
        }
    }

    fn path(&self, file: u32) -> String {
        self.paths.get(file as usize).map_or_else(|| format!("file #{file}"), shown)
    }
}
