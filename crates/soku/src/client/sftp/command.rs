//! A line of the session read as one of sftp(1)'s commands: words split as a POSIX
//! shell splits them (quotes, backslashes; `shlex`), flags first, then the paths.

/// `ls`'s flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LsFlags {
    /// `-l`: one long line per entry.
    pub long: bool,
    /// `-a`: names that start with a dot too.
    pub all: bool,
    /// `-1`: one name per line.
    pub single: bool,
    /// `-n`: owners as numbers (implies `-l`).
    pub numeric: bool,
    /// `-t`: newest first.
    pub by_time: bool,
    /// `-S`: largest first.
    pub by_size: bool,
    /// `-r`: the order reversed.
    pub reverse: bool,
}

/// A transfer's flags and paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// `-r` (or `-R`): directories too.
    pub recursive: bool,
    /// `-p` (or `-P`): times and modes kept.
    pub preserve: bool,
    /// What is sent (globs allowed).
    pub sources: Vec<String>,
    /// Where to; `None`: the current directory of the other side.
    pub target: Option<String>,
}

/// One command of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Ls {
        flags: LsFlags,
        path: Option<String>,
    },
    Cd(Option<String>),
    Pwd,
    Lcd(Option<String>),
    Lpwd,
    Lls(Vec<String>),
    Get(Transfer),
    Put(Transfer),
    Mkdir(String),
    Lmkdir(String),
    Rmdir(String),
    Rm(Vec<String>),
    Rename(String, String),
    Chmod {
        mode: u32,
        paths: Vec<String>,
    },
    Df {
        human: bool,
        inodes: bool,
        path: Option<String>,
    },
    /// `!command`, or `!` alone for a shell.
    Shell(String),
    Help,
    Version,
    Quit,
}

/// The commands, for `help` and for completion.
pub const COMMANDS: &[(&str, &str)] = &[
    ("bye", "end the session"),
    ("cd", "cd [path]: change the remote directory (the start one without a path)"),
    ("chmod", "chmod mode path...: change the permissions of remote files (globs)"),
    ("df", "df [-hi] [path]: the remote file system's space (-h: in units, -i: inodes)"),
    ("exit", "end the session"),
    ("get", "get [-rp] remote [local]: download (globs); -r directories, -p keep times"),
    ("help", "this list"),
    ("lcd", "lcd [path]: change the local directory"),
    ("lls", "lls [ls-options] [path]: list the local directory"),
    ("lmkdir", "lmkdir path: make a local directory"),
    ("lpwd", "lpwd: print the local directory"),
    ("ls", "ls [-1alnrSt] [path]: list the remote directory (globs)"),
    ("mget", "mget [-rp] remote...: download each into the local directory"),
    ("mkdir", "mkdir path: make a remote directory"),
    ("mput", "mput [-rp] local...: upload each into the remote directory"),
    ("put", "put [-rp] local [remote]: upload (globs); -r directories, -p keep times"),
    ("pwd", "pwd: print the remote directory"),
    ("quit", "end the session"),
    ("rename", "rename old new: rename a remote file (never over another)"),
    ("rm", "rm path...: remove remote files (globs)"),
    ("rmdir", "rmdir path: remove an empty remote directory"),
    ("version", "version: soku's version and the session's protocol"),
    ("!", "!command: run a local shell command; ! alone: a local shell"),
];

