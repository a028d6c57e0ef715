//! Rendering events for people (progress meter, summary) and for programs (JSON lines).
//! Every line for people is made [`visible`] first: names and the peer's messages
//! never reach the terminal as control characters.

mod json;
mod progress;
mod silence;
pub mod unfinished;
mod units;
mod visible;

pub use json::{error_line, ssh_line, JsonLines};
pub use progress::ProgressMeter;
pub use silence::SilenceWatch;
pub use units::human_bytes;
pub use visible::{say, visible, visible_bytes};

/// Whether the command writes JSON lines for programs (`--json`): its final error is
/// then a JSON object too ([`crate::exit::report`]).
static JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The command writes JSON lines (`--json`).
pub fn set_json() {
    JSON.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether the command writes JSON lines.
pub fn json() -> bool {
    JSON.load(std::sync::atomic::Ordering::Relaxed)
}
