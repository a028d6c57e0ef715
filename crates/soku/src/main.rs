//! The `soku` command: everything it does lives in the library (`lib.rs`).

/// mimalloc instead of glibc malloc: every chunk moves through 1 MiB buffers, which
/// glibc serves from fresh mmaps or trimmed arenas, so each one was page-faulted and
/// zeroed again (~5 % of the loopback profile); mimalloc keeps them warm per thread.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    soku::main()
}
