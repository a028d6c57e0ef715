//! soku's congestion controller for quinn, as a pure state machine.
//!
//! [`SokuCc`] is a model-based controller in the spirit of BBR
//! ([draft-cardwell-iccrg-bbr-congestion-control], "BBR: Congestion-Based Congestion
//! Control", Cardwell et al., ACM Queue 2016). It steers by a model of the path (the
//! bottleneck bandwidth and the round-trip propagation time) instead of by loss, so
//! random loss (a lossy radio hop, a dirty fibre, an overloaded middlebox) does not cut
//! the rate the way CUBIC ([RFC 9438]) and NewReno ([RFC 9002] §7) cut it, which is the
//! failure that sank hscp. Real congestion still slows it down: a round that loses a
//! large share of its packets lowers an upper bound on data in flight (a simplified
//! form of BBRv2's `inflight_hi`), loss that comes only when a shallow queue is full
//! lowers it as CUBIC would, and competing soku flows converge to a fair share.
//!
//! # Layout
//! - [`config`]: [`SokuCcConfig`], the tunables.
//! - `factory`: the [`ControllerFactory`] that quinn calls once per connection.
//! - [`hint`]: what the application learns only once the endpoint exists (a path an
//!   earlier copy measured, background mode), handed to the connection's controller.
//! - [`filters`]: windowed max/min filters (Kathleen Nichols' three-sample algorithm,
//!   as in BBR), used for the bandwidth and RTT estimates.
//! - [`delivery`]: round counting by packet number and per-round delivery-rate and
//!   loss-rate samples, built only from what quinn reports.
//! - [`startup_delay`]: the RTT rise that ends startup before a shallow buffer
//!   overflows (HyStart++'s signal).
//! - [`policer`]: a policer told by its flat delivery rate under heavy loss (BBRv1's
//!   long-term bandwidth sampling), tested by sending at that rate; loss that comes
//!   with a queue is never a policer's.
//! - [`queue_loss`]: a shallow buffer's overflow told from random loss by when it
//!   comes: the share lost at the top of the RTT range against the share lost below
//!   it (the Spike classifier, compared as two binomial shares).
//! - [`resume`]: careful resume (RFC 9959): a connection on a path an earlier copy
//!   measured jumps to half its bandwidth-delay product, and retreats if the path
//!   does not carry it.
//! - [`nice`]: whether a shallow queue stands above a tenth of its depth for most of
//!   a round (TCP Nice), which a background flow yields to between the queue's
//!   overflows.
//! - [`base_delay`]: the smallest RTT of ten minutes (RFC 6817's base delay history),
//!   seeded by an earlier copy's: what a background flow measures other flows' queues
//!   against.
//! - [`shared`]: the min RTT that concurrent flows on one path share (RFC 9040
//!   ensemble sharing), so a flow that starts or probes beside others does not take
//!   their queue for the path.
//! - [`ensemble`]: the shares of concurrent flows on one path, kept close: while a
//!   queue stands, no flow keeps more than 5 % above the others' mean in flight.
//! - [`model`]: the state machine (startup, drain, probe-bw, probe-rtt) and the
//!   [`Controller`] implementation.
//!
//! # Why the window is the only lever
//! quinn paces from the congestion window: its token bucket refills at
//! `1.25 x window / smoothed_rtt` (quinn-proto `connection/pacing.rs`), and a controller
//! cannot set a pacing rate of its own. BBR's pacing gains are therefore expressed as
//! window gains here: the window is `gain x bandwidth x min_rtt`, with a steady gain of
//! 1.25 (a small standing queue that keeps the link busy while acks arrive unevenly)
//! instead of BBR's cwnd gain of 2 (which, without an independent pacing rate, would
//! keep a full bandwidth-delay product queued at the bottleneck). On top come two of
//! quinn's pacer bursts (2 ms at the estimated rate, 10 to 256 packets) and BBR's
//! ack-aggregation estimate (`extra_acked`: data acknowledged in a clump beyond what the
//! bandwidth explains, max over ten rounds, at most 100 ms of it), so acks that arrive
//! in clumps (delayed and stretched acks, Wi-Fi, GRO, a peer descheduled on a loaded
//! host) do not stall the sender when the min RTT is far below the typical RTT.
//! See [`model`] for the phases and [`SokuCcConfig`] for the numbers.
//!
//! The controller takes its RTT samples from `now - sent` of each acknowledged packet,
//! not from quinn's smoothed estimator, so it needs no clock and no I/O: every input
//! arrives through the [`Controller`] methods with an explicit `now`.
//!
//! [draft-cardwell-iccrg-bbr-congestion-control]: https://datatracker.ietf.org/doc/draft-cardwell-iccrg-bbr-congestion-control/
//! [RFC 9438]: https://www.rfc-editor.org/rfc/rfc9438
//! [RFC 9002]: https://www.rfc-editor.org/rfc/rfc9002
//! [`Controller`]: quinn_proto::congestion::Controller
//! [`ControllerFactory`]: quinn_proto::congestion::ControllerFactory

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod base_delay;
mod coexist;
pub mod config;
pub mod delivery;
pub mod ensemble;
mod factory;
pub mod filters;
pub mod hint;
pub mod model;
pub mod nice;
pub mod policer;
pub mod queue_loss;
pub mod rate_loss;
pub mod resume;
pub mod rtt_top;
pub mod shared;
pub mod stall;
pub mod startup_delay;

pub use config::SokuCcConfig;
pub use ensemble::ShareRecord;
pub use hint::{ConnectionHint, HintSlot, RememberedPath};
pub use model::{Mode, SokuCc};
pub use shared::{BoardSlot, MemoryBoard, MinRttRecord, PathBoard};
