//! soku-netem
