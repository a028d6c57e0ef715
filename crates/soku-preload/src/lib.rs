//! soku-preload
