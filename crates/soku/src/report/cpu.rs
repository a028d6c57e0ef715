//! This process's CPU time, for the report's CPU figures.

use std::time::Duration;

/// CPU time (user and system, all threads) this process has used since it started
/// (`crate::sys::process_cpu`); ssh, a child process, is not counted, as in the bench's
/// CPU figures (`bench/src/cpu.rs`).
pub fn process_cpu() -> Duration {
    crate::sys::process_cpu()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: a clock that does not count this process's work (or runs backwards).
    #[test]
    fn the_clock_counts_work() {
        let before = process_cpu();
        let mut x = 0u64;
        let until = std::time::Instant::now() + Duration::from_millis(30);
        while std::time::Instant::now() < until {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let used = process_cpu().saturating_sub(before);
        assert!(used >= Duration::from_millis(10), "{used:?}");
    }
}