/// The command on `line`; `None` for a blank line or a comment.
pub fn parse(line: &str) -> Result<Option<Command>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    if let Some(rest) = line.strip_prefix('!') {
        return Ok(Some(Command::Shell(rest.trim().to_string())));
    }
    let words = shlex::split(line).ok_or("unbalanced quotes or a trailing backslash")?;
    let Some((name, rest)) = words.split_first() else { return Ok(None) };
    let (flags, args) = split_flags(rest);
    let name = name.as_str();
    let allow = |allowed: &str| -> Result<(), String> {
        match flags.chars().find(|c| !allowed.contains(*c)) {
            Some(c) => Err(format!("{name}: unknown flag -{c} (see help)")),
            None => Ok(()),
        }
    };
    let at_most = |n: usize| -> Result<(), String> {
        if args.len() > n {
            Err(format!("{name}: too many arguments (see help)"))
        } else {
            Ok(())
        }
    };
    let one = |what: &str| -> Result<String, String> {
        match args {
            [one] => Ok(one.clone()),
            [] => Err(format!("{name}: name the {what}")),
            _ => Err(format!("{name}: takes one {what}")),
        }
    };
    let command = match name {
        "ls" | "dir" => {
            allow("1alnrSt")?;
            at_most(1)?;
            let has = |c| flags.contains(c);
            let flags = LsFlags {
                long: has('l') || has('n'),
                all: has('a'),
                single: has('1'),
                numeric: has('n'),
                by_time: has('t'),
                by_size: has('S'),
                reverse: has('r'),
            };
            Command::Ls { flags, path: args.first().cloned() }
        }
        "cd" | "chdir" => {
            allow("")?;
            at_most(1)?;
            Command::Cd(args.first().cloned())
        }
        "lcd" | "lchdir" => {
            allow("")?;
            at_most(1)?;
            Command::Lcd(args.first().cloned())
        }
        "pwd" => Command::Pwd,
        "lpwd" => Command::Lpwd,
        "lls" | "ldir" => {
            let mut all: Vec<String> = flags.chars().map(|c| format!("-{c}")).collect();
            all.extend(args.iter().cloned());
            Command::Lls(all)
        }
        "get" | "mget" | "put" | "mput" => {
            // -a (resume) and -f (fsync) are what every soku copy does already.
            allow("rRpPaf")?;
            let multi = name.starts_with('m');
            if args.is_empty() {
                return Err(format!(
                    "{name}: name what to {}",
                    if name.contains("get") { "download" } else { "upload" }
                ));
            }
            let (sources, target) = match (multi, args) {
                (true, args) => (args.to_vec(), None),
                (false, [source]) => (vec![source.clone()], None),
                (false, [source, target]) => (vec![source.clone()], Some(target.clone())),
                (false, _) => {
                    return Err(format!(
                        "{name}: takes one path and where to; m{name} takes several"
                    ))
                }
            };
            let transfer = Transfer {
                recursive: flags.contains(['r', 'R']),
                preserve: flags.contains(['p', 'P']),
                sources,
                target,
            };
            if name.contains("get") {
                Command::Get(transfer)
            } else {
                Command::Put(transfer)
            }
        }
        "mkdir" => {
            allow("")?;
            Command::Mkdir(one("directory")?)
        }
        "lmkdir" => {
            allow("")?;
            Command::Lmkdir(one("directory")?)
        }
        "rmdir" => {
            allow("")?;
            Command::Rmdir(one("directory")?)
        }
        "rm" => {
            allow("")?;
            if args.is_empty() {
                return Err("rm: name what to remove".into());
            }
            Command::Rm(args.to_vec())
        }
        "rename" => {
            allow("")?;
            match args {
                [from, to] => Command::Rename(from.clone(), to.clone()),
                _ => return Err("rename: takes the old path and the new one".into()),
            }
        }
        "chmod" => {
            allow("")?;
            let [mode, paths @ ..] = args else {
                return Err("chmod: takes a mode and paths".into());
            };
            let mode = u32::from_str_radix(mode, 8)
                .ok()
                .filter(|m| *m <= 0o7777)
                .ok_or_else(|| format!("chmod: {mode}: not an octal mode (such as 644)"))?;
            if paths.is_empty() {
                return Err("chmod: name what to change".into());
            }
            Command::Chmod { mode, paths: paths.to_vec() }
        }
        "df" => {
            allow("hi")?;
            at_most(1)?;
            Command::Df {
                human: flags.contains('h'),
                inodes: flags.contains('i'),
                path: args.first().cloned(),
            }
        }
        "help" | "?" => Command::Help,
        "version" => Command::Version,
        "bye" | "exit" | "quit" => Command::Quit,
        other => return Err(format!("{other}: no such command (help lists them)")),
    };
    Ok(Some(command))
}

/// The flags before the first path (`-rp` and `-r -p` alike), and the rest; `--` ends
/// the flags, and `-` alone is a path.
fn split_flags(words: &[String]) -> (String, &[String]) {
    let mut flags = String::new();
    for (i, word) in words.iter().enumerate() {
        if word == "--" {
            return (flags, &words[i + 1..]);
        }
        match word.strip_prefix('-') {
            Some(letters) if !letters.is_empty() => flags.push_str(letters),
            _ => return (flags, &words[i..]),
        }
    }
    (flags, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(line: &str) -> Command {
        parse(line).expect("parses").expect("a command")
    }

    #[test]
    fn sftps_everyday_commands_read_as_sftp_reads_them() {
        assert_eq!(parse("  # a comment").unwrap(), None);
        assert_eq!(parse("").unwrap(), None);
        let Command::Ls { flags, path } = parsed("ls -la 'my dir'") else { panic!() };
        assert!(flags.long && flags.all && !flags.single);
        assert_eq!(path.as_deref(), Some("my dir"));
        assert_eq!(
            parsed("get -r -p results/run\\ 7 here"),
            Command::Get(Transfer {
                recursive: true,
                preserve: true,
                sources: vec!["results/run 7".into()],
                target: Some("here".into()),
            })
        );
        let Command::Put(put) = parsed("mput a b c") else { panic!() };
        assert_eq!((put.sources.len(), put.target), (3, None));
        assert_eq!(
            parsed("chmod 640 a b"),
            Command::Chmod { mode: 0o640, paths: vec!["a".into(), "b".into()] }
        );
        assert_eq!(parsed("!ls -l"), Command::Shell("ls -l".into()));
        assert_eq!(parsed("rm -- -x"), Command::Rm(vec!["-x".into()]));
        assert_eq!(parsed("bye"), Command::Quit);
    }

    #[test]
    fn mistakes_are_named() {
        for (line, says) in [
            ("frob", "no such command"),
            ("ls -z", "unknown flag -z"),
            ("get a b c", "mget takes several"),
            ("chmod 9 x", "not an octal mode"),
            ("rename a", "old path and the new one"),
            ("cd 'open", "unbalanced quotes"),
            ("rmdir", "name the directory"),
        ] {
            let err = parse(line).expect_err(line);
            assert!(err.contains(says), "{line}: {err}");
        }
    }
}
