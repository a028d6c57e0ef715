//! soku-cc
