use soku_proto::chunk::MIN_CHUNK_SIZE;
use soku_proto::manifest::Meta;

use super::*;

const CS: u32 = MIN_CHUNK_SIZE;

fn meta(mtime: i64) -> Meta {
    Meta { mode: 0o644, mtime, ..Meta::default() }
}

fn target(dir: &tempfile::TempDir) -> TargetDir {
    TargetDir::open(dir.path()).expect("target directory")
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8 + 1).collect()
}

/// A file of one chunk to receive into a new target directory.
struct OneChunk {
    dir: tempfile::TempDir,
    local: std::path::PathBuf,
    bytes: Vec<u8>,
    trailer: Trailer,
    plan: ChunkPlan,
}

fn one_chunk() -> OneChunk {
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("f");
    let bytes = data(CS as usize);
    let size = bytes.len() as u64;
    let (trailer, plan) = (Trailer::new(size, &meta(5)), ChunkPlan::new(size, CS));
    OneChunk { dir, local, bytes, trailer, plan }
}

#[test]
fn nothing_held_creates_a_partial_file_with_its_trailer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("f");
    let size = 3 * u64::from(CS);
    let trailer = Trailer::new(size, &meta(5));
    let plan = ChunkPlan::new(size, CS);
    let got = prepare(&target(&dir), &local, trailer, plan, 0o644).expect("prepared");
    assert_eq!(got.base, HeldBase::Nothing);
    assert!(got.held.is_empty());
    let Storage::Temp(file) = got.storage else { panic!("a new partial file") };
    assert_eq!(file.metadata().expect("md").len(), size + TRAILER_LEN);
    assert_eq!(Trailer::read_from(&file).expect("read"), Some(trailer));
    assert!(!local.exists(), "nothing at the final name");
}

#[test]
fn a_partial_file_of_the_same_source_holds_what_was_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("f");
    let bytes = data(3 * CS as usize);
    let size = bytes.len() as u64;
    let trailer = Trailer::new(size, &meta(5));
    let plan = ChunkPlan::new(size, CS);
    let first = prepare(&target(&dir), &local, trailer, plan, 0o644).expect("prepared");
    let Storage::Temp(file) = first.storage else { panic!("a new partial file") };
    // Chunk 1 written, chunk 2 torn halfway (a crash mid-write), chunk 0 never.
    let cs = CS as usize;
    crate::sys::write_all_at(&file, &bytes[cs..2 * cs], u64::from(CS)).expect("write");
    crate::sys::write_all_at(&file, &bytes[2 * cs..2 * cs + 100], 2 * u64::from(CS))
        .expect("write");
    drop(file);

    let again = prepare(&target(&dir), &local, trailer, plan, 0o644).expect("prepared");
    assert_eq!(again.base, HeldBase::Partial);
    let hashes: Vec<[u8; 32]> = again.held.iter().map(|c| c.hash).collect();
    let indices: Vec<u32> = again.held.iter().map(|c| c.index).collect();
    assert_eq!(indices, [1, 2], "a hole is a chunk never received");
    assert_eq!(hashes[0], chunk_hash(&bytes[cs..2 * cs]), "the chunk written");
    assert_ne!(hashes[1], chunk_hash(&bytes[2 * cs..]), "a torn chunk does not match");
}

/// The last chunk shares its block with the trailer, which is written when the partial
/// file is made: never received, it is no held chunk (it was claimed as zeros, and the
/// next run warned that the interrupted copy differed from the source).
#[test]
fn a_last_chunk_never_received_is_not_held_beside_the_trailer() {
    for size in [5, 2 * u64::from(CS) + 100, 2 * u64::from(CS) + 5000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let local = dir.path().join("f");
        let bytes = data(size as usize);
        let trailer = Trailer::new(size, &meta(5));
        let plan = ChunkPlan::new(size, CS);
        let first = prepare(&target(&dir), &local, trailer, plan, 0o644).expect("prepared");
        let Storage::Temp(file) = first.storage else { panic!("a new partial file") };
        if size > u64::from(CS) {
            crate::sys::write_all_at(&file, &bytes[..CS as usize], 0).expect("write chunk 0");
        }
        drop(file);
        let again = prepare(&target(&dir), &local, trailer, plan, 0o644).expect("prepared");
        let indices: Vec<u32> = again.held.iter().map(|c| c.index).collect();
        let expected: &[u32] = if size > u64::from(CS) { &[0] } else { &[] };
        assert_eq!(indices, expected, "{size} bytes: only what was written is held");
    }
}

