//! The receive preview: with resume, each file's chunks wait for the receiver's report
//! of what it already holds, and the first report costs the copy a round trip before any
//! data moves. The common case holds nothing (a new file, or a tree into an empty
//! directory), and the receiving side can see that before the copy begins, from the
//! target and the sources' top-level names alone: then both sides run the copy without
//! reports (`soku_proto::hello::ReceivePreview`, protocol 6).
//!
//! - Upload: the client's hello carries the target and the names; the server checks
//!   them right after reading it and answers `ServerNote::Holds` on the ssh channel,
//!   where the client reads it beside the server's hello.
//! - Download: the client checks its own target and tells the server in its hello.
//!
//! The check runs again in every session of a copy: after an interruption the partial
//! files are there, and the copy reports what they hold as before.

use std::path::PathBuf;

use anyhow::Context as _;
use soku_engine::partial::holds_nothing;
use soku_engine::partial::made_dir::resolve_target;
use soku_engine::walk::top_name;
use soku_proto::frame;
use soku_proto::hello::{ReceivePreview, ServerNote};
use soku_proto::message::Job;
use soku_proto::name::Name;
use soku_proto::path::{requested_name, Target};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The first protocol version that answers a preview.
pub const SINCE_VERSION: u16 = 6;

/// The preview of an upload of `sources` into `target`, when each source has a name.
/// The hello carries text: a target or a name that is not UTF-8 is not previewed.
pub fn for_upload(sources: &[PathBuf], target: &Name) -> Option<ReceivePreview> {
    let names = sources
        .iter()
        .map(|source| top_name(source).and_then(|name| name.to_str().map(str::to_string)))
        .collect::<Option<Vec<_>>>()?;
    ReceivePreview::upload(target.to_str()?, u32::try_from(sources.len()).ok()?, names)
}

/// The preview of a download of `sources` into the local `target`: that nothing is
/// held, when each source's name is plain (no glob, no `.` or `~` whose real name only
/// the server knows) and nothing is at any of them here.
pub fn for_download(sources: &[Name], target: &Target) -> Option<ReceivePreview> {
    let names = sources.iter().map(plain_name).collect::<Option<Vec<_>>>()?;
    holds_nothing(target, &names).then_some(ReceivePreview::NothingHeld)
}

/// The name a remote source's entries will carry, when the client can tell it: the name
/// the receiver accepts for it (`requested_name`), unless that is a glob.
fn plain_name(source: &Name) -> Option<String> {
    let name = std::str::from_utf8(requested_name(source.as_bytes())?).ok()?;
    (!name.contains(['*', '?', '['])).then(|| name.to_string())
}

/// The server's answer to an upload's preview (`None` for a download's, which needs
/// none): whether nothing is held under the names in the target, resolved as the
/// receiver will resolve it (`expand` expands `~` as the server does).
pub fn answer(preview: &ReceivePreview, expand: fn(&str) -> PathBuf) -> Option<bool> {
    let ReceivePreview::Upload { target, sources, names } = preview else { return None };
    // A target the request will be refused for holds nothing to skip a report for.
    let nothing = resolve_target(&expand(target), *sources)
        .is_ok_and(|target| target.missing_root().is_none() && holds_nothing(&target, names));
    Some(nothing)
}

/// What the server promised in answer to the client's preview, kept until the request
/// names the job.
#[derive(Debug)]
pub struct Promise(Option<ReceivePreview>);

impl Promise {
    /// The client's preview, as the server answered it (`answered`: [`answer`]'s).
    pub fn new(preview: Option<ReceivePreview>, answered: Option<bool>) -> Self {
        Promise(preview.filter(|preview| match preview {
            ReceivePreview::Upload { .. } => answered == Some(true),
            ReceivePreview::NothingHeld => true,
        }))
    }

    /// Whether the copy of `job` runs without held reports: only the job the promise
    /// was made for (a client whose request differs from its preview gets the reports).
    pub fn holds_for(&self, job: &Job) -> bool {
        match (&self.0, job) {
            (
                Some(ReceivePreview::Upload { target, sources, .. }),
                Job::Receive { target: t, sources: s },
            ) => t == target.as_str() && sources == s,
            (Some(ReceivePreview::NothingHeld), Job::Send { .. }) => true,
            _ => false,
        }
    }
}

