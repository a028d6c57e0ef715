#!/usr/bin/env bash
# Builds and checks soku for the platforms beside Linux, from a Linux machine: macOS
# (x86_64-apple-darwin, aarch64-apple-darwin) and Windows (x86_64-pc-windows-gnu).
# Installs what it needs, as scripts/test.sh does.
#
# - The C parts (ring, blake3, zstd) are compiled for macOS by `zig cc` through
#   cargo-zigbuild: Debian has no Apple SDK or linker, and zig carries macOS's libc
#   headers. For Windows, Debian's mingw-w64, the toolchain Rust's windows-gnu target is
#   built for, compiles and links them, and Wine runs the tests.
# - Checked: clippy with warnings as errors for each target, on the crates that build
#   there today (below); the portable crates' tests run on Windows under Wine. What is still
#   Linux-only, and why, is the README's platforms table.
#
#   scripts/cross-check.sh          everything
#   scripts/cross-check.sh builds   the checks and builds: CPU only, nothing timed
#   scripts/cross-check.sh runs     the Windows tests and copies under Wine (after
#                                   `builds`; the copies need the release e2e binary)
#
# scripts/test.sh runs `builds` beside the Linux tests, whose copies leave the CPU idle
# for much of their time, and `runs` after them: some tests cut a copy off after a
# fixed time, which a loaded machine would make flaky.
set -euo pipefail
cd "$(dirname "$0")/.."
phase=${1:-all}
case $phase in
    all | builds | runs) ;;
    *) echo "usage: scripts/cross-check.sh [builds|runs]" >&2; exit 2 ;;
esac

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# The crates every target builds (Windows: the engine's library and its tests too), and
# those whose tests Wine runs: the unit tests (`--lib`; soku-cc's path-simulator suites,
# the same arithmetic on every platform, took over a minute more under Wine's debug
# build and stay on Linux), and the engine's copies over in-memory links, on real files.
portable=(-p soku-proto -p soku-cc -p soku-transport -p soku-engine --lib --tests)
# The Windows client: the binary, with the code its unit tests add. `soku serve`, the
# relays and `soku sftp` are Unix-only (crates/soku/src/unix_only.rs).
client=(-p soku --lib --bins --profile test)
# What builds on the other Unix systems too (macOS): the engine, the relays and the
# binary, with the code their unit tests add (`--profile test`). The end-to-end tests
# run in Linux network namespaces and stay on Linux.
unix=(-p soku-proto -p soku-cc -p soku-transport -p soku-engine -p soku-relay -p soku
    --lib --bins --profile test)
tested=(-p soku-proto -p soku-cc -p soku-engine --lib --test memory)
targets=(x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-gnu)

step() { echo "== $1 ($((SECONDS - started)) s so far)"; }
started=$SECONDS
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
export WINEDEBUG=-all WINEPREFIX=${WINEPREFIX:-$PWD/target/wine-prefix}
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine

# The checks and builds: what is installed first, clippy for each target, then the
# Windows tests and binary compiled.
builds() {
    need=()
    command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(mingw-w64)
    command -v wine >/dev/null 2>&1 || need+=(wine64)
    command -v pip3 >/dev/null 2>&1 || need+=(python3-pip)
    if [ ${#need[@]} -gt 0 ]; then
        step "installing: ${need[*]}"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    fi
    # Both from PyPI as built wheels: cargo-zigbuild's own wheel saves compiling it.
    pips=()
    python3 -c 'import ziglang' 2>/dev/null || pips+=(ziglang)
    command -v cargo-zigbuild >/dev/null 2>&1 || pips+=(cargo-zigbuild)
    if [ ${#pips[@]} -gt 0 ]; then
        step "installing from PyPI: ${pips[*]}"
        pip3 install -q --break-system-packages "${pips[@]}" 2>/dev/null || pip3 install -q "${pips[@]}"
    fi
    installed=$(rustup target list --installed)
    for target in "${targets[@]}"; do
        grep -qx "$target" <<<"$installed" || rustup target add "$target" >/dev/null
    done

    for target in "${targets[@]}"; do
        case $target in
            *-apple-darwin)
                step "clippy for $target: ${unix[*]}"
                cargo-zigbuild clippy --locked --target "$target" "${unix[@]}" -- -D warnings
                ;;
            *)
                step "clippy for $target: ${portable[*]}; ${client[*]}"
                cargo clippy --locked --target "$target" "${portable[@]}" -- -D warnings
                cargo clippy --locked --target "$target" "${client[@]}" -- -D warnings
                ;;
        esac
    done

    step "the Windows tests and binary, and its ssh shim"
    cargo test --locked --target x86_64-pc-windows-gnu "${tested[@]}" --no-run
    cargo build --locked --target x86_64-pc-windows-gnu -p soku --bin soku
    mkdir -p "$target_dir/wine"
    rustc --edition 2021 --target x86_64-pc-windows-gnu -O scripts/wine/ssh_shim.rs \
        -o "$target_dir/wine/ssh.exe"
    # Wine's prefix, with the one DLL it lacks that Rust's std calls.
    if [ ! -f "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" ]; then
        wineboot --init >/dev/null 2>&1 || true
        x86_64-w64-mingw32-gcc -O2 -shared -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
            scripts/wine/bcryptprimitives.c scripts/wine/bcryptprimitives.def -ladvapi32
    fi
    step "cross builds and checks passed"
}

# What runs under Wine: the portable crates' tests, then the Windows client's copies.
runs() {
    step "tests for x86_64-pc-windows-gnu under Wine: ${tested[*]}"
    cargo test --locked --target x86_64-pc-windows-gnu "${tested[@]}"

    # The Windows client under Wine copies both ways with the Linux `soku serve` through
    # sshd, and refuses names that differ only in case (crates/soku/tests/e2e/wine_e2e.rs).
    # Wine cannot give a Linux ssh the Windows build's pipes, so its ssh is a Windows shim
    # that carries them over loopback TCP to the real one (scripts/wine/ssh_shim.rs).
    step "the Windows build copies through sshd under Wine"
    SOKU_WINDOWS_EXE="$target_dir/x86_64-pc-windows-gnu/debug/soku.exe" \
        SOKU_WINE_SSH="$target_dir/wine/ssh.exe" \
        cargo test --locked --release --workspace --test e2e -- --ignored wine_e2e::
    step "cross runs passed"
}

case $phase in
    builds) builds ;;
    runs) runs ;;
    all) builds; runs ;;
esac
