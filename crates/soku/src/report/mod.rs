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
//! - [`context`]: what the page says beside the events; [`escape`]: text made safe
//!   for HTML and SVG;
//! - [`cpu`]: this process's CPU clock.

mod collect;
mod context;
mod cpu;
mod escape;
mod html;
mod remote;
mod series;
mod svg;
mod verdict;

use std::path::{Path, PathBuf};

pub use collect::Recorder;
pub use context::Context;
pub use cpu::process_cpu;
#[cfg(unix)]
pub use remote::ServerSampler;

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