/// Reads the server's [`ServerNote::Holds`], the first frame after its hello, from what
/// followed the hello (`leftover`) and then `stdout`; returns it and what follows it.
pub async fn read_answer<R: AsyncRead + Unpin>(
    stdout: &mut R,
    leftover: Vec<u8>,
) -> anyhow::Result<(bool, Vec<u8>)> {
    let mut decoder = frame::Decoder::new(4096);
    decoder.feed(&leftover);
    let mut buf = [0u8; 4096];
    loop {
        if let Some(payload) = decoder.next_payload()? {
            return match soku_proto::hello::decode_hello(&payload)? {
                ServerNote::Holds { nothing } => Ok((nothing, decoder.buffered().to_vec())),
                other => {
                    anyhow::bail!("the remote soku answered {other:?} where it owed what it holds")
                }
            };
        }
        let n = stdout.read(&mut buf).await.context("reading what the remote holds")?;
        if n == 0 {
            anyhow::bail!("the remote closed the connection before saying what it holds");
        }
        decoder.feed(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn names(list: &[&str]) -> Vec<Name> {
        list.iter().map(|s| Name::from(*s)).collect()
    }

    #[test]
    fn download_names_are_only_the_ones_the_client_can_tell() {
        let plain_name = |s: &str| plain_name(&Name::from(s));
        assert_eq!(plain_name("a/b"), Some("b".into()));
        assert_eq!(plain_name("/x/dir/"), Some("dir".into()));
        assert_eq!(plain_name("file"), Some("file".into()));
        for unknown in ["", ".", "dir/.", "..", "~", "~/", "*.log", "a/f?", "[ab]"] {
            assert_eq!(plain_name(unknown), None, "{unknown:?}");
        }
    }

    #[test]
    fn a_download_previews_nothing_held_only_into_free_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        let into = Target::IntoDir(dir.path().to_path_buf());
        assert_eq!(for_download(&names(&["h/a", "b"]), &into), Some(ReceivePreview::NothingHeld));
        std::fs::write(dir.path().join("b"), b"x").expect("write");
        assert_eq!(for_download(&names(&["h/a", "b"]), &into), None);
        assert_eq!(for_download(&names(&["*.c"]), &into), None);
    }

    #[test]
    fn the_server_answers_an_upload_as_its_receiver_will_resolve_the_target() {
        let dir = tempfile::tempdir().expect("tempdir");
        let upload = |target: &Path, sources: u32, names: &[&str]| ReceivePreview::Upload {
            target: target.display().to_string(),
            sources,
            names: strings(names),
        };
        let as_is = |path: &str| PathBuf::from(path);
        let empty = dir.path();
        assert_eq!(answer(&upload(empty, 2, &["a", "b"]), as_is), Some(true));
        std::fs::write(dir.path().join("a"), b"x").expect("write");
        assert_eq!(answer(&upload(empty, 2, &["a", "b"]), as_is), Some(false));
        let new_name = dir.path().join("new");
        assert_eq!(answer(&upload(&new_name, 1, &["a"]), as_is), Some(true));
        assert_eq!(answer(&upload(&dir.path().join("a"), 1, &["x"]), as_is), Some(false));
        let missing = dir.path().join("no/such/dir/");
        assert_eq!(answer(&upload(&missing, 1, &["a"]), as_is), Some(false));
        assert_eq!(answer(&upload(&new_name, 2, &["a", "b"]), as_is), Some(false));
        assert_eq!(answer(&ReceivePreview::NothingHeld, as_is), None);
    }

    #[test]
    fn a_promise_holds_only_for_the_job_it_was_made_for() {
        let preview =
            ReceivePreview::Upload { target: "d".into(), sources: 1, names: strings(&["a"]) };
        let job = |target: &str| Job::Receive { target: target.into(), sources: 1 };
        let promise = |answered| Promise::new(Some(preview.clone()), answered);
        assert!(promise(Some(true)).holds_for(&job("d")));
        assert!(!promise(Some(false)).holds_for(&job("d")));
        assert!(!promise(Some(true)).holds_for(&job("elsewhere")));
        assert!(!Promise::new(None, None).holds_for(&job("d")));
        let send = Job::Send { sources: names(&["a"]) };
        let told = Promise::new(Some(ReceivePreview::NothingHeld), None);
        assert!(told.holds_for(&send));
        assert!(!told.holds_for(&job("d")));
    }

    #[tokio::test]
    async fn the_answer_is_read_across_reads_and_what_follows_is_kept() {
        let mut bytes = frame::to_vec(&ServerNote::Holds { nothing: true }).expect("encode");
        bytes.extend_from_slice(b"rest");
        let (first, second) = bytes.split_at(2);
        let mut stream = second;
        let (nothing, after) = read_answer(&mut stream, first.to_vec()).await.expect("read");
        assert!(nothing);
        assert_eq!(after, b"rest");
        let mut empty: &[u8] = &[];
        assert!(read_answer(&mut empty, Vec::new()).await.is_err(), "the channel ended first");
    }
}
