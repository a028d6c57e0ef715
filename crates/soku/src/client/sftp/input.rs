//! Where the session's commands come from: the prompt (line editing, history,
//! completion), or a batch read as sftp(1) reads `-b`.

use std::io::BufRead;
use std::path::PathBuf;

use rustyline::config::Config;
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{CompletionType, Editor};

use super::command;
use super::complete::Completion;
use super::outcome::{Failed, Flow};
use super::shell::Shell;
use crate::ui::{say, visible, visible_bytes};

/// How a session ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// `bye`, or the end of the input.
    Done,
    /// A batch command failed (sftp's exit status 1).
    Failed,
    /// The remote side went away.
    Lost,
}

/// Most commands kept in the history file.
const HISTORY: usize = 1000;

/// Reads commands at the prompt until `bye` or end of input.
pub fn interactive(shell: &Shell, completion: Completion) -> anyhow::Result<Ended> {
    let config = Config::builder()
        .max_history_size(HISTORY)?
        .auto_add_history(true)
        .completion_type(CompletionType::List)
        .build();
    let mut editor: Editor<Completion, FileHistory> = Editor::with_config(config)?;
    editor.set_helper(Some(completion));
    let history = history_file();
    if let Some(file) = &history {
        // None yet, the first time.
        let _ = editor.load_history(file);
    }
    let ended = loop {
        let cwd = shell.dirs().cwd;
        let prompt = format!("sftp {}:{}> ", visible(&shell.host), visible_bytes(cwd.as_bytes()));
        let line = match editor.readline(&prompt) {
            Ok(line) => line,
            // Ctrl-C at the prompt clears the line, as in a shell.
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break Ended::Done,
            Err(err) => return Err(err.into()),
        };
        match run_line(shell, &line) {
            Ok(Flow::Quit) => break Ended::Done,
            Ok(Flow::Next) | Err(Failed::Command(_)) => {}
            Err(Failed::Lost(_)) => break Ended::Lost,
        }
    };
    if let Some(file) = &history {
        if let Some(dir) = file.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = editor.save_history(file);
    }
    Ok(ended)
}

/// Runs the commands of `input` as sftp's batch mode runs them: each echoed after the
/// prompt (unless it starts with `@`), and with `stop_on_failure` the first that fails
/// ends the batch, unless it starts with `-`.
pub fn batch(shell: &Shell, input: impl BufRead, stop_on_failure: bool) -> anyhow::Result<Ended> {
    for line in input.lines() {
        let line = line?;
        let mut text = line.trim();
        let mut may_fail = false;
        let mut echo = true;
        // Either order, as sftp takes them.
        for _ in 0..2 {
            if let Some(rest) = text.strip_prefix('-') {
                may_fail = true;
                text = rest;
            } else if let Some(rest) = text.strip_prefix('@') {
                echo = false;
                text = rest;
            }
        }
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        if echo {
            println!("sftp> {}", visible(text));
        }
        match run_line(shell, text) {
            Ok(Flow::Quit) => return Ok(Ended::Done),
            Ok(Flow::Next) => {}
            Err(Failed::Lost(_)) => return Ok(Ended::Lost),
            Err(Failed::Command(_)) if may_fail || !stop_on_failure => {}
            Err(Failed::Command(_)) => return Ok(Ended::Failed),
        }
    }
    Ok(Ended::Done)
}

/// Parses and runs one line; a failure is said here.
fn run_line(shell: &Shell, line: &str) -> Result<Flow, Failed> {
    let parsed = command::parse(line).map_err(Failed::Command);
    let result = match parsed {
        Ok(Some(command)) => shell.execute(command),
        Ok(None) => Ok(Flow::Next),
        Err(err) => Err(err),
    };
    if let Err(Failed::Command(line) | Failed::Lost(line)) = &result {
        say(line);
    }
    result
}

/// `$XDG_DATA_HOME/soku/sftp_history` (`~/.local/share` without it).
fn history_file() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share"))
        })?;
    Some(data.join("soku").join("sftp_history"))
}
