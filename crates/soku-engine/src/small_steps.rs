//! Small file-system steps run on the task that needs them, not on the blocking pool.
//!
//! Each step of a copy that touches the file system (make a file's temporary file, write
//! a chunk, rename the file into place, read a chunk on the sender) ran on tokio's
//! blocking pool, so that a slow disk never stalls the runtime. For a tree of small
//! files that meant three or four hand-offs per file, each waking a pool thread and then
//! the task that waited: 48 `futex` calls per file. Running every step in place cut
//! the CPU of a local copy of 20 000 small files by 40 %
//! (`lab/2026-11-28-small-steps`).
//!
//! A step runs in place when it is small and its file system answers from memory or from
//! a local disk: at most [`SMALL`] bytes, which such a file system takes in microseconds,
//! as long as any hand-off would. Everything else still goes to the pool:
//! - large chunks, whose copy and hash take longer than a task should hold its thread;
//! - every step on a network or user-space file system (NFS, SMB, FUSE), where a server
//!   that stops answering would stop the runtime, and with it the connection;
//! - a flush to a disk (`fdatasync` before a rename), which waits for the device.
//!
//! One wait remains in place: a write the kernel throttles, because too much of the page
//! cache waits for a slow disk, holds its thread while the kernel pauses it (up to
//! 200 ms a pause, Linux's `balance_dirty_pages`). That disk is then the copy's limit
//! anyway, and a receiver that flushes its files (the default) starts each chunk's
//! write-back at once, so few of its own pages wait.

use crate::direct_io::LOCAL_DISK_FILE_SYSTEMS;

/// The most bytes a step reads or writes and still runs in place: a small file's only
/// chunk.
pub(crate) const SMALL: u64 = 64 << 10;

/// File systems that keep files in memory (Linux `include/uapi/linux/magic.h`): tmpfs,
/// ramfs. A flush there has nothing to wait for.
const MEMORY_FILE_SYSTEMS: [u64; 2] = [0x0102_1994, 0x8584_58F6];

/// Where a file system keeps its files, as far as a step's wait is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keeps {
    /// In memory: every step answers at once, a flush too.
    InMemory,
    /// On a local disk: small steps answer from the page cache; a flush waits.
    OnLocalDisk,
    /// Anywhere else (a network, a user-space daemon), or not known.
    Elsewhere,
}

impl Keeps {
    /// Where the file system of `fd` keeps its files.
    pub(crate) fn of(fd: impl crate::sys::Handle) -> Keeps {
        let Some(kind) = crate::sys::file_system_magic(fd) else { return Keeps::Elsewhere };
        if MEMORY_FILE_SYSTEMS.contains(&kind) {
            Keeps::InMemory
        } else if LOCAL_DISK_FILE_SYSTEMS.contains(&kind) {
            Keeps::OnLocalDisk
        } else {
            Keeps::Elsewhere
        }
    }

    /// Whether a step of `bytes` that does not flush runs in place here.
    pub(crate) fn in_place(self, bytes: u64) -> bool {
        bytes <= SMALL && self != Keeps::Elsewhere
    }

    /// Whether a step of `bytes` that flushes (when `flush`) runs in place here.
    pub(crate) fn in_place_flushing(self, bytes: u64, flush: bool) -> bool {
        self.in_place(bytes) && (!flush || self == Keeps::InMemory)
    }
}

/// Runs `step` here when `in_place`, else on the blocking pool.
pub(crate) async fn run<T, F>(in_place: bool, step: F) -> Result<T, tokio::task::JoinError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    if in_place {
        Ok(step())
    } else {
        tokio::task::spawn_blocking(step).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_small_steps_on_memory_or_local_disks_run_in_place() {
        assert!(Keeps::InMemory.in_place(SMALL));
        assert!(Keeps::OnLocalDisk.in_place(8 << 10));
        assert!(!Keeps::OnLocalDisk.in_place(SMALL + 1));
        assert!(!Keeps::Elsewhere.in_place(1));
    }

    #[test]
    fn a_flush_runs_in_place_only_where_the_files_are_in_memory() {
        assert!(Keeps::InMemory.in_place_flushing(1, true));
        assert!(!Keeps::OnLocalDisk.in_place_flushing(1, true));
        assert!(Keeps::OnLocalDisk.in_place_flushing(1, false));
        assert!(!Keeps::InMemory.in_place_flushing(SMALL + 1, false));
    }

    #[test]
    fn shared_memory_is_kept_in_memory() {
        // /dev/shm is tmpfs on every Linux this runs on; skip where it is not mounted.
        let Ok(dir) = std::fs::File::open("/dev/shm") else { return };
        assert_eq!(Keeps::of(&dir), Keeps::InMemory);
    }

    #[cfg(unix)]
    #[test]
    fn a_socket_is_not_a_file_system_that_answers_in_place() {
        let (one, _other) = std::os::unix::net::UnixStream::pair().expect("socket pair");
        assert_eq!(Keeps::of(&one), Keeps::Elsewhere);
    }

    #[tokio::test]
    async fn a_step_runs_here_or_on_the_pool_as_asked() {
        let here = std::thread::current().id();
        let in_place = run(true, move || std::thread::current().id()).await.expect("run");
        assert_eq!(in_place, here);
        let pooled = run(false, move || std::thread::current().id()).await.expect("run");
        assert_ne!(pooled, here);
    }
}
