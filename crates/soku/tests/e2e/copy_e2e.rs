//! End-to-end copies with the built binary against a real sshd on loopback: both
//! directions, recursion, `-p`, several sources, sizes at chunk boundaries, the
//! ssh-channel fallback, `-C`, `-c` and `-l`. Every copy is checked byte for byte and
//! for leftover `.soku-part` files.

use crate::common::{
    self, assert_no_part_files, assert_same_file, assert_same_tree, chmod, data, mode, mtime,
    set_mtime, write, Env,
};

/// A mtime far in the past, with nanoseconds, so preserved and fresh times differ.
const OLD_SECS: u64 = 1_000_000_000;
const OLD_NSEC: u32 = 123_456_789;

#[test]
fn upload_one_file() {
    let env = Env::new();
    let src = env.src().join("one.bin");
    write(&src, &data(300 * 1024 + 7, 1));
    let out = env.ok(env.soku().arg("--json").arg(&src).arg(env.remote(&env.dst())));
    // The default data path is QUIC.
    let events = String::from_utf8_lossy(&out.stderr);
    assert!(events.contains(r#""event":"connected","transport":"QUIC"#), "{events}");
    // The path statistics come before the summary, with this side's sent packets.
    let path = events.lines().find(|l| l.contains(r#""event":"path""#)).expect("a path event");
    assert!(path.contains(r#""mtu":"#) && !path.contains(r#""sent_packets":0,"#), "{path}");
    // soku-cc's own estimates are there too; its loss floor only after four rounds of
    // 50 packets, which a 300 kB copy never has, a policer's rate only where one is,
    // and a shallow queue's figures (the loss shares by RTT class, the RTT range's top,
    // the loss bound) only once it has seen loss and a queue.
    assert!(path.contains(r#""model_min_rtt_ms":"#), "{path}");
    let mut estimates = path.to_string();
    for field in [
        "loss_floor_pct",
        "policed_mbit",
        "queue_top_loss_pct",
        "queue_below_loss_pct",
        "rtt_top_ms",
        "inflight_bound",
    ] {
        estimates = estimates.replace(&format!(r#""{field}":null"#), "");
    }
    assert!(!estimates.contains("null"), "{path}");
    assert_same_file(&src, &env.dst().join("one.bin"));
    assert_no_part_files(&env.dst());
}

/// The command returns once the copy is verified at the target, not when ssh has said
/// goodbye (a round trip later on a real path). Here the "ssh" (`-S`) lingers 30 s after
/// its session: the copy, its output captured to the end as a script would
/// (`Command::output` waits until every writer of the pipes is gone), still returns long
/// before that, even on a loaded machine, and the wrapper's late line never reaches the
/// caller.
#[test]
fn the_command_does_not_wait_for_ssh_to_say_goodbye() {
    let env = Env::new();
    let src = env.src().join("one.bin");
    write(&src, &data(100 * 1024, 3));
    let lingering = env.path("lingering-ssh");
    std::fs::write(&lingering, "#!/bin/sh\nssh \"$@\"\nsleep 30\necho ssh lingered >&2\n")
        .expect("write wrapper");
    chmod(&lingering, 0o755);
    let started = std::time::Instant::now();
    let out = env.ok(env
        .soku()
        .arg("--no-share-login")
        .arg("-S")
        .arg(&lingering)
        .arg(&src)
        .arg(env.remote(&env.dst())));
    let took = started.elapsed();
    assert_same_file(&src, &env.dst().join("one.bin"));
    assert!(took < std::time::Duration::from_secs(20), "waited for ssh's end: {took:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("ssh lingered"), "{stderr}");
}

/// A source rewritten in place while ssh logs in, after soku hashed it ahead and with its
/// modification time set back, is sent with its new bytes: its change time tells the
/// sender that the early hashes are stale (`transfer::ahead`). The ProxyCommand does the
/// rewrite one second into the login (the hashing of 3 MiB takes milliseconds), then
/// carries the ssh connection (`soku proxy`).
#[test]
fn a_source_rewritten_during_login_is_sent_as_it_is_now() {
    let env = Env::new();
    let src = env.src().join("changing.bin");
    write(&src, &data(3 * 1024 * 1024 + 5, 11));
    let stamp = env.path("stamp");
    let touch = |args: &[&std::path::Path]| {
        let status = std::process::Command::new("touch").arg("-r").args(args).status();
        assert!(status.expect("touch").success());
    };
    touch(&[&src, &stamp]);
    let proxy = format!(
        "sh -c 'sleep 1; printf rewritten | dd of={src} bs=1 seek=1500000 conv=notrunc \
         2>/dev/null; touch -r {stamp} {src}; exec {soku} proxy %h %p'",
        src = src.display(),
        stamp = stamp.display(),
        soku = common::soku_bin().display(),
    );
    env.ok(env
        .soku()
        .arg("-o")
        .arg(format!("ProxyCommand={proxy}"))
        .arg(&src)
        .arg(env.remote(&env.dst())));
    let now = std::fs::read(&src).expect("read source");
    assert_eq!(&now[1_500_000..1_500_009], b"rewritten", "the proxy rewrote the source");
    assert_eq!(mtime(&src), mtime(&stamp), "with its modification time set back");
    assert_same_file(&src, &env.dst().join("changing.bin"));
    assert_no_part_files(&env.dst());
}

/// A copy that runs for more than a second reports the path while it runs (`-l`
/// holds it at 16 Mbit/s: 4 MiB take about 2 s).
#[test]
fn a_longer_upload_reports_the_path_while_it_runs() {
    let env = Env::new();
    let src = env.src().join("slow.bin");
    write(&src, &data(1_500_000, 9));
    let out =
        env.ok(env.soku().args(["--json", "-l", "8000"]).arg(&src).arg(env.remote(&env.dst())));
    let events = String::from_utf8_lossy(&out.stderr);
    let samples: Vec<&str> =
        events.lines().filter(|l| l.contains(r#""event":"path_sample""#)).collect();
    assert!(!samples.is_empty(), "no path samples: {events}");
    assert!(
        samples.iter().all(|l| l.contains(r#""cwnd":"#) && l.contains(r#""phase":"#)),
        "{events}"
    );
    // Samples come before the final path report.
    let last_sample = events.rfind(r#""event":"path_sample""#).expect("a sample");
    let path = events.find(r#""event":"path","#).expect("a path event");
    assert!(last_sample < path, "{events}");
    assert_same_file(&src, &env.dst().join("slow.bin"));
}

#[test]
fn upload_one_file_to_a_new_name() {
    let env = Env::new();
    let src = env.src().join("one.bin");
    write(&src, &data(4096, 2));
    env.ok(env.soku().arg(&src).arg(env.remote(&env.dst().join("renamed.bin"))));
    assert_same_file(&src, &env.dst().join("renamed.bin"));
    assert_eq!(common::listing(&env.dst()), ["renamed.bin"]);
}

#[test]
fn download_one_file() {
    let env = Env::new();
    let src = env.src().join("down.bin");
    write(&src, &data(200 * 1024 + 3, 3));
    env.ok(env.soku().arg(env.remote(&src)).arg(env.dst()));
    assert_same_file(&src, &env.dst().join("down.bin"));
    assert_no_part_files(&env.dst());
}

/// Nested dirs, an empty dir, an empty file, a name with spaces and non-ASCII names.
fn make_tree(root: &std::path::Path) {
    write(&root.join("top.txt"), b"top level\n");
    write(&root.join("a/b/c/deep.bin"), &data(70 * 1024, 4));
    write(&root.join("a/sibling.bin"), &data(1024 * 1024 + 1, 5));
    write(&root.join("with space/file with space.txt"), b"spaces\n");
    write(&root.join("ünï 日本.txt"), "ünï 日本\n".as_bytes());
    write(&root.join("empty-file"), b"");
    std::fs::create_dir_all(root.join("empty-dir")).expect("mkdir");
    std::fs::create_dir_all(root.join("a/empty-inner")).expect("mkdir");
}

#[test]
fn recursive_tree_upload() {
    let env = Env::new();
    let tree = env.src().join("tree");
    make_tree(&tree);
    env.ok(env.soku().arg("-r").arg(&tree).arg(env.remote(&env.dst())));
    assert_same_tree(&tree, &env.dst().join("tree"));
    assert_no_part_files(&env.dst());
}

#[test]
fn recursive_tree_download() {
    let env = Env::new();
    let tree = env.src().join("tree");
    make_tree(&tree);
    env.ok(env.soku().arg("-r").arg(env.remote(&tree)).arg(env.dst()));
    assert_same_tree(&tree, &env.dst().join("tree"));
    assert_no_part_files(&env.dst());
}

/// 3000 small files (empty to 6 KiB) in 30 directories: far more than the sender
/// announces ahead and the receiver prepares at once.
fn make_small_files(root: &std::path::Path) {
    for f in 0..3000u64 {
        let len = if f % 11 == 0 { 0 } else { ((f * 7919) % 6000 + 1) as usize };
        write(&root.join(format!("d{:02}/f{f:04}", f % 30)), &data(len, f));
    }
}

#[test]
fn thousands_of_small_files_both_ways() {
    let env = Env::new();
    let tree = env.src().join("small");
    make_small_files(&tree);
    env.ok(env.soku().arg("-r").arg(&tree).arg(env.remote(&env.dst())));
    assert_same_tree(&tree, &env.dst().join("small"));
    assert_no_part_files(&env.dst());
    let back = env.path("back");
    std::fs::create_dir(&back).expect("mkdir");
    env.ok(env.soku().arg("-r").arg(env.remote(&tree)).arg(&back));
    assert_same_tree(&tree, &back.join("small"));
    assert_no_part_files(&back);
}

#[test]
fn recursive_tree_to_a_new_name() {
    // scp: `-r dir host:new` creates `new` holding dir's contents.
    let env = Env::new();
    let tree = env.src().join("tree");
    make_tree(&tree);
    env.ok(env.soku().arg("-r").arg(&tree).arg(env.remote(&env.dst().join("copy"))));
    assert_same_tree(&tree, &env.dst().join("copy"));
}

/// Files with distinct modes and an old mtime (with nanoseconds), in a dir.
fn make_preserved(dir: &std::path::Path) -> [(std::path::PathBuf, u32); 2] {
    let files = [(dir.join("secret.txt"), 0o640), (dir.join("tool.sh"), 0o755)];
    for (i, (path, m)) in files.iter().enumerate() {
        write(path, &data(10_000 + i, 6 + i as u64));
        chmod(path, *m);
        set_mtime(path, OLD_SECS + i as u64, OLD_NSEC);
    }
    files
}

fn assert_preserved(files: &[(std::path::PathBuf, u32)], copied_dir: &std::path::Path) {
    for (i, (path, m)) in files.iter().enumerate() {
        let copy = copied_dir.join(path.file_name().expect("name"));
        assert_same_file(path, &copy);
        assert_eq!(mode(&copy), *m, "mode of {}", copy.display());
        assert_eq!(mtime(&copy), (OLD_SECS + i as u64, OLD_NSEC), "mtime of {}", copy.display());
    }
}

#[test]
fn preserve_mode_and_mtime_upload() {
    let env = Env::new();
    let dir = env.src().join("p");
    let files = make_preserved(&dir);
    set_mtime(&dir, OLD_SECS - 50, 0);
    chmod(&dir, 0o750);
    env.ok(env.soku().args(["-r", "-p"]).arg(&dir).arg(env.remote(&env.dst())));
    assert_preserved(&files, &env.dst().join("p"));
    assert_eq!(mode(&env.dst().join("p")), 0o750, "directory mode");
    assert_eq!(mtime(&env.dst().join("p")), (OLD_SECS - 50, 0), "directory mtime");
}

/// Catches: `-p` giving root a setuid, setgid or sticky bit the peer chose (OpenSSH's
/// scp clears them since 9.2), on a download and on an upload; and
/// `--keep-special-bits` not keeping them for root on a download.
#[test]
fn preserve_clears_setuid_setgid_and_sticky_bits_unless_root_asks() {
    let env = Env::new();
    let tree = env.src().join("tree");
    write(&tree.join("tool"), b"#!/bin/sh\n");
    chmod(&tree.join("tool"), 0o6755);
    std::fs::create_dir(tree.join("drop")).expect("mkdir");
    chmod(&tree.join("drop"), 0o1777);
    let down = env.path("down");
    env.ok(env.soku().args(["-r", "-p"]).arg(env.remote(&tree)).arg(&down));
    assert_eq!(mode(&down.join("tool")), 0o755, "the file's setuid and setgid bits");
    assert_eq!(mode(&down.join("drop")), 0o777, "the directory's sticky bit");
    env.ok(env.soku().args(["-r", "-p"]).arg(&tree).arg(env.remote(&env.dst().join("up"))));
    assert_eq!(mode(&env.dst().join("up/tool")), 0o755);
    assert_eq!(mode(&env.dst().join("up/drop")), 0o777);
    // Root (these tests run as root) asking for them, from a source it trusts.
    let kept = env.path("kept");
    let asked = ["-r", "-p", "--keep-special-bits"];
    env.ok(env.soku().args(asked).arg(env.remote(&tree)).arg(&kept));
    assert_eq!(mode(&kept.join("tool")), 0o6755);
    assert_eq!(mode(&kept.join("drop")), 0o1777);
}

#[test]
fn preserve_mode_and_mtime_download() {
    let env = Env::new();
    let files = make_preserved(&env.src());
    let mut cmd = env.soku();
    cmd.arg("-p");
    for (path, _) in &files {
        cmd.arg(env.remote(path));
    }
    env.ok(cmd.arg(env.dst()));
    assert_preserved(&files, &env.dst());
}

#[test]
fn without_p_mtime_is_not_preserved() {
    let env = Env::new();
    let files = make_preserved(&env.src());
    let (path, _) = &files[0];
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after epoch")
        .as_secs();
    env.ok(env.soku().arg(path).arg(env.remote(&env.dst())));
    env.ok(env.soku().arg(env.remote(path)).arg(env.path("")));
    for copy in [env.dst().join("secret.txt"), env.path("secret.txt")] {
        assert_same_file(path, &copy);
        let (secs, _) = mtime(&copy);
        // A fresh file: written now (allow for a coarse clock), not the source's old time.
        assert!(secs + 5 >= before, "mtime {secs} of {} looks preserved", copy.display());
    }
}

#[test]
fn several_sources_into_a_directory_upload() {
    let env = Env::new();
    let names = ["s1.bin", "s2.bin", "s3.bin"];
    let mut cmd = env.soku();
    for (i, name) in names.iter().enumerate() {
        let path = env.src().join(name);
        write(&path, &data(5000 * (i + 1), 10 + i as u64));
        cmd.arg(path);
    }
    env.ok(cmd.arg(env.remote(&env.dst())));
    assert_same_tree(&env.src(), &env.dst());
}

/// Files larger than the connection's flow-control window, one after another: before
/// the bulk budget and the control stream's priority, the next file's entry could be
/// stuck behind its own chunks and the copy stalled for good at a file boundary (4 of
/// 6 runs of this upload on loopback hung).
#[test]
fn large_files_in_a_row_cross_their_boundaries_both_ways() {
    let env = Env::new();
    let mut up = env.soku();
    for i in 0..3u64 {
        let path = env.src().join(format!("big{i}.bin"));
        write(&path, &data(80 << 20, 40 + i));
        up.arg(path);
    }
    env.ok(up.arg(env.remote(&env.dst())));
    assert_same_tree(&env.src(), &env.dst());

    let back = env.dst().join("back");
    std::fs::create_dir(&back).expect("mkdir back");
    let mut down = env.soku();
    for i in 0..3u64 {
        down.arg(env.remote(&env.dst().join(format!("big{i}.bin"))));
    }
    env.ok(down.arg(&back));
    assert_same_tree(&env.src(), &back);
}

#[test]
fn several_sources_into_a_directory_download() {
    let env = Env::new();
    let mut cmd = env.soku();
    for (i, name) in ["d1.bin", "d2.bin"].iter().enumerate() {
        let path = env.src().join(name);
        write(&path, &data(7000 * (i + 1), 20 + i as u64));
        cmd.arg(env.remote(&path));
    }
    env.ok(cmd.arg(env.dst()));
    assert_same_tree(&env.src(), &env.dst());
}

#[test]
fn exact_multiple_of_the_chunk_size_both_ways() {
    let env = Env::new();
    let src = env.src().join("three-mib.bin");
    write(&src, &data(3 << 20, 30));
    env.ok(env.soku().arg(&src).arg(env.remote(&env.dst())));
    assert_same_file(&src, &env.dst().join("three-mib.bin"));
    let back = env.path("back");
    std::fs::create_dir(&back).expect("mkdir");
    env.ok(env.soku().arg(env.remote(&src)).arg(&back));
    assert_same_file(&src, &back.join("three-mib.bin"));
    assert_no_part_files(env.dir.path());
}

#[test]
fn ssh_channel_fallback_upload_and_download() {
    let env = Env::new();
    let tree = env.src().join("tree");
    make_tree(&tree);
    let out = env.ok(env
        .soku()
        .args(["--ssh-channel", "--json", "-r"])
        .arg(&tree)
        .arg(env.remote(&env.dst())));
    let events = String::from_utf8_lossy(&out.stderr);
    assert!(events.contains(r#""transport":"the ssh channel""#), "{events}");
    assert!(!events.contains(r#""transport":"QUIC"#), "{events}");
    assert_same_tree(&tree, &env.dst().join("tree"));

    let back = env.path("back");
    std::fs::create_dir(&back).expect("mkdir");
    let out = env.ok(env
        .soku()
        .args(["--ssh-channel", "--json", "-r"])
        .arg(env.remote(&tree))
        .arg(&back));
    let events = String::from_utf8_lossy(&out.stderr);
    assert!(events.contains(r#""transport":"the ssh channel""#), "{events}");
    assert_same_tree(&tree, &back.join("tree"));
    assert_no_part_files(env.dir.path());
}

#[test]
fn compression_on_compressible_data_both_ways() {
    let env = Env::new();
    let src = env.src().join("text.log");
    let line = "2024-01-01T00:00:00Z INFO soku: the same log line again and again\n";
    write(&src, line.repeat(40_000).as_bytes());
    env.ok(env.soku().arg("-C").arg(&src).arg(env.remote(&env.dst())));
    assert_same_file(&src, &env.dst().join("text.log"));
    let back = env.path("back");
    std::fs::create_dir(&back).expect("mkdir");
    env.ok(env.soku().args(["-C", "--ssh-channel"]).arg(env.remote(&src)).arg(&back));
    assert_same_file(&src, &back.join("text.log"));
}

#[test]
fn cipher_chacha20_poly1305_works() {
    let env = Env::new();
    let src = env.src().join("c.bin");
    write(&src, &data(2 << 20, 40));
    env.ok(env.soku().args(["-c", "chacha20-poly1305"]).arg(&src).arg(env.remote(&env.dst())));
    assert_same_file(&src, &env.dst().join("c.bin"));
}

/// scp's `-l` holds on loopback, where the congestion window's own cap cannot bite
/// (a few 64 kB packets per tens of microseconds), in both directions (on a download
/// the server is the sender). 16 Mbit/s is 2 MB/s: of five chunks (four of 1 MiB, one
/// byte) the last to go cannot start before three 1 MiB chunks have had their time,
/// 1.57 s; unlimited, this takes ~0.2 s.
#[test]
fn rate_limit_holds_both_ways() {
    let env = Env::new();
    let src = env.src().join("limited.bin");
    write(&src, &data((4 << 20) + 1, 50));
    let begin = std::time::Instant::now();
    env.ok(env.soku().args(["-l", "16000"]).arg(&src).arg(env.remote(&env.dst())));
    let up = begin.elapsed();
    assert_same_file(&src, &env.dst().join("limited.bin"));
    let back = env.src().join("back");
    std::fs::create_dir(&back).expect("mkdir");
    let begin = std::time::Instant::now();
    env.ok(env
        .soku()
        .args(["-l", "16000"])
        .arg(env.remote(&env.dst().join("limited.bin")))
        .arg(&back));
    let down = begin.elapsed();
    assert_same_file(&src, &back.join("limited.bin"));
    let floor = std::time::Duration::from_millis(1500);
    assert!(
        up >= floor && down >= floor,
        "-l 16000 moved 4 MiB too fast: up {up:?}, down {down:?}"
    );
}

#[test]
fn sparse_file_over_4_gib_upload() {
    // Chunk indices and offsets past u32 bytes. The source is sparse, but every byte is
    // read, hashed, encrypted and written: about 4 GiB of work on each side.
    let env = Env::new();
    let src = env.src().join("big.sparse");
    let size = (4u64 << 30) + 12345;
    let tail = b"the end of a file over 4 GiB";
    {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::create(&src).expect("create");
        file.set_len(size).expect("set_len");
        file.write_all_at(tail, size - tail.len() as u64).expect("write tail");
        file.write_all_at(b"head", 0).expect("write head");
    }
    env.ok(env.soku_within(600).arg("-q").arg(&src).arg(env.remote(&env.dst())));
    let copy = env.dst().join("big.sparse");
    assert_eq!(std::fs::metadata(&copy).expect("copied").len(), size);
    let mut got = vec![0u8; tail.len()];
    let mut head = [0u8; 4];
    {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open(&copy).expect("open copy");
        file.read_exact_at(&mut got, size - tail.len() as u64).expect("read tail");
        file.read_exact_at(&mut head, 0).expect("read head");
    }
    assert_eq!(&got, tail);
    assert_eq!(&head, b"head");
    assert_no_part_files(&env.dst());
}
