//! Parsing `[user@]host:path`, `[user@][v6addr]:path` and local paths, with scp's rules:
//! a colon before the first slash makes a remote path; `./a:b` and `/a:b` stay local.
//! On Windows a drive (`C:\data`, `d:/x`, `C:`) and a path that starts with a
//! backslash (`\\server\share`, `.\a:b`) are local too, as Windows' own scp has
//! them: a one-letter host is then written `user@c:path` or by its full name.
//!
//! An argument is bytes, as Unix names are: a local path or a remote path need not be
//! UTF-8 (the remote one travels as bytes, `soku_proto::name`); a user or host name must
//! be.

use std::ffi::OsStr;
use std::path::PathBuf;

use soku_proto::name::{shown, Name};

/// Where one source or the target lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local path.
    Local(PathBuf),
    /// A path on a remote host.
    Remote(Remote),
}

/// A remote path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// The user, if given (`user@`).
    pub user: Option<String>,
    /// The host as typed, without brackets.
    pub host: String,
    /// The path on the remote host; empty means the remote home directory.
    pub path: Name,
}

impl Remote {
    /// The destination for ssh: `user@host` or `host`.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(user) => format!("{user}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

/// Parses one command-line path.
pub fn parse(arg: &OsStr) -> Result<Location, String> {
    let local = || Ok(Location::Local(PathBuf::from(arg)));
    let Some(bytes) = Name::from_os(arg) else { return local() };
    let bytes = bytes.as_bytes();
    let arg = shown(arg);
    if bytes.is_empty() {
        return Err("empty path: name a file, `host:path` or `user@host:path`".into());
    }
    if bytes.starts_with(b"/") || bytes.starts_with(b"./") || bytes.starts_with(b"../") {
        return local();
    }
    if cfg!(windows) && is_windows_local(bytes) {
        return local();
    }
    let (user, rest) = split_user(bytes);
    if let Some(bracketed) = rest.strip_prefix(b"[") {
        // The address ends at `]:`; a slash before it makes a local path (the rule above).
        let end = find(bracketed, b"]:").unwrap_or(bracketed.len());
        if bracketed[..end].contains(&b'/') {
            return local();
        }
        let Some(close) = bracketed.iter().position(|&b| b == b']') else {
            return Err(format!("{arg}: missing `]` after an IPv6 address"));
        };
        let (host, after) = (&bracketed[..close], &bracketed[close + 1..]);
        let Some(path) = after.strip_prefix(b":") else {
            let host = soku_proto::name::shown_bytes(host);
            return Err(format!("{arg}: expected `:` after `[{host}]`"));
        };
        return remote(user, host, path, &arg);
    }
    match rest.iter().position(|&b| b == b':' || b == b'/') {
        Some(i) if rest[i] == b':' => remote(user, &rest[..i], &rest[i + 1..], &arg),
        _ => local(),
    }
}

/// A drive (`C:`, `C:\x`, `C:/x`) or a path that starts with a backslash (`\x`,
/// `\\server\share`, `.\x`, `..\x`): local on Windows.
fn is_windows_local(bytes: &[u8]) -> bool {
    let drive = match bytes {
        [letter, b':'] | [letter, b':', b'\\' | b'/', ..] => letter.is_ascii_alphabetic(),
        _ => false,
    };
    drive || bytes.starts_with(b"\\") || bytes.starts_with(b".\\") || bytes.starts_with(b"..\\")
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn split_user(arg: &[u8]) -> (Option<&[u8]>, &[u8]) {
    // The user ends at the last `@` before the host's colon (user names may hold `@`).
    let host_end = arg.iter().position(|&b| b == b':').unwrap_or(arg.len());
    match arg[..host_end].iter().rposition(|&b| b == b'@') {
        Some(at) if !arg[..at].contains(&b'/') => (Some(&arg[..at]), &arg[at + 1..]),
        _ => (None, arg),
    }
}

fn remote(user: Option<&[u8]>, host: &[u8], path: &[u8], arg: &str) -> Result<Location, String> {
    let text = |part: &[u8], what: &str| {
        String::from_utf8(part.to_vec())
            .map_err(|_| format!("{arg}: the {what} is not valid UTF-8"))
    };
    let host = text(host, "host name")?;
    let user = user.map(|u| text(u, "user name")).transpose()?;
    if host.is_empty() {
        return Err(format!("{arg}: empty host name before `:`"));
    }
    if host.starts_with('-') {
        return Err(format!("{arg}: host name may not start with `-`"));
    }
    if user.as_deref().is_some_and(str::is_empty) {
        return Err(format!("{arg}: empty user name before `@`"));
    }
    Ok(Location::Remote(Remote { user, host, path: Name::from_bytes(path) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: a Windows drive or backslash path taken for a remote host `C`.
    #[test]
    fn windows_drives_and_backslash_paths_are_local_there() {
        for local in ["C:", "C:\\data\\x.bin", "d:/x", "\\\\server\\share\\f", ".\\a:b", "..\\a:b"]
        {
            assert!(is_windows_local(local.as_bytes()), "{local}");
        }
        for remote in ["C:x", "host:C:\\x", "ab:\\x", "1:\\x", "c:", "user@c:/x"] {
            let expect = remote == "c:";
            assert_eq!(is_windows_local(remote.as_bytes()), expect, "{remote}");
        }
    }

    fn r(user: Option<&str>, host: &str, path: &str) -> Location {
        Location::Remote(Remote {
            user: user.map(str::to_string),
            host: host.into(),
            path: path.into(),
        })
    }

    #[test]
    fn scp_forms() {
        let parse = |arg: &str| parse(arg.as_ref());
        assert_eq!(parse("host:file").expect("ok"), r(None, "host", "file"));
        assert_eq!(parse("me@host:/abs").expect("ok"), r(Some("me"), "host", "/abs"));
        assert_eq!(parse("host:").expect("ok"), r(None, "host", ""));
        assert_eq!(parse("[::1]:x y").expect("ok"), r(None, "::1", "x y"));
        assert_eq!(parse("u@[fe80::1]:p").expect("ok"), r(Some("u"), "fe80::1", "p"));
        assert_eq!(parse("a@b@host:p").expect("ok"), r(Some("a@b"), "host", "p"));
    }

    #[test]
    fn local_forms() {
        for local in ["file", "dir/a:b", "./a:b", "/abs:x", "ünï code", "../x:y", "[a/b]:c", "[/"]
        {
            assert_eq!(
                parse(local.as_ref()).expect("ok"),
                Location::Local(local.into()),
                "{local}"
            );
        }
    }

    #[test]
    fn bad_forms() {
        for bad in ["", ":path", "[::1", "[::1]x", "-oProxyCommand=x:y", "@host:p"] {
            assert!(parse(bad.as_ref()).is_err(), "{bad}");
        }
    }

    /// Catches: a path that is not UTF-8 refused, changed, or taken for a remote one
    /// by its bytes, and a host name that is not UTF-8 passed on to ssh.
    #[test]
    #[cfg(unix)]
    fn paths_that_are_not_utf8_are_kept_as_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let os = |b: &'static [u8]| OsStr::from_bytes(b);
        assert_eq!(parse(os(b"caf\xe9.txt")), Ok(Location::Local(os(b"caf\xe9.txt").into())));
        assert_eq!(parse(os(b"d\xff/x:y")), Ok(Location::Local(os(b"d\xff/x:y").into())));
        let remote = parse(os(b"u@h:d\xff/caf\xe9.txt")).expect("remote");
        let Location::Remote(remote) = remote else { panic!("{remote:?}") };
        assert_eq!(remote.path.as_bytes(), b"d\xff/caf\xe9.txt");
        assert_eq!((remote.user.as_deref(), remote.host.as_str()), (Some("u"), "h"));
        let err = parse(os(b"h\xe9:x")).expect_err("host");
        assert_eq!(err, "h\\xe9:x: the host name is not valid UTF-8");
    }

    mod props {
        //! Properties of [`parse`]; proptest keeps the seeds of failures it finds in
        //! `crates/soku/proptest-regressions/spec.txt` (worth committing).

        use proptest::prelude::*;

        use super::*;

        /// `[user@]host:path` or `[user@][host]:path`, as a user would type it.
        fn format(user: Option<&str>, host: &str, path: &str, bracketed: bool) -> String {
            let user = user.map(|u| format!("{u}@")).unwrap_or_default();
            if bracketed {
                format!("{user}[{host}]:{path}")
            } else {
                format!("{user}{host}:{path}")
            }
        }

        /// User names: no `:` (it ends the host) and no `/` (it makes the argument a local
        /// path); an `@` is allowed, the last one ends the user.
        fn user() -> impl Strategy<Value = String> {
            prop_oneof!["[a-z_][a-z0-9_.-]{0,11}", "[^:/]{1,12}", "[a-z@.]{1,6}"]
        }

        /// Host names and addresses outside brackets: not empty, no `-` first (it would
        /// reach ssh as an option), no `:`, `/`, `@` or a leading `[`.
        fn host() -> impl Strategy<Value = String> {
            prop_oneof![
                "[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?",
                "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
                "[^-:/@\\[][^:/@]{0,12}",
            ]
        }

        /// IPv6 addresses as written in brackets, with an optional zone.
        fn v6() -> impl Strategy<Value = String> {
            prop_oneof![
                "[0-9a-fA-F]{0,4}(:[0-9a-fA-F]{0,4}){2,7}(%[a-z0-9]{1,8})?",
                "::(ffff:)?[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
                Just("::1".to_string()),
            ]
        }

        /// Remote paths: anything, `:`, `/`, `@`, brackets and spaces included.
        fn path() -> impl Strategy<Value = String> {
            prop_oneof![any::<String>(), "[a-z:/@\\[\\] .~]{0,12}"]
        }

        /// Strings built from the characters the parser looks at, plus a two-byte one
        /// (slicing off a char boundary would panic).
        fn tricky() -> impl Strategy<Value = String> {
            "[\\[\\]@:/.a~é-]{0,14}"
        }

        proptest! {
            /// Catches: a colon after the first slash taken as the end of a host name
            /// (scp's rule, see the module's doc), including inside brackets (`[a/b]:c`,
            /// `[::1]/x:y`) and after a user name (`u@h/x:y`).
            #[test]
            fn a_slash_before_any_colon_stays_local(
                head in prop_oneof!["[^:/]{0,10}", "[\\[\\]@a.-]{0,6}"],
                tail in prop_oneof![any::<String>(), tricky()],
            ) {
                let arg = format!("{head}/{tail}");
                prop_assert_eq!(parse(arg.as_ref()), Ok(Location::Local(arg.clone().into())));
            }

            /// Catches: a user, host or path cut at the wrong `@`, `:` or `]` (a user
            /// holding `@`, a path holding `:`, `@` or `]`), brackets kept in the host.
            #[test]
            fn user_host_path_round_trips(
                user in prop::option::of(user()),
                host in host(),
                path in path(),
            ) {
                let arg = format(user.as_deref(), &host, &path, false);
                prop_assert_eq!(
                    parse(arg.as_ref()),
                    Ok(Location::Remote(Remote { user, host, path: path.into() })),
                    "{}", arg
                );
            }

            /// Catches: an IPv6 address cut at one of its own colons, a user found inside
            /// the address, a zone (`%eth0`) or a path with `]` mishandled.
            #[test]
            fn bracketed_v6_round_trips(
                user in prop::option::of(user()),
                host in prop_oneof![
                    v6(),
                    host().prop_filter("no `]` in brackets", |h| !h.contains(']')),
                ],
                path in path(),
            ) {
                let arg = format(user.as_deref(), &host, &path, true);
                prop_assert_eq!(
                    parse(arg.as_ref()),
                    Ok(Location::Remote(Remote { user, host, path: path.into() })),
                    "{}", arg
                );
            }

            /// Catches: `./x:y`, `../x:y` or `/x:y` taken for host `.`, `..` or `/x`.
            #[test]
            fn explicit_local_paths_stay_local(
                lead in prop::sample::select(vec!["./", "../", "/"]),
                x in prop_oneof![any::<String>(), tricky()],
                y in prop_oneof![any::<String>(), tricky()],
            ) {
                let arg = format!("{lead}{x}:{y}");
                prop_assert_eq!(parse(arg.as_ref()), Ok(Location::Local(arg.clone().into())));
            }

            /// Catches: a panic on any input (slicing off a char boundary, indexing past
            /// the end), a local path that is not the argument itself, and a remote with
            /// an empty host, a host ssh would read as an option, or an empty user.
            #[test]
            fn parse_never_panics(arg in prop_oneof![any::<String>(), tricky()]) {
                match parse(arg.as_ref()) {
                    Ok(Location::Local(local)) => prop_assert_eq!(local, PathBuf::from(arg)),
                    Ok(Location::Remote(remote)) => {
                        prop_assert!(!remote.host.is_empty(), "{:?}", remote);
                        prop_assert!(!remote.host.starts_with('-'), "{:?}", remote);
                        let user_ok = remote.user.as_ref().is_none_or(|u| !u.is_empty());
                        prop_assert!(user_ok, "{:?}", remote);
                    }
                    Err(_) => {}
                }
            }
        }
    }
}
