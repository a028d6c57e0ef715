//! What the user types: the command line, scp-style paths, and the config files under
//! the command line.
//!
//! - [`args`]: the one command-line definition (help, man page, completions).
//! - [`spec`]: scp-style `[user@]host:path` parsing.
//! - [`transport_mode`]: `--transport`; [`size`]: sizes as the user writes them.
//! - [`config`]: the config files under the command line (`soku config [HOST]`).
//! - [`filters`]: the include and exclude rules, in command-line order.

pub mod args;
pub mod cipher;
pub mod config;
pub mod filters;
pub mod size;
pub mod spec;
pub mod transport_mode;
