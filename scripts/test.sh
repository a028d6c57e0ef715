#!/usr/bin/env bash
# Runs every check and test soku has, installing what they need first.
# Needs root (or sudo) for apt-get and for the network-namespace tests.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
# Each step says when it starts, so that a slow CI run shows where its time went.
step() { echo "== $1 (at $SECONDS s)"; }

need_pkgs=()
# chromium-headless-shell: the report's browser test (crates/soku/tests/e2e/report_e2e.rs)
# fails without it, so that it never silently skips here; btrfs-progs: the quota test
# (crates/soku/tests/e2e/failure_lines_e2e.rs) makes a small btrfs with a quota group;
# python3: scripts/import-circles.py; script: the host-key test gives ssh a terminal;
# fpart and parallel: the sharded sync (crates/soku/tests/e2e/sync_e2e.rs, docs/sharding.md);
# tmux and sftp: soku sftp's terminal test and its side-by-side run (sftp_e2e.rs).
for pair in git:git sshd:openssh-server ssh:openssh-client rsync:rsync iperf3:iperf3 ip:iproute2 tc:iproute2 \
    chromium-headless-shell:chromium-headless-shell mkfs.btrfs:btrfs-progs python3:python3 \
    script:bsdutils fpart:fpart parallel:parallel tmux:tmux sftp:openssh-client; do
    cmd=${pair%%:*}; pkg=${pair#*:}
    if ! command -v "$cmd" >/dev/null 2>&1 && ! [ -x "/usr/sbin/$cmd" ]; then need_pkgs+=("$pkg"); fi
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
    step "installing: ${need_pkgs[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi
if command -v rustup >/dev/null 2>&1; then
    rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

step "cargo fmt --check"
cargo fmt --all -- --check
step "import circles (no file of a crate reaches itself through its use lines)"
python3 scripts/import-circles.py --self-test
python3 scripts/import-circles.py
step "cargo clippy"
cargo clippy --locked --workspace --all-targets -- -D warnings
step "cargo build (release, used by the end-to-end tests and the quick bench)"
cargo build --locked --release --workspace
step "cargo test"
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
SOKU_BIN="$target_dir/release/soku" SOKU_PRELOAD_LIB="$target_dir/release/libsoku_preload.so" \
    SOKU_PRELOAD_PROBE="$target_dir/release/preload-probe" \
    cargo test --locked --release --workspace -- --test-threads=2
step "cross builds and checks (macOS, Windows)"
./scripts/cross-check.sh
step "the README's first command"
cargo run --locked --release -p soku -- demo
step "quick benchmark (sanity only: every copy verified, no speed asserted)"
# One RTT of the quick matrix: every tool and carrier still runs, in half the time.
"$target_dir/release/soku-bench" --quick --rtts 50 --soku "$target_dir/release/soku"
step "all tests passed"
