//! scp's options as scripts pass them: the ones that change nothing in soku, an ssh
//! cipher for `-c`, and an option soku does not know.

use std::process::Stdio;

use crate::common::{assert_same_file, data, error_lines, fails_with, write, Env};

fn upload(env: &Env, extra: &[&str]) -> std::process::Command {
    let source = env.src().join("a.bin");
    write(&source, &data(200_000, 5));
    let mut cmd = env.soku();
    cmd.arg("--no-share-login").args(extra).stdin(Stdio::null());
    cmd.arg(&source).arg(env.remote(&env.dst()));
    cmd
}

/// `-O -s -T -D PATH -X OPTION` are taken as scp takes them, and the copy runs.
#[test]
fn scps_options_that_change_nothing_are_taken() {
    let env = Env::new();
    let extra = ["-O", "-s", "-T", "-D", "/usr/lib/openssh/sftp-server", "-X", "nrequests=4"];
    let mut cmd = upload(&env, &extra);
    env.ok(&mut cmd);
    assert_same_file(&env.src().join("a.bin"), &env.dst().join("a.bin"));
}

/// `-c aes128-ctr` (an ssh cipher, as scripts keep it) goes to ssh for the login, `-v`
/// says so, and ssh's own log shows the cipher in use.
#[test]
fn an_ssh_cipher_goes_to_ssh_for_the_login() {
    let env = Env::new();
    let mut cmd = upload(&env, &["-v", "-c", "aes128-ctr"]);
    let out = env.ok(&mut cmd);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("-c aes128-ctr: ssh logs in with it"), "{said}");
    assert!(said.contains("cipher: aes128-ctr"), "ssh did not use it:\n{said}");
    assert_same_file(&env.src().join("a.bin"), &env.dst().join("a.bin"));
}

/// An option soku does not know: one line naming it, no tip to put it after `--`.
#[test]
fn an_unknown_option_is_one_line_that_names_it() {
    let env = Env::new();
    let mut cmd = upload(&env, &["-Z"]);
    let stderr = fails_with(&mut cmd, 2, &["unknown option -Z", "soku --help"]);
    assert_eq!(error_lines(&stderr).len(), 1, "one error line\n{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!stderr.contains("'-- -Z'"), "{stderr}");
    let mut cmd = upload(&env, &["-c", "rot13"]);
    fails_with(&mut cmd, 2, &["unknown cipher", "aes128-ctr"]);
}
