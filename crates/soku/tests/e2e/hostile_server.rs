//! A hostile server behind a real sshd: every text a server can send reaches the user's
//! terminal as visible text, never as control characters or a forged line of soku's
//! (the CVE-2019-6109 class).
//!
//! The remote "soku" (`--remote-soku`) is a script that prints hostile bytes on its
//! stderr and then hands its stdin and stdout to the test with `soku proxy`, which
//! relays them to a TCP listener of the test's. There the test plays the server with
//! soku-proto's own types and encoder, reading what the client sends, so a message
//! that is only taken at one point of the conversation (a report of held chunks, a
//! failure of an announced file) arrives at that point. `security.rs` replays hostile
//! streams without sshd for the protocol's own refusals.
//!
//! Every run asserts the same of soku's stderr and stdout: no control byte but the
//! newline ending each line, no C1 control or bidi override, no line beginning with the
//! text the hostile newline tried to start a line with, and the hostile text shown,
//! escaped, where the message is told.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use soku_proto::frame;
use soku_proto::hello::{ServerHello, ServerNote};
use soku_proto::manifest::{Entry, Meta};
use soku_proto::message::{Held, HeldBase, Message};
use soku_proto::path::WirePath;
use soku_proto::MAGIC;
use soku_testkit::describe;

use crate::common::{self, chmod, write, Env};

/// What the hostile server says wherever it may say something: a screen clear, a
/// cursor move, a newline followed by a line of soku's own, a carriage return, a
/// window-title sequence, a C1 CSI and a right-to-left override.
const HOSTILE: &str =
    "x\u{1b}[2J\u{1b}[HRED\nsoku: fake line\r\u{1b}]0;owned\u{7}\u{9b}31m\u{202e}txt";

/// [`HOSTILE`] as soku shows it.
const SHOWN: &str =
    "x\\033[2J\\033[HRED\\nsoku: fake line\\r\\033]0;owned\\007\\u{9b}31m\\u{202e}txt";

/// What the remote "shell" prints on stderr before the server speaks (a byte that is
/// not UTF-8 at the end).
const STDERR_PRINTF: &str = r"login: \033[2J\033]0;owned\007 \302\233 31m \342\200\256 \377\n";

/// The same as soku shows it.
const STDERR_SHOWN: &str = "login: \\033[2J\\033]0;owned\\007 \\u{9b} 31m \\u{202e} \\xff";

/// How long the test's server waits for the client at any step.
const PATIENCE: Duration = Duration::from_secs(30);

/// The test's end of the conversation.
struct Peer {
    stream: TcpStream,
    decoder: frame::Decoder,
}

impl Peer {
    fn send<T: serde::Serialize>(&mut self, msg: &T) {
        let bytes = frame::to_vec(msg).expect("encodes");
        self.stream.write_all(&bytes).expect("write to the client");
    }

    /// The next frame's payload from the client.
    fn payload(&mut self) -> Vec<u8> {
        let mut buf = [0u8; 65536];
        // Bounded: each read waits at most PATIENCE, and EOF ends the loop.
        loop {
            if let Some(payload) = self.decoder.next_payload().expect("a frame") {
                return payload;
            }
            let n = self.stream.read(&mut buf).expect("read from the client");
            assert!(n > 0, "the client closed before the frame the test waits for");
            self.decoder.feed(&buf[..n]);
        }
    }

    fn message(&mut self) -> Message {
        frame::decode_payload(&self.payload()).expect("a message")
    }

    /// Magic and hello with [`HOSTILE`] warnings and version; for an upload, the answer
    /// to its preview (something is held, so reports of held chunks are expected). Then
    /// the client's magic, hello, transport choice and request.
    fn handshake(&mut self, upload: bool) -> Message {
        let mut out = MAGIC.to_vec();
        frame::encode(
            &ServerHello::Ready {
                version: *soku_proto::PROTOCOL_VERSIONS.end(),
                udp_port: 0,
                server_addr: None,
                fingerprint: [0; 32],
                soku_version: HOSTILE.into(),
                warnings: vec![HOSTILE.into()],
                min_version: *soku_proto::PROTOCOL_VERSIONS.start(),
                tcp_port: 0,
                open_files: None,
            },
            &mut out,
        )
        .expect("encodes");
        if upload {
            frame::encode(&ServerNote::Holds { nothing: false }, &mut out).expect("encodes");
        }
        self.stream.write_all(&out).expect("write hello");
        let mut magic = vec![0u8; MAGIC.len()];
        self.stream.read_exact(&mut magic).expect("the client's magic");
        assert_eq!(magic, MAGIC);
        let _hello = self.payload();
        let _choice = self.payload();
        self.message()
    }

