//! The one entry point: run this side's role of a copy over a link. The client and
//! `soku serve` both come here, whichever of them sends.

use std::path::PathBuf;
use std::sync::Arc;

use soku_proto::message::{Message, Request};
use soku_proto::receive::Receiver;
use soku_proto::ProtoError;

use crate::ahead::Walked;
use crate::events::EventSink;
use crate::link::{Inbound, Link};
use crate::options::{CopyOptions, Outcome};
use crate::EngineError;

/// This side's part in a copy.
#[derive(Debug)]
pub enum Role {
    /// Send these sources.
    Send(Walked),
    /// Receive into the receiver's target, whose directory is `root`.
    Receive {
        /// The receiver's rules, with the target and the names it accepts (boxed: the
        /// state machine is several times the size of the other variant).
        receiver: Box<Receiver>,
        /// The directory everything lands in.
        root: PathBuf,
        /// For a confined server (`soku serve --root`): the directory `root` is opened
        /// beneath ([`crate::fsops::TargetDir::open_below`]).
        beneath: Option<Arc<crate::fsops::TargetDir>>,
        /// Tell the sender of nothing held, whatever is there (`soku serve
        /// --write-only`): with resume, the receiver's reports carry the hashes of what
        /// it holds under the copy's names, which would show a client who may only
        /// write what is there. Every file then comes whole.
        blind: bool,
        /// A sync's rules (`soku sync`), if this is one.
        sync: Option<soku_proto::sync::SyncRules>,
    },
}

/// Runs `role` over `link` until the copy is done or fails. Every task it starts has
/// ended when it returns, and dropping it midway stops them all; a receiver leaves no
/// temporary file behind either way. A local failure is also told to the peer.
pub async fn run(
    role: Role,
    link: &mut Link,
    opts: CopyOptions,
    events: Arc<dyn EventSink>,
) -> Result<Outcome, EngineError> {
    let result = match role {
        Role::Send(walked) => crate::send::run(walked, opts, link, events).await,
        Role::Receive { receiver, root, beneath, blind, sync } => {
            let within = crate::receive::Within { beneath: beneath.as_deref(), blind };
            crate::receive::run(*receiver, root, within, sync, opts, link, events).await
        }
    };
    if let Err(err) = &result {
        if err.tell_peer() {
            let _ = link.tx.send_control(Message::Fatal { message: err.to_string() }).await;
        }
    }
    result
}

/// The server's first read: the client's request. Chunks that overtook it (on a link
/// whose chunks travel apart from control messages) are held for the role to come.
pub async fn read_request(link: &mut Link) -> Result<Request, EngineError> {
    let mut early = Vec::new();
    let request = loop {
        match link.recv().await {
            Some(Ok(Inbound::Control(Message::Request(request)))) => break request,
            Some(Ok(Inbound::Control(other))) => {
                return Err(ProtoError::Violation(format!(
                    "expected a request from the client, got {}",
                    other.kind()
                ))
                .into())
            }
            Some(Ok(Inbound::Chunk(chunk))) if !link.traits.ordered => early.push(chunk),
            Some(Ok(Inbound::Chunk(_))) => {
                return Err(ProtoError::Violation(
                    "expected a request from the client, got a chunk".into(),
                )
                .into())
            }
            Some(Err(e)) => return Err(e.into()),
            None | Some(Ok(Inbound::Closed)) => {
                return Err(EngineError::PeerClosed { peer: "client", what: "sending its request" })
            }
        }
    };
    for chunk in early {
        link.hold(Inbound::Chunk(chunk));
    }
    Ok(request)
}
