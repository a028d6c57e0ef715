//! What the server said of itself and of the job's target, as the copy needs it.

/// What the server said in its hello (or, for a kept server, what the first session
/// recorded) and what an upload's preview answered.
#[derive(Clone, Copy)]
pub struct Terms {
    /// The receiving side holds nothing under the names that come (see
    /// `crate::client::preview`): the copy runs without held reports.
    pub nothing_held: bool,
    /// The server takes names that are not UTF-8 (`soku_proto::name`).
    pub byte_names: bool,
    /// The most descriptors the server may hold open (`None`: an older server): an
    /// upload keeps the files open there within it.
    pub open_files: Option<u64>,
}