#[test]
fn a_partial_file_of_a_changed_source_is_restarted_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("f");
    let size = 2 * u64::from(CS);
    let plan = ChunkPlan::new(size, CS);
    let old = prepare(&target(&dir), &local, Trailer::new(size, &meta(5)), plan, 0o644);
    let Storage::Temp(file) = old.expect("prepared").storage else { panic!("partial") };
    crate::sys::write_all_at(&file, &data(CS as usize), 0).expect("write");
    drop(file);

    let newer = Trailer::new(size, &meta(6));
    let got = prepare(&target(&dir), &local, newer, plan, 0o644).expect("prepared");
    let HeldBase::Restarted { reason } = &got.base else { panic!("restarted: {:?}", got.base) };
    assert!(reason.contains("modified"), "{reason}");
    assert!(got.held.is_empty());
    let Storage::Temp(file) = got.storage else { panic!("a fresh partial file") };
    assert_eq!(Trailer::read_from(&file).expect("read"), Some(newer));
    let mut first = vec![0u8; 16];
    crate::sys::read_exact_at(&file, &mut first, 0).expect("read");
    assert_eq!(first, [0; 16], "the old bytes are gone");
    drop(file);

    let bigger = Trailer::new(size + 1, &meta(6));
    let plan = ChunkPlan::new(size + 1, CS);
    let got = prepare(&target(&dir), &local, bigger, plan, 0o644).expect("prepared");
    assert!(matches!(&got.base, HeldBase::Restarted { reason } if reason.contains("size")));
}

#[test]
fn a_complete_file_at_the_final_name_is_held_in_place_until_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("f");
    let bytes = data(2 * CS as usize + 9);
    std::fs::write(&local, &bytes).expect("write");
    let size = bytes.len() as u64;
    let trailer = Trailer::new(size, &meta(5));
    let plan = ChunkPlan::new(size, CS);
    let got = prepare(&target(&dir), &local, trailer, plan, 0o644).expect("prepared");
    assert_eq!(got.base, HeldBase::Complete);
    let expect: Vec<[u8; 32]> = bytes.chunks(CS as usize).map(chunk_hash).collect();
    assert_eq!(got.held.iter().map(|c| c.hash).collect::<Vec<_>>(), expect);
    assert!(matches!(got.storage, Storage::FinalFile));
    assert!(!temp_path(&local).exists(), "no copy until a chunk is written");

    let temp = copy_final_to_temp(&target(&dir), &local, trailer, 0o644).expect("copied");
    assert_eq!(Trailer::read_from(&temp).expect("read"), Some(trailer));
    target(&dir).finish_file(&local, &temp, size, &meta(5), false, false).expect("finished");
    assert_eq!(std::fs::read(&local).expect("read"), bytes, "the trailer was cut");

    let other = Trailer::new(size + 1, &meta(5));
    let got = prepare(&target(&dir), &local, other, ChunkPlan::new(size + 1, CS), 0o644);
    assert_eq!(got.expect("prepared").base, HeldBase::Nothing, "another size: nothing held");
}

#[test]
fn a_second_receiver_waits_for_the_first_to_let_go_of_the_partial_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("f");
    let size = u64::from(CS);
    let trailer = Trailer::new(size, &meta(5));
    let plan = ChunkPlan::new(size, CS);
    let first = prepare(&target(&dir), &local, trailer, plan, 0o644).expect("prepared");
    let Storage::Temp(held) = first.storage else { panic!("a partial file") };
    let released = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = released.clone();
    let letting_go = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(held);
    });
    let second = prepare(&target(&dir), &local, trailer, plan, 0o644).expect("prepared after");
    assert!(released.load(std::sync::atomic::Ordering::SeqCst), "it waited for the first");
    assert_eq!(second.base, HeldBase::Partial);
    letting_go.join().expect("thread");
}

#[test]
fn a_receiver_that_cannot_wait_is_told_the_partial_file_is_busy_and_nothing_changes() {
    let OneChunk { dir, local, bytes, trailer, plan } = one_chunk();
    let first = prepare(&target(&dir), &local, trailer, plan, 0o644).expect("prepared");
    let Storage::Temp(held) = first.storage else { panic!("a partial file") };
    crate::sys::write_all_at(&held, &bytes, 0).expect("write");
    let at_once = || {
        let dir = target(&dir);
        prepare_within(&dir, &local, trailer, plan, 0o644, Duration::ZERO, Expect::Anything)
    };
    let started = Instant::now();
    let busy = at_once();
    let Err(err) = busy else { panic!("prepared while the first receiver holds the lock") };
    assert!(LockBusy::is(&err), "not told busy: {err}");
    assert!(started.elapsed() < LOCK_WAIT / 2, "it waited");
    drop(held);
    // What the first wrote is still there for the next receiver to hold.
    let next = at_once().expect("prepared once let go");
    assert_eq!(next.base, HeldBase::Partial);
    assert_eq!(next.held.iter().map(|c| c.hash).collect::<Vec<_>>(), [chunk_hash(&bytes)]);
}

