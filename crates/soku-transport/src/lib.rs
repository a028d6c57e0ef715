//! soku-transport
