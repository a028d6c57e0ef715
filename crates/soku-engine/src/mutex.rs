//! Mutexes shared by a copy's tasks, locked so that one task's panic does not take the
//! others down with a poisoned lock.

/// Locks `m`, also after a panic elsewhere poisoned it: the guarded data (counters,
/// tables) stays consistent between statements, and the copy reports the panic's
/// task failure itself.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
