//! `--report FILE.html`: one self-contained page about a finished copy (inline CSS and
//! SVG, no script, nothing fetched): goodput, RTT, loss, the congestion window and the
//! controller's phase over time, both sides' CPU, the files, the transport and a
//! verdict on what limited the copy.
//!
//! - [`collect`]: records the copy's events as they pass to the meter or `--json`;
//! - [`remote`]: the server's side: its CPU and its view of the path, sent back in a
//!   summary note on the ssh channel (`soku_proto::hello::ServerSummary`);
//! - [`series`]: turns the records into the charts' lines;
//! - [`svg`]: the charts; [`html`]: the page; [`verdict`]: what limited the copy;
//! - [`cpu`]: this process's CPU clock.

mod collect;
mod cpu;
mod html;
mod remote;
mod series;
mod svg;
mod verdict;

use std::path::{Path, PathBuf};
use std::time::Duration;

use soku_proto::hello::ServerSummary;

pub use collect::Recorder;
pub use cpu::process_cpu;
pub use remote::ServerSampler;

/// What the page says beside the recorded events.
#[derive(Debug, Clone)]
pub struct Context {
    /// The command line, as typed.
    pub command: String,
    /// Whether this side sent the data (an upload).
    pub upload: bool,
    /// `-l`, bits per second.
    pub rate_limit_bps: Option<u64>,
    /// This process's CPU time over the whole copy, and the wall time.
    pub client_cpu: Duration,
    /// See `client_cpu`.
    pub client_wall: Duration,
    /// The server's summary, if it sent one (a server from before it does not; nor
    /// does any over the ssh channel, which carries the data itself).
    pub server: Option<ServerSummary>,
    /// When the copy started, seconds since the Unix epoch.
    pub started_unix: u64,
}

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the report {}: {source}", path.display())]
pub struct ReportError {
    path: PathBuf,
    source: std::io::Error,
}

/// Writes the page for `recording` to `path`, through a temporary name beside it, so
/// a reader never sees half a page (created as any file, with the umask's mode: a
/// report is no secret, unlike a temporary file's default 0600).
pub fn write(
    path: &Path,
    recording: &collect::Recording,
    ctx: &Context,
) -> Result<(), ReportError> {
    let page = html::page(recording, ctx);
    let err = |source| ReportError { path: path.to_path_buf(), source };
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.soku-tmp", std::process::id()));
    let tmp = path.with_file_name(name);
    let written = std::fs::write(&tmp, page.as_bytes()).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(err)
}

/// `text` safe inside HTML and SVG text and attribute values: file names and messages
/// come from the peer or the file system and may hold markup.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters have no business in a page (and some are invalid in
            // XML, so in inline SVG): shown as the replacement character.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            escape("<script>alert(1)</script> & \"'\u{1}"),
            "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;&#39;\u{fffd}"
        );
    }
}
