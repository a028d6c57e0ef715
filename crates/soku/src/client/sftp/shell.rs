//! The session's commands run: the remote ones as calls of the browse job, the local
//! ones here, the transfers as copies (`transfer.rs`).

use std::collections::HashMap;
use std::io::IsTerminal as _;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Mutex};

use soku_proto::browse::{Answer, Call};
use soku_proto::name::{glob_text, Name};
use soku_proto::path::GLOB_OPTIONS;

use super::browse::{Browse, BrowseError};
use super::command::{Command, COMMANDS};
use super::dirs::{self, RemoteDirs};
use super::listing;
use super::local::{local_path, reason};
use super::outcome::{Failed, Flow};
use super::transfer::{self, Copier};
use crate::cli::args::CopyArgs;
use crate::ui::{visible, visible_bytes};

/// Listings kept for completion, by directory; emptied by whatever changes the remote.
pub type Listings = Arc<Mutex<HashMap<Vec<u8>, Vec<(Name, bool)>>>>;

/// An sftp session.
pub struct Shell {
    pub rt: tokio::runtime::Handle,
    pub browse: Arc<tokio::sync::Mutex<Browse>>,
    pub dirs: Arc<Mutex<RemoteDirs>>,
    pub listings: Listings,
    /// `[user@]host` as a copy's remote path starts.
    pub destination: String,
    /// The host, for the prompt.
    pub host: String,
    /// The options every transfer is made with.
    pub copy: CopyArgs,
}

impl Shell {
    /// Runs `command`.
    pub fn execute(&self, command: Command) -> Result<Flow, Failed> {
        match command {
            Command::Quit => return Ok(Flow::Quit),
            Command::Help => {
                for (name, line) in COMMANDS {
                    println!("{name:<8} {line}");
                }
            }
            Command::Version => {
                println!("soku {}", env!("CARGO_PKG_VERSION"));
            }
            Command::Pwd => {
                let cwd = self.dirs().cwd;
                println!("Remote working directory: {}", visible_bytes(cwd.as_bytes()));
            }
            Command::Lpwd => {
                let here = std::env::current_dir().map_err(|e| format!("lpwd: {e}"))?;
                println!("Local working directory: {}", visible(&here.to_string_lossy()));
            }
            Command::Cd(path) => {
                let asked = self.resolve(path.as_deref().unwrap_or("~"));
                let found =
                    self.rt.block_on(async { self.browse.lock().await.directory(&asked).await })?;
                self.dirs.lock().map_err(|_| lost())?.cwd = found;
            }
            Command::Lcd(path) => {
                let path = local_path(path.as_deref().unwrap_or("~"));
                std::env::set_current_dir(&path).map_err(|e| {
                    format!("lcd: {}: {}", visible(&path.to_string_lossy()), reason(&e))
                })?;
            }
            Command::Lls(args) => run_local(std::process::Command::new("ls").args(args))?,
            Command::Lmkdir(path) => {
                let path = local_path(&path);
                std::fs::create_dir(&path).map_err(|e| {
                    format!("lmkdir: {}: {}", visible(&path.to_string_lossy()), reason(&e))
                })?;
            }
            Command::Shell(line) => {
                let mut shell = if line.is_empty() {
                    std::process::Command::new(std::env::var_os("SHELL").unwrap_or("sh".into()))
                } else {
                    let mut sh = std::process::Command::new("sh");
                    sh.arg("-c").arg(line);
                    sh
                };
                run_local(&mut shell)?;
            }
            Command::Ls { flags, path } => {
                let entries = self.listed(path.as_deref().unwrap_or(""))?;
                let width = terminal_width();
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                for line in listing::lines(entries, flags, width, now) {
                    println!("{line}");
                }
            }
            Command::Df { human, inodes, path } => {
                let path = self.resolve(path.as_deref().unwrap_or(""));
                let answer = self.rt.block_on(async {
                    self.browse.lock().await.call(Call::Space { path }).await
                })?;
                let Answer::Space(space) = answer else {
                    return Err(Failed::Lost("the remote soku answered df out of turn".into()));
                };
                for line in listing::space(&space, human, inodes) {
                    println!("{line}");
                }
            }
            Command::Mkdir(path) => {
                let path = self.resolve(&path);
                self.change(Call::MakeDir { path, mode: 0o777 })?;
            }
            Command::Rmdir(path) => {
                let path = self.resolve(&path);
                self.change(Call::RemoveDir { path })?;
            }
            Command::Rm(paths) => {
                for typed in paths {
                    for path in self.matches(&typed)? {
                        self.change(Call::Remove { path })?;
                    }
                }
            }
            Command::Rename(from, to) => {
                let (from, to) = (self.resolve(&from), self.resolve(&to));
                self.change(Call::Rename { from, to })?;
            }
            Command::Chmod { mode, paths } => {
                for typed in paths {
                    for path in self.matches(&typed)? {
                        self.change(Call::Chmod { path, mode })?;
                    }
                }
            }
            Command::Get(get) => transfer::get(&self.copier(), &self.dirs(), get)?,
            Command::Put(put) => {
                let result = transfer::put(&self.copier(), &self.dirs(), put);
                self.forget_listings();
                result?;
            }
        }
        Ok(Flow::Next)
    }