/// Without resume, a partial file another receiver holds is left alone (busy, for the
/// caller to wait on the pool) and a stale one nobody holds is replaced; the new one is
/// locked in turn.
#[test]
fn a_fresh_partial_file_waits_for_another_receivers_and_replaces_a_stale_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("f");
    let temp = temp_path(&local);
    let first = prepare_fresh(&target(&dir), &local, 10, 0o644, Duration::ZERO).expect("first");
    crate::sys::write_all_at(&first, b"first", 0).expect("write");
    let busy = prepare_fresh(&target(&dir), &local, 10, 0o644, Duration::ZERO);
    let Err(err) = busy else { panic!("made while the first receiver holds its partial file") };
    assert!(LockBusy::is(&err), "not told busy: {err}");
    assert_eq!(&std::fs::read(&temp).expect("still there")[..5], b"first");
    drop(first);
    let second = prepare_fresh(&target(&dir), &local, 10, 0o644, Duration::ZERO).expect("second");
    assert_eq!(std::fs::read(&temp).expect("replaced"), [0u8; 10]);
    let busy = prepare_fresh(&target(&dir), &local, 10, 0o644, Duration::ZERO);
    assert!(busy.is_err_and(|e| LockBusy::is(&e)), "the new one is not locked");
    drop(second);
}

/// Expecting nothing (the copy's preview found the target free), the partial file is
/// made at once; a name taken since then gets the usual looks, so another receiver's
/// partial file is still waited for and an earlier run's still resumed from.
#[test]
fn expecting_nothing_makes_the_partial_file_at_once_and_looks_only_when_its_name_is_taken() {
    let OneChunk { dir, local, bytes, trailer, plan } = one_chunk();
    let nothing =
        |wait| prepare_within(&target(&dir), &local, trailer, plan, 0o644, wait, Expect::Nothing);

    let first = nothing(Duration::ZERO).expect("made");
    assert_eq!(first.base, HeldBase::Nothing);
    let Storage::Temp(held) = first.storage else { panic!("a new partial file") };
    assert_eq!(Trailer::read_from(&held).expect("read"), Some(trailer), "with its trailer");
    crate::sys::write_all_at(&held, &bytes, 0).expect("write");

    let busy = nothing(Duration::ZERO);
    assert!(busy.is_err_and(|e| LockBusy::is(&e)), "another receiver's partial file was taken");
    assert_eq!(&std::fs::read(temp_path(&local)).expect("kept")[..4], &bytes[..4]);
    drop(held);

    let again = nothing(Duration::ZERO).expect("prepared once let go");
    assert_eq!(again.base, HeldBase::Partial, "a partial file made since the preview is resumed");
    assert_eq!(again.held.iter().map(|c| c.hash).collect::<Vec<_>>(), [chunk_hash(&bytes)]);
}

/// A directory at the final name is refused before any byte is sent for it, whether or
/// not resuming, and what is left of an earlier run at the temporary name is replaced.
// Symlinks, owners and modes as Unix has them.
#[cfg(unix)]
#[test]
fn a_directory_at_the_final_name_is_refused_and_a_stale_temporary_name_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("f");
    let trailer = Trailer::new(10, &meta(5));
    let plan = ChunkPlan::new(10, CS);
    std::fs::create_dir(&local).expect("mkdir");
    let resumed = prepare(&target(&dir), &local, trailer, plan, 0o644);
    assert_eq!(resumed.expect_err("refused").raw_os_error(), Some(libc::EISDIR));
    let fresh = prepare_fresh(&target(&dir), &local, 10, 0o644, Duration::ZERO);
    assert_eq!(fresh.expect_err("refused").raw_os_error(), Some(libc::EISDIR));
    std::fs::remove_dir(&local).expect("rmdir");

    // A symlink at the temporary name is replaced, never followed.
    let elsewhere = dir.path().join("elsewhere");
    std::os::unix::fs::symlink(&elsewhere, temp_path(&local)).expect("symlink");
    let made = prepare(&target(&dir), &local, trailer, plan, 0o644).expect("prepared");
    assert_eq!(made.base, HeldBase::Nothing);
    assert!(!elsewhere.exists(), "the symlink was followed");
    assert!(std::fs::symlink_metadata(temp_path(&local)).expect("made").is_file());
    drop(made);
    std::fs::remove_file(temp_path(&local)).expect("rm");
    std::os::unix::fs::symlink(&elsewhere, temp_path(&local)).expect("symlink");
    prepare_fresh(&target(&dir), &local, 10, 0o644, Duration::ZERO).expect("made");
    assert!(!elsewhere.exists(), "the symlink was followed");
}

