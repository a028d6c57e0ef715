//! soku-proto