    /// What a transfer is made with.
    fn copier(&self) -> Copier<'_> {
        Copier { rt: &self.rt, copy: &self.copy, destination: &self.destination }
    }

    /// The remote path `typed` names.
    pub fn resolve(&self, typed: &str) -> Name {
        self.dirs().resolve(typed)
    }

    /// The session's remote directories now.
    pub fn dirs(&self) -> RemoteDirs {
        self.dirs.lock().map(|d| d.clone()).unwrap_or_else(|e| e.into_inner().clone())
    }

    /// What `typed` lists: a directory's entries, the one entry it names, or the
    /// entries its last name matches as a glob.
    fn listed(&self, typed: &str) -> Result<Vec<soku_proto::browse::Listed>, Failed> {
        let path = self.resolve(typed);
        let (dir, last) = dirs::split(&path);
        let Some(pattern) = glob_of(&last) else {
            return Ok(self.list(&path)?);
        };
        let mut entries = self.list(&dir)?;
        entries.retain(|e| pattern.matches_with(&glob_text(e.name.as_bytes()), GLOB_OPTIONS));
        if entries.is_empty() {
            return Err(Failed::Command(format!("{}: no match", visible(typed))));
        }
        Ok(entries)
    }

    /// The remote paths `typed` names: itself, or what its last name matches as a glob.
    pub fn matches(&self, typed: &str) -> Result<Vec<Name>, Failed> {
        let path = self.resolve(typed);
        let (dir, last) = dirs::split(&path);
        let Some(pattern) = glob_of(&last) else { return Ok(vec![path]) };
        let entries = self.list(&dir)?;
        let mut found: Vec<Name> = entries
            .iter()
            .map(|e| e.name.as_bytes())
            .filter(|name| *name != b"." && *name != b"..")
            .filter(|name| pattern.matches_with(&glob_text(name), GLOB_OPTIONS))
            .map(|name| dirs::join(&dir, name))
            .collect();
        found.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        if found.is_empty() {
            return Err(Failed::Command(format!("{}: no match", visible(typed))));
        }
        Ok(found)
    }

    /// A call that changes the remote side.
    fn change(&self, call: Call) -> Result<(), Failed> {
        let result = self.rt.block_on(async { self.browse.lock().await.done(call).await });
        self.forget_listings();
        result.map_err(Failed::from)
    }

    /// Drops the listings kept for completion.
    pub fn forget_listings(&self) {
        if let Ok(mut kept) = self.listings.lock() {
            kept.clear();
        }
    }

    /// What the remote `path` holds.
    fn list(&self, path: &Name) -> Result<Vec<soku_proto::browse::Listed>, BrowseError> {
        self.rt.block_on(async { self.browse.lock().await.list(path).await })
    }
}

/// The glob `name` is, if it holds a glob character.
fn glob_of(name: &[u8]) -> Option<glob::Pattern> {
    if !name.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
        return None;
    }
    glob::Pattern::new(&glob_text(name)).ok()
}

/// Runs a local program on the user's terminal; a failure to start it, or a non-zero
/// status, fails the command.
fn run_local(cmd: &mut std::process::Command) -> Result<(), Failed> {
    let program = cmd.get_program().as_bytes().to_vec();
    let status = cmd.status().map_err(|e| {
        Failed::Command(format!("{}: cannot run it: {}", visible_bytes(&program), reason(&e)))
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(Failed::Command(format!("{}: {status}", visible_bytes(&program))))
    }
}

/// The width of the terminal on stdout, if it is one.
fn terminal_width() -> Option<usize> {
    let stdout = std::io::stdout();
    if !stdout.is_terminal() {
        return None;
    }
    rustix::termios::tcgetwinsize(&stdout)
        .ok()
        .map(|size| usize::from(size.ws_col))
        .filter(|w| *w > 0)
}

fn lost() -> Failed {
    Failed::Lost("the session's state was poisoned by a panic".into())
}