// Symlinks, owners and modes as Unix has them.
#[cfg(unix)]
#[test]
fn holds_nothing_only_where_no_name_and_no_partial_file_exists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let into = Target::IntoDir(dir.path().to_path_buf());
    let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert!(holds_nothing(&into, &names(&["a", "b"])), "an empty directory holds nothing");
    assert!(holds_nothing(&into, &[]));

    std::fs::write(dir.path().join("b"), b"x").expect("write");
    assert!(!holds_nothing(&into, &names(&["a", "b"])), "a file at a final name");
    assert!(holds_nothing(&into, &names(&["a"])), "other names do not count");

    std::fs::write(temp_path(&dir.path().join("a")), b"x").expect("write");
    assert!(!holds_nothing(&into, &names(&["a"])), "a partial file of an earlier run");

    std::fs::create_dir(dir.path().join("tree")).expect("mkdir");
    assert!(!holds_nothing(&into, &names(&["tree"])), "a directory may hold files below");
    std::os::unix::fs::symlink("missing", dir.path().join("link")).expect("symlink");
    assert!(!holds_nothing(&into, &names(&["link"])), "a dangling symlink is something");
    assert!(!holds_nothing(&into, &names(&[".."])), "a name the receiver would refuse");

    let as_name = Target::AsName(dir.path().join("new"));
    assert!(holds_nothing(&as_name, &names(&["whatever"])), "the target's own name counts");
    let taken = Target::AsName(dir.path().join("b"));
    assert!(!holds_nothing(&taken, &names(&["whatever"])));
}

/// A partial file another user placed at the temporary name, with a valid trailer and
/// mode 0666, was once continued and renamed into place with its owner and mode (which
/// let that user change the "verified" file afterwards). It is now never continued:
/// replaced by a new partial file of this user's, private until its rename. So is a
/// partial file with a second name (a hard link), and one that others may write.
// Symlinks, owners and modes as Unix has them.
#[cfg(unix)]
#[test]
fn a_partial_file_soku_did_not_make_is_never_continued() {
    use std::os::unix::fs::PermissionsExt;
    let bytes = data(2 * CS as usize);
    let size = bytes.len() as u64;
    let trailer = Trailer::new(size, &meta(5));
    let plan = ChunkPlan::new(size, CS);
    let plant = |local: &Path| {
        let temp = temp_path(local);
        std::fs::write(&temp, &bytes).expect("plant");
        trailer.write_to(&File::options().write(true).open(&temp).expect("open")).expect("trailer");
        temp
    };
    let mine = rustix::process::geteuid().as_raw();
    type Spoil = fn(&Path);
    let cases: [(&str, Spoil); 3] = [
        ("another user's 0666", |temp| {
            std::fs::set_permissions(temp, std::fs::Permissions::from_mode(0o666)).expect("chmod");
            if rustix::process::geteuid().is_root() {
                std::os::unix::fs::chown(temp, Some(65534), Some(65534)).expect("chown");
            }
        }),
        ("writable by its group", |temp| {
            std::fs::set_permissions(temp, std::fs::Permissions::from_mode(0o620)).expect("chmod");
        }),
        ("a hard link", |temp| {
            std::fs::set_permissions(temp, std::fs::Permissions::from_mode(0o600)).expect("chmod");
            std::fs::hard_link(temp, temp.with_extension("elsewhere")).expect("link");
        }),
    ];
    for (case, spoil) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let local = dir.path().join("report.bin");
        let temp = plant(&local);
        spoil(&temp);
        let got = prepare(&target(&dir), &local, trailer, plan, 0o666).expect(case);
        assert_eq!(got.base, HeldBase::Nothing, "{case}");
        assert!(got.held.is_empty(), "{case}");
        let Storage::Temp(file) = got.storage else { panic!("{case}: a new partial file") };
        let st = rustix::fs::fstat(&file).expect("fstat");
        assert_eq!((st.st_uid, st.st_nlink, st.st_mode & 0o777), (mine, 1, 0o600), "{case}");
    }
}
