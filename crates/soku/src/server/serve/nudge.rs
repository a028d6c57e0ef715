//! A kept server's name, and the nudge a new session sends the kept servers of its user
//! before an upload that may find their jobs' partial files (`kept.rs`).

/// The process's name (`/proc/PID/comm`) of a kept server.
pub const PROCESS_NAME: &str = "soku-kept";

/// Tells this user's kept servers that a session is about to take partial files: each
/// ends the jobs whose client does not answer at once (see `silent_client.rs`).
/// Processes are found by name and owner in `/proc`; one that is gone meanwhile, or not
/// ours, is left alone.
pub fn nudge_silent_jobs() {
    use rustix::process::{kill_process, Pid, Signal};
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let Ok(processes) = std::fs::read_dir("/proc") else { return };
    for entry in processes.flatten() {
        let pid = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok());
        let Some(pid) = pid.and_then(Pid::from_raw) else { continue };
        if !entry.metadata().is_ok_and(|md| md.uid() == me) {
            continue;
        }
        let name = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if name.trim_end() == PROCESS_NAME {
            let _ = kill_process(pid, Signal::USR1);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};

    use std::time::Duration;

    use super::*;

    /// A shell that takes the kept server's name, then waits: SIGUSR1's default action
    /// ends it, which is how the test sees the nudge arrive.
    fn named(name: &str) -> std::process::Child {
        let script = format!("printf %s {name} > /proc/$$/comm; sleep 20; true");
        let child = Command::new("bash").args(["-c", &script]).stdin(Stdio::null()).spawn();
        let mut child = child.expect("bash");
        let comm = format!("/proc/{}/comm", child.id());
        for _ in 0..200 {
            if std::fs::read_to_string(&comm).is_ok_and(|c| c.trim_end() == name) {
                return child;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the shell did not take the name {name}");
    }

    #[test]
    fn a_nudge_reaches_the_processes_named_as_kept_servers_and_no_other() {
        let mut kept = named(PROCESS_NAME);
        let mut other = named("soku-other");
        nudge_silent_jobs();
        let status = kept.wait().expect("wait");
        assert_eq!(status.signal(), Some(libc::SIGUSR1), "{status:?}");
        std::thread::sleep(Duration::from_millis(200));
        assert!(other.try_wait().expect("try_wait").is_none(), "another process was signalled");
        let _ = other.kill();
        let _ = other.wait();
    }
}
