//! soku's end-to-end tests, all in one test binary: each `*_e2e.rs` (and the security,
//! hostile and crash suites) is a module of it, and `common/` holds what they share.
//! One binary links the whole dependency tree once, however many files there are.
//!
//! A test's name starts with its module's, so a filter selects one file or one test:
//! `cargo test --release -p soku --test e2e copy_e2e::` (one file),
//! `cargo test --release -p soku --test e2e copy_e2e::upload_one_file` (one test).
//!
//! Every test starts its own sshd in its own temp dir (`common::Env`), so tests of any
//! modules run side by side; nothing here changes the process's environment, working
//! directory or limits (those go to the child processes' `Command`s).

mod common;

mod between_remotes_e2e;
mod bootstrap_e2e;
mod config_e2e;
mod copy_e2e;
mod crash_suite;
mod diagnose_e2e;
mod errors_e2e;
mod failure_lines_e2e;
mod fast_start_e2e;
mod fences_e2e;
mod first_hour_e2e;
mod hostile_client;
mod hostile_client_quic;
mod hostile_server;
mod many_e2e;
mod names_e2e;
mod open_files_e2e;
mod outage_e2e;
mod remote_soku_e2e;
mod report_e2e;
mod resume_e2e;
mod scp_options_e2e;
mod security;
mod sftp_e2e;
mod shared_directory_e2e;
mod shared_login_e2e;
mod sync_e2e;
mod target_errors_e2e;
mod transport_e2e;
mod tunnel_e2e;
mod wine_e2e;
