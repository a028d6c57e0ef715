//! Starting the remote end: the user's own `ssh` (or `-S program`, or `-e CMD`), or a
//! local `soku serve` for `soku demo` and local-to-local copies.

use std::process::Stdio;

use tokio::process::Command;

use crate::cli::SshArgs;
use crate::spec::Remote;

/// How to reach the host that runs `soku serve`.
#[derive(Debug, Clone)]
pub enum Launcher {
    /// Through ssh (or a program that understands ssh's options), as scp does.
    Ssh {
        /// The program (`ssh` unless `-S`).
        program: String,
        /// Options derived from scp-style flags and `-o`.
        options: Vec<String>,
    },
    /// A remote-shell command line replacing ssh (rsync's `-e`): `CMD [-l user] host command`.
    Rsh {
        /// The command split into words.
        words: Vec<String>,
    },
    /// This machine: run our own binary directly.
    Local,
}

impl Launcher {
    /// Builds the launcher from the ssh options; `verbose` and `quiet` are passed on.
    pub fn from_args(args: &SshArgs, verbose: u8, quiet: bool) -> anyhow::Result<Self> {
        if let Some(rsh) = &args.rsh {
            let words = shell_words(rsh)?;
            if words.is_empty() {
                anyhow::bail!("-e: empty remote shell command");
            }
            return Ok(Launcher::Rsh { words });
        }
        let mut options = vec![
            // As scp does: no X11 or agent forwarding, no port forwards, no tty.
            "-x".to_string(),
            "-a".into(),
            "-T".into(),
            "-oClearAllForwardings=yes".into(),
            "-oPermitLocalCommand=no".into(),
            "-oRemoteCommand=none".into(),
            "-oRequestTTY=no".into(),
        ];
        if let Some(config) = &args.ssh_config {
            options.push("-F".into());
            options.push(config.display().to_string());
        }
        if let Some(port) = args.port {
            options.push("-p".into());
            options.push(port.to_string());
        }
        if let Some(identity) = &args.identity {
            options.push("-i".into());
            options.push(identity.display().to_string());
        }
        if let Some(jump) = &args.jump {
            options.push("-J".into());
            options.push(jump.clone());
        }
        for option in &args.ssh_options {
            options.push("-o".into());
            options.push(option.clone());
        }
        if args.batch {
            options.push("-oBatchMode=yes".into());
        }
        if args.ipv4 {
            options.push("-4".into());
        }
        if args.ipv6 {
            options.push("-6".into());
        }
        for _ in 0..verbose {
            options.push("-v".into());
        }
        if quiet {
            options.push("-q".into());
        }
        let program = args.ssh_program.clone().unwrap_or_else(|| "ssh".into());
        Ok(Launcher::Ssh { program, options })
    }

    /// The command that starts `soku serve` on `remote` (or locally).
    pub fn command(&self, remote: Option<&Remote>, remote_soku: &str) -> anyhow::Result<Command> {
        let serve = [remote_soku.to_string(), "serve".into()];
        let mut cmd = match (self, remote) {
            (Launcher::Ssh { program, options }, Some(remote)) => {
                let mut cmd = Command::new(program);
                cmd.args(options).arg("--").arg(remote.destination());
                cmd.arg(shell_quote_all(&serve));
                cmd
            }
            (Launcher::Rsh { words }, Some(remote)) => {
                let mut cmd = Command::new(&words[0]);
                cmd.args(&words[1..]);
                if let Some(user) = &remote.user {
                    cmd.arg("-l").arg(user);
                }
                cmd.arg(&remote.host).arg(shell_quote_all(&serve));
                cmd
            }
            (Launcher::Local, _) | (_, None) => {
                let exe = std::env::current_exe()?;
                let mut cmd = Command::new(exe);
                cmd.arg("serve").arg("--bind").arg("127.0.0.1");
                cmd
            }
        };
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        cmd.kill_on_drop(true);
        Ok(cmd)
    }
}

/// Quotes words for the remote shell, which ssh hands the command line to.
pub fn shell_quote_all(words: &[String]) -> String {
    words.iter().map(|w| shell_quote(w)).collect::<Vec<_>>().join(" ")
}

/// Quotes one word for a POSIX shell; plain words stay as they are.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Splits a command line into words: whitespace separates, single and double quotes group,
/// backslash escapes (enough for `-e "ssh -p 2222"`).
pub fn shell_words(line: &str) -> anyhow::Result<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => anyhow::bail!("unterminated ' in {line:?}"),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => word.extend(chars.next()),
                        Some(c) => word.push(c),
                        None => anyhow::bail!("unterminated \" in {line:?}"),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(
            shell_words(r#"ssh -p 2222 -o "A B" 'c d' e\ f"#).expect("ok"),
            ["ssh", "-p", "2222", "-o", "A B", "c d", "e f"]
        );
        assert!(shell_words("'open").is_err());
    }

    #[test]
    fn quoting_survives_a_shell() {
        assert_eq!(shell_quote("plain/path"), "plain/path");
        assert_eq!(shell_quote("it's here"), r"'it'\''s here'");
        assert_eq!(shell_quote(""), "''");
    }
}
