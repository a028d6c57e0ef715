//! The config files through a real sshd: a host section changes how a copy runs, the
//! command line wins over it, `soku config` says where each value came from, a broken
//! file stops the copy with its file, line and key, and a file named `config` is still
//! copied like any other.

use std::path::Path;
use std::process::Command;

use crate::common::{self, data, fails_with, write, Env};

/// `XDG_CONFIG_HOME/soku/config.toml` in this test's temp dir, holding `text`.
fn config(env: &Env, text: &str) -> std::path::PathBuf {
    let dir = env.path("xdg");
    std::fs::create_dir_all(dir.join("soku")).expect("mkdir");
    std::fs::write(dir.join("soku/config.toml"), text).expect("write config");
    dir
}

/// The transport the `connected` JSON event names.
fn transport(stderr: &[u8]) -> String {
    let stderr = String::from_utf8_lossy(stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains(r#""event":"connected""#))
        .unwrap_or_else(|| panic!("no connected event:\n{stderr}"));
    let v: serde_json::Value = serde_json::from_str(line).expect("json");
    v["transport"].as_str().expect("transport").to_string()
}

fn upload(env: &Env, xdg: &Path, name: &str, extra: &[&str]) -> Vec<u8> {
    let src = env.src().join(name);
    write(&src, &data(300_000, 7));
    let mut cmd = env.soku();
    cmd.env("XDG_CONFIG_HOME", xdg).arg("--json").args(extra);
    cmd.arg(&src).arg(env.remote(&env.dst()));
    let out = env.ok(&mut cmd);
    assert_eq!(std::fs::read(env.dst().join(name)).expect("copied"), data(300_000, 7));
    out.stderr
}

#[test]
fn a_host_section_sets_the_transport_and_the_command_line_wins() {
    let env = Env::new();
    let host = env.sshd.host();
    let xdg = config(
        &env,
        &format!("retry-for = 0\n\n[host.\"nomatch.example\"]\ntransport = \"tcp\"\n\n[host.\"{host} other\"]\ntransport = \"ssh\"\n"),
    );

    let from_file = transport(&upload(&env, &xdg, "a.bin", &[]));
    assert_eq!(from_file, "the ssh channel", "the matching section chose the ssh channel");

    let from_cli = transport(&upload(&env, &xdg, "b.bin", &["--transport", "quic"]));
    assert!(from_cli.starts_with("QUIC"), "the command line wins: {from_cli}");

    let out = Command::new(common::soku_bin())
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["config", &format!("someone@{host}")])
        .output()
        .expect("soku config");
    assert!(out.status.success());
    let listing = String::from_utf8_lossy(&out.stdout);
    let file = xdg.join("soku/config.toml");
    let row = |key: &str| {
        listing
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .find(|l| l.starts_with(&format!("{key} ")))
            .unwrap_or_else(|| panic!("no {key} row:\n{listing}"))
    };
    assert_eq!(
        row("transport"),
        format!("transport ssh {}:7 [host.\"{host} other\"]", file.display()),
        "{listing}"
    );
    assert_eq!(row("retry-for"), format!("retry-for 0 s {}:1", file.display()));
    assert_eq!(row("compress"), "compress no default");
}

#[test]
fn a_broken_config_file_stops_the_copy_and_names_file_line_and_key() {
    let env = Env::new();
    let xdg = config(&env, "compress = true\n[host.\"*\"]\ntransport = \"udp\"\n");
    let src = env.src().join("a.bin");
    write(&src, &data(1000, 1));
    let mut cmd = env.soku();
    cmd.env("XDG_CONFIG_HOME", &xdg).arg(&src).arg(env.remote(&env.dst()));
    let file = xdg.join("soku/config.toml");
    let stderr =
        fails_with(&mut cmd, 2, &[&format!("{}:3: transport: unknown transport", file.display())]);
    assert_eq!(common::error_lines(&stderr).len(), 1, "one line:\n{stderr}");
    assert!(!env.dst().join("a.bin").exists(), "nothing copied");

    let out = Command::new(common::soku_bin())
        .env("XDG_CONFIG_HOME", &xdg)
        .arg("config")
        .output()
        .expect("soku config");
    assert_eq!(out.status.code(), Some(2), "`soku config` refuses the file too");
}

#[test]
fn a_file_named_config_is_copied_like_any_other() {
    let env = Env::new();
    let xdg = config(&env, "");
    write(&env.src().join("config"), b"Host *\n");
    // scp's order, the source first where a subcommand would stand; options may follow.
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", "120"]).arg(common::soku_bin());
    cmd.arg("config").arg(env.remote(&env.dst()));
    cmd.args(env.sshd.scp_port_args()).args(env.sshd.ssh_args());
    cmd.arg("--remote-soku").arg(common::soku_bin());
    cmd.current_dir(env.src())
        .env("XDG_CONFIG_HOME", &xdg)
        .env("XDG_CACHE_HOME", env.path("cache"));
    env.ok(&mut cmd);
    assert_eq!(std::fs::read(env.dst().join("config")).expect("copied"), b"Host *\n");
}
