//! How many bytes of chunks a sender keeps in flight: read, handed to the link and not
//! yet acknowledged.
//!
//! The link's budget ([`soku_transport::BULK_BUDGET`], 48 MiB) is sized for the longest
//! fattest path, 1 Gbit/s x 300 ms. On a slower or shorter path most of it is chunks
//! waiting in the transport's send buffer, seconds before their turn: 80 MiB of client
//! memory at 100 Mbit/s x 50 ms, where the path holds 0.6 MB, and 48 fresh 1 MiB buffers
//! read at the start, each zeroed by the kernel on first touch (10 % of the client's
//! samples in a profile of that copy). Keeping a few windows instead took the client
//! to 36 MiB and 8 % less CPU there, at the same speed
//! (`lab/2026-11-26-sender-pipeline`).
//!
//! Where the link tells its congestion window (QUIC), the sender keeps four windows
//! ahead: one on the wire, about one more in chunks that wait for a resent
//! packet (at 1 % loss nearly every 1 MiB chunk has one, and it is acknowledged a round
//! trip or two after its last byte was first sent), and the chunks being read. The
//! window doubles every round in startup, and the sender looks again before every
//! chunk it starts, so it stays ahead of the growth.

/// Congestion windows of chunk bytes kept ahead.
const WINDOWS_AHEAD: u64 = 4;

/// Bytes kept ahead whatever the window: chunks read in parallel from disk, and small
/// files, whose many short chunks finish a round trip after they are sent.
pub const FLOOR: u64 = 8 << 20;

/// The bytes of chunks to keep in flight: [`WINDOWS_AHEAD`] times the link's congestion
/// `window` when it tells one, within [`FLOOR`] and `cap` (the link's budget).
pub fn bytes_ahead(window: Option<u64>, cap: u64) -> u64 {
    match window {
        Some(window) => window.saturating_mul(WINDOWS_AHEAD).clamp(FLOOR.min(cap), cap),
        None => cap,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: u64 = 48 << 20;

    #[test]
    fn a_link_without_a_window_keeps_its_whole_budget() {
        assert_eq!(bytes_ahead(None, CAP), CAP);
    }

    #[test]
    fn a_small_window_keeps_the_floor_and_a_large_one_its_multiple_up_to_the_budget() {
        // 100 Mbit/s x 50 ms: a window of about 0.8 MB.
        assert_eq!(bytes_ahead(Some(800_000), CAP), FLOOR);
        // 100 Mbit/s x 200 ms: about 3 MB.
        assert_eq!(bytes_ahead(Some(3_000_000), CAP), 12_000_000);
        // 1 Gbit/s x 300 ms: 37.5 MB and more.
        assert_eq!(bytes_ahead(Some(40_000_000), CAP), CAP);
        assert_eq!(bytes_ahead(Some(u64::MAX), CAP), CAP);
    }

    #[test]
    fn a_budget_below_the_floor_still_bounds() {
        assert_eq!(bytes_ahead(Some(0), 4 << 20), 4 << 20);
        assert_eq!(bytes_ahead(None, 4 << 20), 4 << 20);
    }
}
