use std::os::unix::fs::symlink;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use super::*;
use crate::fsops::times::at;
use crate::partial::made_dir::resolve_target;
use crate::temp_name::temp_path;
use soku_proto::path::Target;

#[test]
fn a_symlinked_directory_below_the_root_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    symlink(outside.path(), root.join("link")).expect("symlink");
    let dir = TargetDir::open(root).expect("open");
    let err = dir
        .entry(&root.join("link/x"))
        .and_then(|e| e.create_temp(1, 0o644, None))
        .expect_err("refused");
    assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
    assert!(dir.ensure_dir(&root.join("link")).is_err());
    assert!(dir.ensure_dir(&root.join("link/sub")).is_err());
    assert_eq!(std::fs::read_dir(outside.path()).expect("read").count(), 0);
}

#[test]
fn the_walk_without_openat2_refuses_a_symlink_too() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(tmp.path().join("real")).expect("mkdir");
    symlink(outside.path(), tmp.path().join("real/link")).expect("symlink");
    let dir = TargetDir::open(tmp.path()).expect("open");
    assert!(dir.walk_dir(Path::new("real"), crate::sys::LOOKUP).is_ok());
    let err = dir.walk_dir(Path::new("real/link"), crate::sys::LOOKUP).expect_err("refused");
    assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
}

/// A confined server's opens: a link that stays beneath the root is followed, and `..`,
/// an absolute link or a relative one out of it is refused as outside, with the kernel's
/// resolution and with the walk that stands in for it.
#[test]
fn nothing_outside_a_root_opens_beneath_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("dir")).expect("mkdir");
    std::fs::write(root.join("dir/f"), b"in").expect("write");
    std::fs::write(tmp.path().join("secret"), b"out").expect("write");
    symlink("dir", root.join("in")).expect("symlink");
    symlink(tmp.path().join("secret"), root.join("abs")).expect("symlink");
    symlink("../secret", root.join("rel")).expect("symlink");
    let dir = TargetDir::open(&root).expect("open");
    let read = |rel: &str| {
        let fd = dir.open_beneath(&root.join(rel), OFlags::RDONLY)?;
        std::io::read_to_string(File::from(fd))
    };
    assert_eq!(read("dir/f").expect("inside"), "in");
    assert_eq!(read("in/f").expect("a link inside"), "in");
    assert_eq!(read("dir/../dir/f").expect("`..` that stays inside"), "in");
    for outside in ["abs", "rel", "../secret", "dir/../../secret"] {
        let err = read(outside).expect_err(outside);
        assert!(err.get_ref().is_some_and(|e| e.is::<Outside>()), "{outside}: {err}");
    }
    assert!(dir.open_beneath(&tmp.path().join("secret"), OFlags::RDONLY).is_err());
    for outside in ["abs", "rel", "../secret"] {
        let err = dir.walk_beneath(Path::new(outside), OFlags::RDONLY).expect_err(outside);
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{outside}: {err}");
    }
    let walked = dir.walk_beneath(Path::new("dir/f"), OFlags::RDONLY).expect("walked");
    assert_eq!(std::io::read_to_string(File::from(walked)).expect("read"), "in");
    let below = dir.open_below(&root.join("dir")).expect("below");
    assert_eq!(below.path(), root.join("dir"));
    assert!(dir.open_below(&root.join("rel")).is_err());
}

#[test]
fn a_file_appears_under_its_name_only_when_finished() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let local = tmp.path().join("f");
    let dir = TargetDir::open(tmp.path()).expect("open");
    let file = dir.entry(&local).and_then(|e| e.create_temp(3, 0o640, None)).expect("created");
    assert!(!local.exists());
    let meta = Meta { mode: 0o640, mtime: 1_000_000_000, ..Meta::default() };
    dir.finish_file(&local, &file, 3, &meta, true, true).expect("finished");
    let md = std::fs::metadata(&local).expect("exists");
    assert_eq!(md.len(), 3);
    assert_eq!(md.permissions().mode() & 0o777, 0o640);
    assert_eq!(md.modified().expect("mtime"), at(1_000_000_000, 0));
    assert!(!temp_path(&local).exists());
}

/// Without `-p` a file gets the sender's permission bits back, within the umask: the
/// owner's write bit added to fill it comes off again, and a mode it already has is
/// left as it is.
#[test]
fn without_preserve_a_file_gets_the_senders_permission_bits_back() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = TargetDir::open(tmp.path()).expect("open");
    let umask = {
        let probe = tmp.path().join("probe");
        std::fs::write(&probe, b"").expect("write");
        !std::fs::metadata(&probe).expect("md").permissions().mode() & 0o666
    };
    for mode in [0o444, 0o400, 0o644, 0o600] {
        let local = tmp.path().join(format!("f{mode:o}"));
        let file = dir.entry(&local).and_then(|e| e.create_temp(1, mode, None)).expect("made");
        let meta = Meta { mode, ..Meta::default() };
        dir.finish_file(&local, &file, 1, &meta, false, false).expect("finished");
        let got = std::fs::metadata(&local).expect("exists").permissions().mode() & 0o777;
        assert_eq!(got, mode & !umask, "sent as {mode:o}");
    }
}

