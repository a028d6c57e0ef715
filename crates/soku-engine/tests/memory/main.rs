//! The whole engine, both roles, over in-memory links: no sshd, no network, no root.
//! Real files on disk in a temporary directory; the links are the production stream
//! link over an in-memory pipe, or a QUIC-like pair whose chunks may overtake their
//! file's entry.

mod bridge;
mod copies;
mod failures;
mod harness;
mod resume;
mod small;
mod sync;
