//! Chunks that came before their file was ready to take them, waiting each on its own
//! file.
//!
//! Over QUIC a file's chunks travel on streams of their own and may arrive before the
//! file's entry, or before its storage is made (`Shared::prepare_file`, up to 32 files
//! at once). They used to wait on one signal that every file's readiness raised, so
//! each file made ready woke every chunk waiting for any file: a copy of many small
//! files, with hundreds of chunks waiting, spent its CPU waking tasks that went back to
//! sleep (`lab/2026-11-27-small-files-lan`). Now a file made ready wakes its
//! own chunks only; the end of the manifest wakes all of them (a chunk for a file that
//! will never come is then the sender's error).

use std::collections::HashMap;
use std::pin::pin;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::mutex::lock;

/// The waits, by file id.
#[derive(Debug, Default)]
pub(super) struct Arrivals {
    waiting: Mutex<HashMap<u32, Arc<Notify>>>,
}

impl Arrivals {
    /// Waits until `file` may have changed, unless `still_waiting` (checked once the
    /// wait is in place, so that no wake between the check and the wait is missed)
    /// says it is ready already.
    pub(super) async fn wait_for(&self, file: u32, still_waiting: impl FnOnce() -> bool) {
        let notify = lock(&self.waiting).entry(file).or_default().clone();
        let mut notified = pin!(notify.notified());
        notified.as_mut().enable();
        if still_waiting() {
            notified.await;
        }
    }

    /// `file` may take its chunks now (or has failed): wakes its waiting chunks.
    pub(super) fn ready(&self, file: u32) {
        if let Some(notify) = lock(&self.waiting).remove(&file) {
            notify.notify_waiters();
        }
    }

    /// Wakes every waiting chunk (the manifest ended).
    pub(super) fn all_ready(&self) {
        for (_, notify) in lock(&self.waiting).drain() {
            notify.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_file_made_ready_wakes_its_own_chunks_only() {
        let arrivals = Arc::new(Arrivals::default());
        let ready = [Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false))];
        // How often each file's chunk looked at its file: once per wake.
        let looks = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
        let mut waits = Vec::new();
        for file in [0u32, 1] {
            let (arrivals, ready) = (arrivals.clone(), ready[file as usize].clone());
            let looked = looks[file as usize].clone();
            waits.push(tokio::spawn(async move {
                while !ready.load(Ordering::SeqCst) {
                    let not_yet = || {
                        looked.fetch_add(1, Ordering::SeqCst);
                        !ready.load(Ordering::SeqCst)
                    };
                    arrivals.wait_for(file, not_yet).await;
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(looks[0].load(Ordering::SeqCst), 1, "waiting");
        ready[1].store(true, Ordering::SeqCst);
        arrivals.ready(1);
        tokio::time::timeout(Duration::from_secs(5), &mut waits[1])
            .await
            .expect("woken")
            .expect("task");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waits[0].is_finished());
        assert_eq!(looks[0].load(Ordering::SeqCst), 1, "file 0's chunk was woken by file 1");
        ready[0].store(true, Ordering::SeqCst);
        arrivals.all_ready();
        tokio::time::timeout(Duration::from_secs(5), &mut waits[0])
            .await
            .expect("woken")
            .expect("task");
    }

    #[tokio::test]
    async fn a_wake_between_the_check_and_the_wait_is_not_missed() {
        let arrivals = Arrivals::default();
        // The file becomes ready (and is told so) after the wait is in place but before
        // the check that decides to wait: the check sees it, no wait.
        let waited = tokio::time::timeout(
            Duration::from_secs(5),
            arrivals.wait_for(7, || {
                arrivals.ready(7);
                true
            }),
        )
        .await;
        assert!(waited.is_ok(), "the wake came after the wait was in place: it must count");
    }
}
