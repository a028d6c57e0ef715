//! The side of [`super`] for Windows, where only the client runs.

use std::fs::{File, Metadata, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// No user ids here: the per-user files live under the user's own profile.
pub(crate) fn user_id() -> u32 {
    0
}

/// Windows' OpenSSH (`ssh.exe`) has no `ControlMaster`: each copy logs in.
pub(crate) const SSH_SHARES_LOGINS: bool = false;

/// No root here: the bits only root may keep (`--keep-special-bits`) are Unix's.
pub(crate) fn is_root() -> bool {
    false
}

/// Where soku keeps what lasts between copies: `%LOCALAPPDATA%` (the user's own, not
/// roamed), else `%USERPROFILE%\AppData\Local`.
pub(crate) fn cache_base() -> Option<PathBuf> {
    env_dir("LOCALAPPDATA")
        .or_else(|| env_dir("USERPROFILE").map(|home| home.join("AppData").join("Local")))
}

/// The same place: Windows has no runtime directory that empties at logout.
pub(crate) fn runtime_base() -> Option<PathBuf> {
    cache_base()
}

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Makes `dir` and its parents. Under the user's profile they inherit its access list,
/// which lets only the user (and administrators) in.
pub(crate) fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// A directory not reached through a link: the access list, not a mode, keeps others
/// out here ([`make_private_dir`]).
pub(crate) fn only_mine(md: &Metadata) -> bool {
    !md.file_type().is_symlink()
}

/// Options for a file of this user's; its directory's access list is inherited.
pub(crate) fn private_file() -> OpenOptions {
    OpenOptions::new()
}

/// No network namespaces here.
pub(crate) fn netns_id() -> u64 {
    0
}

/// A clock every process reads alike: the system's tick count
/// (`GetTickCount64`, milliseconds since boot), which does not jump with the wall clock.
#[allow(unsafe_code)]
pub(crate) fn shared_clock() -> Duration {
    // SAFETY: GetTickCount64 takes no arguments, touches no memory of ours and cannot
    // fail.
    let ms = unsafe { windows_sys::Win32::System::SystemInformation::GetTickCount64() };
    Duration::from_millis(ms)
}

/// CPU time (user and kernel, all threads) this process has used since it started
/// (`GetProcessTimes`); zero if Windows does not say.
#[allow(unsafe_code)]
pub(crate) fn process_cpu() -> Duration {
    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, GetProcessTimes};
    let zero = FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: the pseudo handle of this process needs no closing, and the four
    // pointers are to FILETIMEs that live across the call.
    let ok = unsafe {
        GetProcessTimes(GetCurrentProcess(), &mut created, &mut exited, &mut kernel, &mut user)
    };
    if ok == 0 {
        return Duration::ZERO;
    }
    // FILETIMEs count 100 ns intervals.
    let ticks = |t: FILETIME| (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime);
    Duration::from_nanos(ticks(kernel).saturating_add(ticks(user)).saturating_mul(100))
}

/// Opens a config file to read; Windows has no FIFOs to wait on at a file's name.
pub(crate) fn open_without_waiting(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

/// No FIFOs, devices or sockets at a file's name here.
pub(crate) fn special_kind(_kind: std::fs::FileType) -> Option<&'static str> {
    None
}

/// The user's Ctrl-C (the console's `CTRL_C_EVENT`), taken in place of its default
/// action.
pub(crate) struct Interrupts(tokio::signal::windows::CtrlC);

impl Interrupts {
    /// Takes Ctrl-C from now on.
    pub(crate) fn listen() -> std::io::Result<Interrupts> {
        tokio::signal::windows::ctrl_c().map(Interrupts)
    }

    /// The next Ctrl-C; `None` once none can come.
    pub(crate) async fn recv(&mut self) -> Option<()> {
        self.0.recv().await
    }
}

/// No transparent huge pages to turn off here.
pub(crate) fn no_huge_pages() {}
