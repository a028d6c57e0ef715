//! The browse job: `soku sftp`'s remote side (`soku_proto::browse`). It answers the
//! client's calls, one at a time, until the client ends the session; the files
//! themselves move as copies through the same login, never here.
//!
//! Every path is held to the fence as a copy's is: beneath `--root` each one is opened
//! through the root (`openat2` with `RESOLVE_BENEATH`, `TargetDir::open_beneath`) and
//! operated on at its parent's descriptor, so that no symbolic link leads out; a
//! read-only server refuses what writes, a write-only one what lists. The work runs off
//! the runtime, and a listing goes out in batches as it is read, so that a directory of
//! any size costs the server one batch of memory.

mod place;
mod users;

use soku_engine::link::{Inbound, Link};
use soku_proto::browse::{Answer, Call};
use soku_proto::message::Message;
use tokio::sync::mpsc;

use super::fence::Fence;
use place::Place;

/// Answers the client's calls until it closes the session.
pub async fn serve(link: &mut Link, fence: &Fence) -> anyhow::Result<()> {
    loop {
        let call = match link.recv().await {
            None | Some(Ok(Inbound::Closed)) => return Ok(()),
            Some(Err(err)) => return Err(err.into()),
            Some(Ok(Inbound::Control(Message::Call(call)))) => call,
            Some(Ok(other)) => {
                let what = match &other {
                    Inbound::Control(message) => message.kind(),
                    _ => "a chunk",
                };
                anyhow::bail!("the client sent {what} in an sftp session");
            }
        };
        // A listing's batches come through a channel of two: the reader waits for the
        // link rather than reading ahead.
        let (tx, mut rx) = mpsc::channel(2);
        let fence = fence.clone();
        let work = tokio::task::spawn_blocking(move || answer(&call, &fence, &tx));
        while let Some(answer) = rx.recv().await {
            link.tx.send_control(Message::Answer(answer)).await?;
        }
        work.await?;
    }
}

/// Answers `call` into `out` (one answer, or a listing's batches).
fn answer(call: &Call, fence: &Fence, out: &mpsc::Sender<Answer>) {
    if let Some(why) = refused(call, fence) {
        let _ = out.blocking_send(Answer::Failed { message: why.into() });
        return;
    }
    let place = Place::new(fence);
    let answered = match call {
        Call::Directory { path } => place.directory(path).map(|path| Answer::Path { path }),
        Call::List { path } => match place.list(path, |answer| out.blocking_send(answer).is_ok()) {
            Ok(()) => return,
            Err(err) => Err(err),
        },
        Call::Stat { path, follow } => {
            place.stat(path, *follow).map(|entry| Answer::Stat { entry })
        }
        Call::MakeDir { path, mode } => place.make_dir(path, *mode).map(|()| Answer::Done),
        Call::RemoveDir { path } => place.remove_dir(path).map(|()| Answer::Done),
        Call::Remove { path } => place.remove(path).map(|()| Answer::Done),
        Call::Rename { from, to } => place.rename(from, to).map(|()| Answer::Done),
        Call::Chmod { path, mode } => place.chmod(path, *mode).map(|()| Answer::Done),
        Call::Space { path } => place.space(path).map(Answer::Space),
    };
    let answer = answered.unwrap_or_else(|err| Answer::Failed { message: err.to_string() });
    let _ = out.blocking_send(answer);
}

/// Why the fence refuses `call`, if it does.
fn refused(call: &Call, fence: &Fence) -> Option<&'static str> {
    if fence.read_only && call.writes() {
        return Some(
            "refused: this server is read-only (soku serve --read-only, set by its \
             administrator): list and get, but change nothing",
        );
    }
    if fence.write_only && call.reads() {
        return Some(
            "refused: this server is write-only (soku serve --write-only, set by its \
             administrator): it does not list what it holds; put files into it",
        );
    }
    if fence.write_only && matches!(call, Call::Remove { .. } | Call::RemoveDir { .. }) {
        return Some(
            "refused: this server is write-only (soku serve --write-only, set by its \
             administrator): it removes nothing",
        );
    }
    None
}

#[cfg(test)]
mod tests;
