//! Which soku the remote end runs. `ssh host cmd` runs `cmd` with sshd's default PATH
//! (`/usr/local/bin:/usr/bin:/bin:/usr/games` on Debian), which holds none of the places
//! a user without root installs a program: so unless the user names one
//! (`--remote-soku`), the remote shell looks on PATH and then in those places
//! ([`FIND_SOKU`]). A named soku keeps a leading `~` unquoted, so that the remote shell
//! expands it as it would in a command typed there.

use super::shell::shell_quote;

/// Where a user installs soku without root, looked in after PATH, as the error says
/// them.
pub const USER_PLACES: &str = "~/.local/bin, ~/.cargo/bin or ~/bin";

/// A POSIX sh script that runs the first soku it finds, with its arguments: on PATH,
/// in [`USER_PLACES`], or one soku deployed there for this version (`deploy.rs`) whose
/// SHA-256 still matches the one recorded beside it. A deployed soku marked `first`
/// runs before all of them: it was sent because the one found first speaks no protocol
/// version in common with this client, and that one stays where the user put it. With
/// none it says the remote's system and machine (`soku-deploy OS ARCH`, on stdout,
/// where the client reads the server's hello) and exits 127, as a shell does for a
/// command it cannot find. Run as `sh -c FIND_SOKU VERSION serve ...`. One line
/// without `!`, so that csh, fish and the other login shells that hand it to `sh` pass
/// it through single quotes unchanged.
pub const FIND_SOKU: &str = "c=\"$HOME/.cache/soku/bin/$0\"; \
     ok() { [ -x \"$1\" ] && [ \"$(sha256sum < \"$1\")\" = \"$(cat \"$1.sha256\" 2>/dev/null)\" ]; }; \
     for p in \"$c\"-*/soku; do [ -f \"$p.first\" ] && ok \"$p\" && exec \"$p\" \"$@\"; done; \
     command -v soku >/dev/null 2>&1 && exec soku \"$@\"; \
     for p in \"$HOME/.local/bin/soku\" \"$HOME/.cargo/bin/soku\" \"$HOME/bin/soku\"; \
     do [ -x \"$p\" ] && exec \"$p\" \"$@\"; done; \
     for p in \"$c\"-*/soku; do ok \"$p\" && exec \"$p\" \"$@\"; done; \
     echo \"soku-deploy $(uname -s) $(uname -m)\"; exit 127";

/// Asks the remote's system and machine, in the line [`FIND_SOKU`] ends with.
pub const SAY_PLATFORM: &str = "echo \"soku-deploy $(uname -s) $(uname -m)\"";

/// The first word of the line [`FIND_SOKU`] prints when it finds no soku.
pub const DEPLOY_MARK: &str = "soku-deploy";

/// The remote command line that runs `soku` with `args` (already quoted): the named
/// `program`, or the first soku [`FIND_SOKU`] finds.
pub fn command_line(program: Option<&str>, args: &str) -> String {
    match program {
        Some(program) => format!("{} {args}", quote_program(program)),
        None => {
            let version = env!("CARGO_PKG_VERSION");
            format!("sh -c {} {} {args}", shell_quote(FIND_SOKU), shell_quote(version))
        }
    }
}

/// Quotes a program path for the remote shell, leaving a leading `~` or `~user`
/// before the first `/` unquoted, so that the shell expands it.
fn quote_program(program: &str) -> String {
    let (head, rest) = program.split_at(program.find('/').unwrap_or(program.len()));
    let user = head.strip_prefix('~');
    // A login name (not `~-` or `~+`, which bash takes for directories).
    let plain_user = user.is_some_and(|user| {
        !user.starts_with(['-', '.'])
            && user.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    });
    match (plain_user, rest.is_empty()) {
        (true, true) => head.to_string(),
        // The first `/` unquoted too: a tilde-prefix ends at the first unquoted one,
        // and one holding a quoted character is not expanded (POSIX.1-2017, 2.6.1).
        (true, false) => format!("{head}/{}", shell_quote(&rest[1..])),
        (false, _) => shell_quote(program),
    }
}

// The lookup script runs under a Unix shell.
#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_leading_tilde_stays_for_the_shell_to_expand() {
        assert_eq!(quote_program("~/.local/bin/soku"), "~/.local/bin/soku");
        assert_eq!(quote_program("~/my apps/soku"), "~/'my apps/soku'");
        assert_eq!(quote_program("~alice/bin/soku"), "~alice/bin/soku");
        assert_eq!(quote_program("~"), "~");
        // Not a user name: quoted whole, as any other word.
        assert_eq!(quote_program("~a b/soku"), "'~a b/soku'");
        assert_eq!(quote_program("~-/soku"), "'~-/soku'");
        assert_eq!(quote_program("/opt/soku x/soku"), "'/opt/soku x/soku'");
        assert_eq!(quote_program("soku"), "soku");
    }

    /// The script runs the first soku it finds, with its arguments, and exits 127
    /// when there is none: run here by `sh` with a made-up HOME and PATH.
    #[test]
    fn the_script_finds_soku_after_path_in_the_user_places() {
        let home = tempfile::tempdir().expect("tempdir");
        let run = |path: &str| {
            std::process::Command::new("sh")
                .args(["-c", FIND_SOKU, "0.1.0", "serve", "--ports", "1-2"])
                .env("HOME", home.path())
                .env("PATH", path)
                .output()
                .expect("sh")
        };
        let none = run("/nonexistent:/usr/bin:/bin");
        assert_eq!(none.status.code(), Some(127), "{none:?}");
        let said = String::from_utf8_lossy(&none.stdout);
        assert!(said.starts_with("soku-deploy Linux "), "{said}");
        let bin = home.path().join(".cargo/bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        let fake = bin.join("soku");
        std::fs::write(&fake, "#!/bin/sh\necho \"cargo $*\"\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let found = run("/nonexistent:/usr/bin:/bin");
        assert_eq!(String::from_utf8_lossy(&found.stdout), "cargo serve --ports 1-2\n");
        // One on PATH comes first.
        let on_path = home.path().join("path");
        std::fs::create_dir_all(&on_path).expect("mkdir");
        let first = on_path.join("soku");
        std::fs::write(&first, "#!/bin/sh\necho \"path $*\"\n").expect("write");
        std::fs::set_permissions(&first, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let found = run(&format!("{}:/bin:/usr/bin", on_path.display()));
        assert_eq!(String::from_utf8_lossy(&found.stdout), "path serve --ports 1-2\n");
    }
}