    /// Reads until the client closes, so that it ends on its own terms.
    fn until_closed(&mut self) {
        let mut buf = [0u8; 65536];
        while matches!(self.stream.read(&mut buf), Ok(n) if n > 0) {}
    }
}

fn meta() -> Meta {
    Meta { mode: 0o644, mtime: 1_000_000_000, ..Meta::default() }
}

fn file(id: u32, name: &str, size: u64) -> Message {
    Message::Entry(Entry::File { id, path: WirePath(vec![name.into()]), size, meta: meta() })
}

/// Runs soku (`args` after the options that reach the test's sshd) against a server
/// played by `play`; returns soku's output.
fn against(env: &Env, args: &[String], play: impl FnOnce(&mut Peer) + Send + 'static) -> Output {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let script = relay_to(env, addr.port());
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
        let mut peer = Peer { stream, decoder: frame::Decoder::new(frame::MAX_CONTROL_FRAME) };
        play(&mut peer);
    });
    // `diagnose` takes its options after the command's name.
    let mut cmd = match args.split_first() {
        Some((command, rest)) if command == "diagnose" => diagnose(env, &script, rest),
        _ => {
            let mut cmd = env.soku_without_remote_path();
            cmd.arg("--remote-soku").arg(&script);
            cmd.args(["--no-share-login", "--retry-for", "0", "--transport", "ssh"]);
            cmd.args(args);
            cmd
        }
    };
    let out = soku_testkit::cmd::output(&mut cmd);
    // A client that never reached the server leaves it waiting: a connection of ours
    // ends that wait, and the server's failure then shows why.
    let _ = TcpStream::connect(addr);
    let played = server.join();
    assert_ne!(out.status.code(), Some(common::TIMED_OUT), "soku hung\n{}", describe(&cmd, &out));
    common::assert_no_panic(&cmd, &out);
    assert!(played.is_ok(), "the test's server failed\n{}", describe(&cmd, &out));
    assert_nothing_acts_on_the_terminal(&cmd, &out);
    out
}

/// The remote "soku": prints [`STDERR_PRINTF`] on stderr, then relays to the test's
/// port on 127.0.0.1.
fn relay_to(env: &Env, port: u16) -> std::path::PathBuf {
    let script = env.path("hostile-soku");
    write(
        &script,
        format!(
            "#!/bin/sh\nprintf '{STDERR_PRINTF}' >&2\nexec {} proxy 127.0.0.1 {port}\n",
            common::soku_bin().display(),
        )
        .as_bytes(),
    );
    chmod(&script, 0o755);
    script
}

/// `soku diagnose` with the same options as a copy's.
fn diagnose(env: &Env, script: &Path, args: &[String]) -> Command {
    let mut cmd = common::bounded_soku(common::LIMIT_SECS);
    cmd.arg("diagnose");
    cmd.args(env.sshd.scp_port_args()).args(env.sshd.ssh_args());
    cmd.arg("--remote-soku").arg(script);
    cmd.args(args);
    cmd
}

/// No control byte but line ends, no C1 control or bidi override, no forged line.
fn assert_nothing_acts_on_the_terminal(cmd: &Command, out: &Output) {
    for (name, bytes) in [("stderr", &out.stderr), ("stdout", &out.stdout)] {
        let text = String::from_utf8(bytes.clone())
            .unwrap_or_else(|_| panic!("{name} is not UTF-8\n{}", describe(cmd, out)));
        let raw = text.chars().find(|&c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}')
        });
        assert!(raw.is_none(), "{name} holds {raw:?} raw\n{}", describe(cmd, out));
        let forged = text.lines().find(|l| l.starts_with("soku: fake line"));
        assert!(forged.is_none(), "{name} holds a forged line\n{}", describe(cmd, out));
    }
}

/// The remote shell's stderr came out, escaped, in one of `outs` at least. (Not in
/// each: a client that stops at once on a refusal may exit before the line that ssh
/// handed it is written.)
fn assert_remote_stderr_shown(outs: &[&Output]) {
    let shown = outs.iter().any(|out| String::from_utf8_lossy(&out.stderr).contains(STDERR_SHOWN));
    let all: Vec<_> = outs.iter().map(|out| String::from_utf8_lossy(&out.stderr)).collect();
    assert!(shown, "the remote's stderr is not shown: {all:#?}");
}

