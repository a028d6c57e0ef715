//! Network namespaces: creating and deleting them with `ip netns`, running code and
//! commands inside them.

use std::path::Path as FsPath;
use std::process::{Command, Stdio};

use crate::error::{NetemError, Result};
use crate::sys;

/// Where `ip netns` binds named namespaces.
pub const NETNS_DIR: &str = "/var/run/netns";

/// Checks that `name` is acceptable to `ip netns` (a plain file name).
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && name != "."
        && name != "..";
    if ok {
        Ok(())
    } else {
        Err(NetemError::InvalidName(name.to_string()))
    }
}

/// True if a namespace called `name` exists.
pub fn exists(name: &str) -> bool {
    FsPath::new(NETNS_DIR).join(name).exists()
}

/// Runs `ip ARGS...`, turning a failure into [`NetemError::Command`].
pub(crate) fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(NetemError::io("running ip (is iproute2 installed?)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetemError::Command {
            cmd: format!("ip {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Creates the namespace `name`; fails if it already exists.
pub fn create(name: &str) -> Result<()> {
    check_name(name)?;
    if exists(name) {
        return Err(NetemError::NamespaceExists(name.to_string()));
    }
    ip(&["netns", "add", name])
}

/// Deletes the namespace `name`; a missing namespace is not an error.
pub fn delete(name: &str) -> Result<()> {
    check_name(name)?;
    if !exists(name) {
        return Ok(());
    }
    ip(&["netns", "del", name])
}

/// Runs `f` on a helper thread that has entered namespace `ns`, and returns its result.
///
/// Sockets and TUN devices created inside `f` belong to `ns` for their whole life, even
/// when used from other threads afterwards: this is how tests open sockets "in A".
pub fn in_ns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> Result<T> {
    check_name(ns)?;
    let path = format!("{NETNS_DIR}/{ns}");
    std::thread::scope(|s| {
        s.spawn(move || {
            sys::setns_net(&path).map_err(NetemError::io("entering namespace"))?;
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| {
            Err(NetemError::Io {
                what: "namespace helper thread panicked",
                source: std::io::Error::other("panic"),
            })
        })
    })
}

/// A `Command` that runs `program` inside namespace `ns` (via `ip netns exec`); add
/// arguments and spawn it as usual.
pub fn command_in(ns: &str, program: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, program]);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_name("soku-1234-a").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("../etc").is_err());
        assert!(check_name("a b").is_err());
        assert!(check_name("..").is_err());
    }
}