/// A local process swaps a directory of the target for a symlink to a directory
/// outside, again and again, while files are created in it: some creations fail, none
/// lands outside.
#[test]
fn a_directory_swapped_for_a_symlink_mid_copy_cannot_redirect_a_write() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    std::fs::create_dir(root.join("d")).expect("mkdir");
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU32::new(0));
    let swapper = {
        let (root, outside) = (root.clone(), outside.path().to_path_buf());
        let (stop, swaps) = (stop.clone(), swaps.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // The real directory moves aside and a symlink takes its name, then back.
                let _ = std::fs::rename(root.join("d"), root.join("d.real"));
                let _ = symlink(&outside, root.join("d"));
                let _ = std::fs::remove_file(root.join("d"));
                let _ = std::fs::rename(root.join("d.real"), root.join("d"));
                swaps.fetch_add(1, Ordering::Relaxed);
                // The real directory stays a moment: on a fast core the loop above
                // leaves it real for too short a time for any write to land in it,
                // and a test where every write is refused shows nothing.
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        })
    };
    let dir = TargetDir::open(&root).expect("open");
    let (mut made, mut refused) = (0u32, 0u32);
    // Both sides must have run interleaved: at least 2000 writes, 200 swaps, and both a
    // write that landed and one refused, however the scheduler shares the cores (a
    // one-core machine may run the swapper rarely, a fast one may keep it ahead).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut n = 0u32;
    let interleaved = |n: u32, made: u32, refused: u32| {
        n >= 2000 && swaps.load(Ordering::Relaxed) >= 200 && made > 0 && refused > 0
    };
    while !interleaved(n, made, refused) && std::time::Instant::now() < deadline {
        let local = root.join(format!("d/f{n}"));
        match dir.entry(&local).and_then(|e| e.create_temp(10, 0o644, None)) {
            Ok(file) => {
                made += 1;
                let meta = Meta { mode: 0o644, ..Meta::default() };
                let _ = dir.finish_file(&local, &file, 10, &meta, false, false);
            }
            Err(_) => refused += 1,
        }
        let _ = dir.ensure_dir(&root.join(format!("d/sub{n}")));
        n += 1;
        if n.is_multiple_of(64) {
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().expect("swapper");
    let swaps = swaps.load(Ordering::Relaxed);
    let escaped: Vec<_> = std::fs::read_dir(outside.path()).expect("read").collect();
    assert!(escaped.is_empty(), "{} entries outside the target", escaped.len());
    assert!(swaps >= 200, "the swaps raced the writes ({swaps} in 30 s)");
    assert!(made > 0, "some files were made while the directory was real ({refused} refused)");
    assert!(refused > 0, "some were refused while it was not ({made} made)");
}

/// Without `-p` a file that replaces another keeps the mode the replaced one had, as scp
/// and rsync keep it: a read-only target stays read-only, a private one private.
#[test]
fn without_preserve_a_replaced_file_keeps_its_mode() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = TargetDir::open(tmp.path()).expect("open");
    for existing in [0o444, 0o600, 0o755] {
        let local = tmp.path().join(format!("f{existing:o}"));
        std::fs::write(&local, b"old").expect("write");
        std::fs::set_permissions(&local, std::fs::Permissions::from_mode(existing)).expect("chmod");
        let file = dir.entry(&local).and_then(|e| e.create_temp(3, 0o644, None)).expect("temp");
        let meta = Meta { mode: 0o644, ..Meta::default() };
        dir.finish_file(&local, &file, 3, &meta, false, false).expect("finished");
        let mode = std::fs::metadata(&local).expect("exists").permissions().mode() & 0o7777;
        assert_eq!(mode, existing, "{}", local.display());
    }
}

#[test]
fn only_a_marked_directory_for_one_source_resumes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let rr = tmp.path().join("rr");
    let into = |path: &Path| Target::IntoDir(path.to_path_buf());
    assert_eq!(resolve_target(&rr, 1), Ok(Target::AsName(rr.clone())), "a new name");
    std::fs::create_dir(&rr).expect("mkdir");
    assert_eq!(resolve_target(&rr, 1), Ok(into(&rr)), "unmarked: scp's rule");

    let dir = TargetDir::open(tmp.path()).expect("target");
    dir.mark_made(&rr, &"src".into()).expect("mark");
    let resumed = Target::Resumed { dir: rr.clone(), name: "src".into() };
    assert_eq!(resolve_target(&rr, 1), Ok(resumed));
    assert_eq!(resolve_target(&rr, 2), Ok(into(&rr)), "several sources");
    let slash = std::path::PathBuf::from(format!("{}/", rr.display()));
    assert_eq!(resolve_target(&slash, 1), Ok(into(&slash)), "rr/ asks for its inside");
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&rr, &link).expect("symlink");
    assert_eq!(resolve_target(&link, 1), Ok(into(&link)), "not through a symlink");

    std::fs::write(rr.join(MARK), b"not a mark").expect("write");
    assert_eq!(resolve_target(&rr, 1), Ok(into(&rr)), "a file of that name from a source");
    dir.unmark_made(&rr).expect("unmark");
    assert!(rr.join(MARK).exists(), "a source's file of that name is not removed");
    dir.mark_made(&rr, &"src".into()).expect("mark");
    dir.unmark_made(&rr).expect("unmark");
    assert!(!rr.join(MARK).exists(), "the mark is removed");
}
