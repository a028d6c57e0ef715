//! Packets in flight: a preallocated buffer pool and the queue ordered by delivery time.
//!
//! Without reordering the model hands out non-decreasing delivery times, so a FIFO
//! (`VecDeque`) is the whole timer queue. Packets picked for reordering go to a small
//! binary heap beside it; the next due packet is the earlier of the two heads. Both
//! containers are allocated up front for the pool's capacity, so nothing allocates per
//! packet.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// A packet in flight: where its bytes are and when it is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// Delivery time (ns, the forwarding loop's clock).
    pub at: u64,
    /// Tie-breaker keeping heap order stable.
    pub seq: u64,
    /// Slot index in the [`Pool`].
    pub slot: u32,
    /// Packet length in bytes.
    pub len: u32,
}

/// Fixed-size packet buffers in one allocation, handed out LIFO (cache-warm).
#[derive(Debug)]
pub struct Pool {
    mem: Vec<u8>,
    slot_size: usize,
    free: Vec<u32>,
}

impl Pool {
    /// `slots` buffers of `slot_size` bytes. The memory is zero-initialised through the
    /// allocator, so pages no packet ever touches are never faulted in.
    pub fn new(slots: u32, slot_size: usize) -> Pool {
        Pool {
            mem: vec![0u8; slots as usize * slot_size],
            slot_size,
            free: (0..slots).rev().collect(),
        }
    }

    /// Total number of slots.
    pub fn capacity(&self) -> usize {
        self.mem.len() / self.slot_size.max(1)
    }

    /// Takes a free slot, if any.
    pub fn alloc(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Returns a slot to the pool.
    pub fn free(&mut self, slot: u32) {
        self.free.push(slot);
    }

    /// The whole buffer of `slot`.
    pub fn buf_mut(&mut self, slot: u32) -> &mut [u8] {
        let start = slot as usize * self.slot_size;
        &mut self.mem[start..start + self.slot_size]
    }

    /// The first `len` bytes of `slot`.
    pub fn data(&self, slot: u32, len: u32) -> &[u8] {
        let start = slot as usize * self.slot_size;
        &self.mem[start..start + (len as usize).min(self.slot_size)]
    }
}

/// Packets waiting for their delivery time.
#[derive(Debug)]
pub struct DelayLine {
    fifo: VecDeque<Entry>,
    held: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

impl DelayLine {
    /// Room for `capacity` packets without reallocating.
    pub fn with_capacity(capacity: usize) -> DelayLine {
        DelayLine {
            fifo: VecDeque::with_capacity(capacity),
            held: BinaryHeap::with_capacity(capacity),
            seq: 0,
        }
    }

    /// Adds a packet; `reordered` ones may be due before earlier FIFO entries.
    pub fn push(&mut self, at: u64, slot: u32, len: u32, reordered: bool) {
        self.seq += 1;
        let e = Entry { at, seq: self.seq, slot, len };
        if reordered {
            self.held.push(Reverse(e));
        } else {
            debug_assert!(self.fifo.back().is_none_or(|b| b.at <= at));
            self.fifo.push_back(e);
        }
    }

    /// Number of packets in flight.
    pub fn len(&self) -> usize {
        self.fifo.len() + self.held.len()
    }

    /// True if nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Earliest delivery time, if any packet is in flight.
    pub fn next_due(&self) -> Option<u64> {
        let f = self.fifo.front().map(|e| e.at);
        let h = self.held.peek().map(|e| e.0.at);
        match (f, h) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Removes and returns the earliest packet if it is due at `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<Entry> {
        let f = self.fifo.front().map(|e| e.at).filter(|&at| at <= now);
        let h = self.held.peek().map(|e| e.0.at).filter(|&at| at <= now);
        match (f, h) {
            (Some(a), Some(b)) if b < a => self.held.pop().map(|e| e.0),
            (Some(_), _) => self.fifo.pop_front(),
            (None, Some(_)) => self.held.pop().map(|e| e.0),
            (None, None) => None,
        }
    }

    /// Removes everything (used at shutdown to return slots).
    pub fn drain(&mut self) -> impl Iterator<Item = Entry> + '_ {
        self.fifo.drain(..).chain(self.held.drain().map(|e| e.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_and_held_merge_by_time() {
        let mut d = DelayLine::with_capacity(8);
        d.push(10, 0, 100, false);
        d.push(20, 1, 100, false);
        d.push(15, 2, 100, true);
        d.push(30, 3, 100, false);
        assert_eq!(d.next_due(), Some(10));
        assert!(d.pop_due(9).is_none());
        let order: Vec<u32> = std::iter::from_fn(|| d.pop_due(100)).map(|e| e.slot).collect();
        assert_eq!(order, vec![0, 2, 1, 3]);
        assert!(d.is_empty());
        assert_eq!(d.next_due(), None);
    }

    #[test]
    fn pool_hands_out_and_takes_back() {
        let mut p = Pool::new(2, 64);
        assert_eq!(p.capacity(), 2);
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        assert_ne!(a, b);
        assert!(p.alloc().is_none());
        p.buf_mut(a)[..3].copy_from_slice(b"abc");
        assert_eq!(p.data(a, 3), b"abc");
        p.free(a);
        assert_eq!(p.alloc(), Some(a));
    }
}
