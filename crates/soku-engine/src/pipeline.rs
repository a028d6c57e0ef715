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
//! chunk it starts, and every 20 ms while the window holds it back (`send.rs`,
//! `WINDOW_RECHECK`), so it stays ahead of the growth.

/// Congestion windows of chunk bytes kept ahead.
const WINDOWS_AHEAD: u64 = 4;

/// Bytes kept ahead whatever the window: chunks read in parallel from disk, and small
/// files, whose many short chunks finish a round trip after they are sent.
pub const FLOOR: u64 = 8 << 20;

/// The share of packets lost from which a path counts as lossy (below).
const LOSSY: f64 = 0.05;

/// On a lossy path a 1 MiB chunk (some 800 packets) is acknowledged only once the last
/// of its lost packets got through, after several rounds of loss detection and resend
/// (about four at 10 %, each up to two round trips when a probe timeout finds a lost
/// tail: RFC 9002, section 6.2): chunks waiting for resends hold most of what is kept
/// ahead. At 10 and 15 % random loss on 100 Mbit/s x 100 ms, four windows within an
/// 8 MiB floor left the sender with less to send than its window allowed in 13-25 % of
/// round trips; twice both, 5 % or fewer (`lab/2026-11-29-flow-blocked`).
const LOSSY_FACTOR: u64 = 2;

/// The bytes of chunks to keep in flight: [`WINDOWS_AHEAD`] times the link's congestion
/// `window` when it tells one, within [`FLOOR`] and `cap` (the link's budget); twice as
/// many windows and twice the floor where a share `loss` of the packets sent is lost
/// that makes the path lossy.
pub fn bytes_ahead(window: Option<u64>, loss: Option<f64>, cap: u64) -> u64 {
    let factor = if loss.is_some_and(|loss| loss >= LOSSY) { LOSSY_FACTOR } else { 1 };
    match window {
        Some(window) => {
            window.saturating_mul(WINDOWS_AHEAD * factor).clamp((FLOOR * factor).min(cap), cap)
        }
        None => cap,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: u64 = 48 << 20;

    #[test]
    fn a_link_without_a_window_keeps_its_whole_budget() {
        assert_eq!(bytes_ahead(None, None, CAP), CAP);
    }

    #[test]
    fn a_small_window_keeps_the_floor_and_a_large_one_its_multiple_up_to_the_budget() {
        // 100 Mbit/s x 50 ms: a window of about 0.8 MB.
        assert_eq!(bytes_ahead(Some(800_000), None, CAP), FLOOR);
        // 100 Mbit/s x 200 ms: about 3 MB.
        assert_eq!(bytes_ahead(Some(3_000_000), Some(0.01), CAP), 12_000_000);
        // 1 Gbit/s x 300 ms: 37.5 MB and more.
        assert_eq!(bytes_ahead(Some(40_000_000), None, CAP), CAP);
        assert_eq!(bytes_ahead(Some(u64::MAX), None, CAP), CAP);
    }

    #[test]
    fn a_lossy_path_keeps_twice_as_much_ahead() {
        // 100 Mbit/s x 100 ms at 10 % loss: a window of about 1.2 MB.
        assert_eq!(bytes_ahead(Some(1_200_000), Some(0.10), CAP), 2 * FLOOR);
        assert_eq!(bytes_ahead(Some(3_000_000), Some(0.10), CAP), 24_000_000);
        assert_eq!(bytes_ahead(Some(1_200_000), Some(0.02), CAP), FLOOR);
        assert_eq!(bytes_ahead(Some(40_000_000), Some(0.2), CAP), CAP);
    }

    #[test]
    fn a_budget_below_the_floor_still_bounds() {
        assert_eq!(bytes_ahead(Some(0), Some(0.2), 4 << 20), 4 << 20);
        assert_eq!(bytes_ahead(None, None, 4 << 20), 4 << 20);
    }
}
