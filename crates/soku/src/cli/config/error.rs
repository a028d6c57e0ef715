//! Why a config file cannot be used: each error names the file and what to do.

use std::path::PathBuf;

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A key soku does not know, a value of the wrong type or out of range, bad syntax.
    #[error("{}:{line}: {key}: {problem}", path.display())]
    Invalid { path: PathBuf, line: usize, key: String, problem: String },
    /// The file exists but cannot be read.
    #[error("config file {}: cannot read it: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// The name is taken by something that is not a regular file (a FIFO would wait
    /// for a writer, a device would never end).
    #[error(
        "config file {}: is {what}, not a regular file: make it a regular file or remove it",
        path.display()
    )]
    NotRegular { path: PathBuf, what: &'static str },
    /// Larger than any config file needs to be.
    #[error(
        "config file {}: larger than {} KiB, which no config file needs: is it the right file?",
        path.display(),
        limit / 1024
    )]
    TooLarge { path: PathBuf, limit: u64 },
}