/// The lines of `out`'s stderr (or stdout) that show [`HOSTILE`], escaped.
fn shown(text: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(text).lines().filter(|l| l.contains(SHOWN)).map(String::from).collect()
}

fn remote(env: &Env, path: &str) -> String {
    format!("{}:{path}", env.sshd.host())
}

/// A download: the hello's warning, a source error, a name not asked for, a file
/// abort and a fatal error, each in a session of its own.
#[test]
fn a_download_shows_every_text_of_a_hostile_server_escaped() {
    let env = Env::new();
    let dst = format!("{}/", env.dst().display());
    let file_txt = remote(&env, "file.txt");

    // The source error names the path and says why: both hostile.
    let source_error = against(&env, &[file_txt.clone(), dst.clone()], |peer| {
        peer.handshake(false);
        peer.send(&Message::SourceError { path: HOSTILE.into(), message: HOSTILE.into() });
        peer.send(&Message::EndOfManifest { files: 0, bytes: 0 });
        peer.until_closed();
    });
    let lines = shown(&source_error.stderr);
    assert!(lines.iter().any(|l| l.starts_with("soku: warning: remote: ")), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("soku: remote: ")), "{lines:?}");

    // A name the user did not ask for is refused, and named (quoted, as Rust's `{:?}`
    // quotes it: escaped too).
    let out = against(&env, &[file_txt.clone(), dst.clone()], |peer| {
        peer.handshake(false);
        peer.send(&file(0, HOSTILE, 1));
        peer.until_closed();
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    let refusal = stderr.lines().find(|l| l.contains("does not match"));
    assert!(refusal.is_some_and(|l| l.contains("HRED\\nsoku: fake line")), "{stderr}");

    // The sender gives up on a file it announced.
    let out = against(&env, &[file_txt.clone(), dst.clone()], |peer| {
        peer.handshake(false);
        peer.send(&file(0, "file.txt", 5));
        peer.send(&Message::FileAborted { file: 0, message: HOSTILE.into() });
        peer.send(&Message::EndOfManifest { files: 1, bytes: 5 });
        peer.until_closed();
    });
    assert!(shown(&out.stderr).len() >= 2, "{}", String::from_utf8_lossy(&out.stderr));

    // The copy cannot go on: the last line is soku's, with the server's reason.
    let fatal = against(&env, &[file_txt, dst], |peer| {
        peer.handshake(false);
        peer.send(&Message::Fatal { message: HOSTILE.into() });
        peer.until_closed();
    });
    let stderr = String::from_utf8_lossy(&fatal.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("soku: ") && last.contains(SHOWN), "{stderr}");
    assert!(!fatal.status.success());
    assert_remote_stderr_shown(&[&source_error, &out, &fatal]);
}

/// An upload: the receiver's report that it restarted a partial file, its failure of
/// the file, and its fatal error, in one session.
#[test]
fn an_upload_shows_every_text_of_a_hostile_receiver_escaped() {
    let env = Env::new();
    let source = env.src().join("file.txt");
    write(&source, b"hello");
    let target = remote(&env, &format!("{}/", env.dst().display()));
    let out = against(&env, &[source.display().to_string(), target], |peer| {
        peer.handshake(true);
        // Answered once the file is announced, as a real receiver answers.
        loop {
            if let Message::Entry(Entry::File { id: 0, .. }) = peer.message() {
                break;
            }
        }
        let reason = HOSTILE.to_string();
        peer.send(&Message::Held(Held {
            file: 0,
            base: HeldBase::Restarted { reason },
            from: 0,
            to: 1,
            chunks: vec![],
        }));
        peer.send(&Message::FileFailed { file: 0, message: HOSTILE.into() });
        peer.send(&Message::Fatal { message: HOSTILE.into() });
        peer.until_closed();
    });
    let lines = shown(&out.stderr);
    assert!(lines.iter().any(|l| l.contains("copying it again from the start")), "{lines:?}");
    assert!(lines.len() >= 4, "warning, restart, failure, fatal: {lines:?}");
    assert!(!out.status.success());
    assert_remote_stderr_shown(&[&out]);
}

/// `soku diagnose`: the remote's facts (where it measured its disk, why it could not)
/// go to stdout, escaped.
#[test]
fn diagnose_shows_the_remote_facts_escaped() {
    let env = Env::new();
    let out = against(&env, &["diagnose".into(), env.sshd.host()], |peer| {
        peer.handshake(false);
        let disk = soku_proto::diagnose::DiskSpeed {
            path: HOSTILE.into(),
            bytes_per_sec: 0,
            bytes: 0,
            error: Some(HOSTILE.into()),
        };
        peer.send(&Message::DiagnoseFacts(soku_proto::diagnose::HostFacts {
            cores: 1,
            disk: Some(disk),
            ..Default::default()
        }));
        peer.until_closed();
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(shown(&out.stdout).len() >= 2, "{stdout}");
    assert_remote_stderr_shown(&[&out]);
}

/// The real `soku serve` with a remote file named to attack the terminal, which it
/// cannot read (a FIFO): the line that names it is one line, escaped.
#[test]
fn a_remote_name_that_attacks_the_terminal_is_shown_escaped() {
    let env = Env::new();
    let name = "x\u{1b}[2J\u{1b}[HRED\nsoku: fake line";
    let dir = env.src().join("tree");
    write(&dir.join("ok.txt"), b"fine");
    let fifo = dir.join(name);
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let mut cmd = env.soku();
    cmd.args(["--no-share-login", "-r"]).arg(env.remote(&dir)).arg(env.dst());
    let out = soku_testkit::cmd::output(&mut cmd);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&cmd, &out));
    common::assert_no_panic(&cmd, &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains('\u{1b}'), "{}", describe(&cmd, &out));
    assert!(stderr.lines().all(|l| !l.starts_with("soku: fake line")), "{stderr}");
    let line = stderr.lines().find(|l| l.contains("x\\033[2J\\033[HRED\\nsoku: fake line"));
    assert!(line.is_some_and(|l| l.starts_with("soku: remote: ")), "{stderr}");
    assert_eq!(std::fs::read(env.dst().join("tree/ok.txt")).expect("ok.txt"), b"fine");
}

/// Catches: an upload waiting for ever on a server that said hello and then neither
/// reads nor speaks, where a silent peer ends a download at the stall limit. Once while
/// the client waits for the answer to its preview, once with the copy running (64 MiB,
/// more than ssh, the pipes and the relay buffer, so the client's writes block too).
/// The limit is shortened with the hidden `--stall-timeout`.
#[test]
fn an_upload_to_a_peer_that_never_reads_nor_speaks_ends_at_the_stall_limit() {
    let env = Env::new();
    let source = env.src().join("big.bin");
    write(&source, &common::data(64 << 20, 3));
    for answers_preview in [false, true] {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let script = relay_to(&env, listener.local_addr().expect("addr").port());
        let (done, ended) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            let mut out = MAGIC.to_vec();
            let hello = ServerHello::Ready {
                version: *soku_proto::PROTOCOL_VERSIONS.end(),
                udp_port: 0,
                server_addr: None,
                fingerprint: [0; 32],
                soku_version: "silent".into(),
                warnings: vec![],
                min_version: *soku_proto::PROTOCOL_VERSIONS.start(),
                tcp_port: 0,
                open_files: None,
            };
            frame::encode(&hello, &mut out).expect("encodes");
            if answers_preview {
                frame::encode(&ServerNote::Holds { nothing: true }, &mut out).expect("encodes");
            }
            stream.write_all(&out).expect("hello");
            // Never reads, never speaks: holds the connection until soku has ended.
            let _ = ended.recv_timeout(PATIENCE * 4);
            drop(stream);
        });
        let mut cmd = env.soku_without_remote_path();
        cmd.arg("--remote-soku").arg(&script);
        cmd.args(["--no-share-login", "--retry-for", "0", "--transport", "ssh"]);
        cmd.args(["--stall-timeout", "3"]);
        cmd.arg(&source).arg(remote(&env, &format!("{}/", env.dst().display())));
        let began = std::time::Instant::now();
        let out = soku_testkit::cmd::output(&mut cmd);
        let took = began.elapsed();
        let _ = done.send(());
        server.join().expect("the test's server");
        let shown = describe(&cmd, &out);
        assert_ne!(out.status.code(), Some(common::TIMED_OUT), "soku hung\n{shown}");
        assert!(!out.status.success(), "{shown}");
        assert!(took < Duration::from_secs(60), "ended after {took:?}\n{shown}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("3 s"), "the line names the limit\n{shown}");
        common::assert_no_panic(&cmd, &out);
    }
}
