//! The client's side of the browse job (`soku_proto::browse`): one call at a time on
//! the session's link, each answered before the next is sent.

use soku_engine::link::{Inbound, Link};
use soku_proto::browse::{Answer, Call, Listed};
use soku_proto::message::Message;
use soku_proto::name::Name;

use crate::client::session::Session;

/// Most entries a listing may hold: what a hostile server can make the client keep.
pub const MAX_LISTED: usize = 1_000_000;

/// Why a call did not get its answer.
#[derive(Debug, thiserror::Error)]
pub enum BrowseError {
    /// The server answered that the call failed (its line, as it said it).
    #[error("remote: {0}")]
    Refused(String),
    /// The session is gone: the connection was lost or the server ended.
    #[error("the session with the remote soku ended: {0}")]
    Gone(String),
}

/// The remote side of an sftp session.
pub struct Browse {
    session: Option<Session>,
    link: Option<Link>,
}

impl Browse {
    pub fn new(session: Session, link: Link) -> Self {
        Browse { session: Some(session), link: Some(link) }
    }

    /// Sends `call` and reads its one answer.
    pub async fn call(&mut self, call: Call) -> Result<Answer, BrowseError> {
        self.send(call).await?;
        self.answer().await
    }

    /// What `path` holds (itself, if no directory), every batch read.
    pub async fn list(&mut self, path: &Name) -> Result<Vec<Listed>, BrowseError> {
        self.send(Call::List { path: path.clone() }).await?;
        let mut listed = Vec::new();
        loop {
            match self.answer().await? {
                Answer::Listing { entries, more } => {
                    listed.extend(entries);
                    if listed.len() > MAX_LISTED {
                        // The rest of the listing is still on its way: the session
                        // cannot tell the next answer from it, and ends.
                        self.link = None;
                        return Err(BrowseError::Gone(format!(
                            "the remote listing of {} passed {MAX_LISTED} entries",
                            crate::ui::visible_bytes(path.as_bytes())
                        )));
                    }
                    if !more {
                        return Ok(listed);
                    }
                }
                other => return Err(unexpected(&other)),
            }
        }
    }

    /// The absolute path of directory `path`.
    pub async fn directory(&mut self, path: &Name) -> Result<Name, BrowseError> {
        match self.call(Call::Directory { path: path.clone() }).await? {
            Answer::Path { path } => Ok(path),
            other => Err(unexpected(&other)),
        }
    }

    /// A call answered with `Done`.
    pub async fn done(&mut self, call: Call) -> Result<(), BrowseError> {
        match self.call(call).await? {
            Answer::Done => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// Ends the session: the server's job ends as our side of the link closes.
    pub async fn close(mut self) {
        if let (Some(session), Some(link)) = (self.session.take(), self.link.take()) {
            let _ = session.close(link).await;
        }
    }

    async fn send(&mut self, call: Call) -> Result<(), BrowseError> {
        let link = self.link.as_ref().ok_or_else(|| BrowseError::Gone("closed".into()))?;
        if let Err(err) = link.tx.send_control(Message::Call(call)).await {
            self.link = None;
            return Err(BrowseError::Gone(err.to_string()));
        }
        Ok(())
    }

    /// The next answer; a failure said by the server as [`BrowseError::Refused`].
    async fn answer(&mut self) -> Result<Answer, BrowseError> {
        let link = self.link.as_mut().ok_or_else(|| BrowseError::Gone("closed".into()))?;
        let gone = match link.recv().await {
            Some(Ok(Inbound::Control(Message::Answer(Answer::Failed { message })))) => {
                return Err(BrowseError::Refused(message));
            }
            Some(Ok(Inbound::Control(Message::Answer(answer)))) => return Ok(answer),
            Some(Ok(Inbound::Control(Message::Fatal { message }))) => format!("remote: {message}"),
            Some(Ok(Inbound::Control(other))) => format!("the remote soku sent {}", other.kind()),
            Some(Ok(Inbound::Chunk(_))) => "the remote soku sent a chunk".into(),
            Some(Ok(Inbound::Closed)) | None => "the remote soku closed it".into(),
            Some(Err(err)) => err.to_string(),
        };
        self.link = None;
        Err(BrowseError::Gone(gone))
    }
}

fn unexpected(answer: &Answer) -> BrowseError {
    let what = match answer {
        Answer::Done => "done",
        Answer::Failed { .. } => "a failure",
        Answer::Path { .. } => "a path",
        Answer::Listing { .. } => "a listing",
        Answer::Stat { .. } => "an entry",
        Answer::Space(_) => "a file system's space",
    };
    BrowseError::Gone(format!("the remote soku answered with {what} out of turn"))
}
