//! What the application tells a connection's controller that it may learn only after
//! the endpoint (and so the controller factory) exists: the server reads the client's
//! hello, with the client's path memory and whether the copy runs in the background,
//! while its endpoint is already listening.

use std::fmt;
use std::sync::{Arc, OnceLock};

use std::time::Duration;

/// What an earlier copy learned about a path, in the direction the data will flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RememberedPath {
    /// The rate the copy delivered, in bits per second.
    pub bandwidth_bps: u64,
    /// The smallest RTT it saw.
    pub min_rtt: Duration,
}

impl RememberedPath {
    /// Half the remembered bandwidth-delay product, in bytes: the jump.
    pub fn jump_window(&self) -> u64 {
        let bdp = u128::from(self.bandwidth_bps / 8) * self.min_rtt.as_nanos() / 1_000_000_000;
        u64::try_from(bdp / 2).unwrap_or(u64::MAX)
    }

    /// Whether `rtt`, measured on the new connection, says it is the same path: at
    /// least half and less than ten times the remembered min RTT.
    pub fn confirms(&self, rtt: Duration) -> bool {
        rtt >= self.min_rtt / 2 && rtt < self.min_rtt.saturating_mul(10)
    }
}

/// The hint itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionHint {
    /// What an earlier copy learned about this path, for careful resume
    /// ([`crate::resume`]).
    pub remembered: Option<RememberedPath>,
    /// Yield to other traffic ([`SokuCcConfig::in_background`](crate::SokuCcConfig::in_background)).
    pub background: bool,
}

/// A slot for a [`ConnectionHint`] that every controller built from one
/// [`SokuCcConfig`](crate::SokuCcConfig) shares. A controller reads it when quinn builds
/// it (background) and at its first RTT sample (careful resume); a server fills it
/// before it accepts the connection.
#[derive(Clone, Default)]
pub struct HintSlot(Arc<OnceLock<ConnectionHint>>);

impl HintSlot {
    /// An empty slot.
    pub fn new() -> Self {
        Self::default()
    }

    /// A slot holding `hint`.
    pub fn with(hint: ConnectionHint) -> Self {
        let slot = Self::new();
        slot.set(hint);
        slot
    }

    /// Fills the slot; false if it was already filled (the first value stays).
    pub fn set(&self, hint: ConnectionHint) -> bool {
        self.0.set(hint).is_ok()
    }

    /// What the slot holds.
    pub fn get(&self) -> Option<ConnectionHint> {
        self.0.get().copied()
    }

    /// The remembered path, if the slot holds one.
    pub fn remembered(&self) -> Option<RememberedPath> {
        self.get().and_then(|h| h.remembered)
    }

    /// Whether the slot asks for background mode.
    pub fn background(&self) -> bool {
        self.get().is_some_and(|h| h.background)
    }
}

impl fmt::Debug for HintSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HintSlot").field(&self.get()).finish()
    }
}

impl PartialEq for HintSlot {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for HintSlot {}
