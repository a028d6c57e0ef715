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
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
step "cargo test --no-run (the test binaries)"
cargo test --locked --release --workspace --no-run
# The end-to-end tests wait on logins, stall limits and outages for much of their time,
# with a core or more idle: the cross builds (CPU alone, no network) run beside them at
# the lowest priority, so the tests keep the CPU they ask for. Their output goes to a
# file, shown when they end.
step "cross builds and checks (macOS, Windows), beside the tests; Wine runs after them"
cross_log="$target_dir/cross-check.log"
nice -n 19 ./scripts/cross-check.sh builds >"$cross_log" 2>&1 &
cross=$!
step "cargo test"
tests_status=0
SOKU_BIN="$target_dir/release/soku" SOKU_PRELOAD_LIB="$target_dir/release/libsoku_preload.so" \
    SOKU_PRELOAD_PROBE="$target_dir/release/preload-probe" \
    cargo test --locked --release --workspace -- --test-threads=2 || tests_status=$?
cross_status=0
wait "$cross" || cross_status=$?
step "the cross builds' output"
cat "$cross_log"
if [ "$tests_status" -ne 0 ] || [ "$cross_status" -ne 0 ]; then
    echo "failed: cargo test exited $tests_status, scripts/cross-check.sh builds $cross_status" >&2
    exit 1
fi
./scripts/cross-check.sh runs
step "the README's first command"
cargo run --locked --release -p soku -- demo
step "quick benchmark (sanity only: every copy verified, no speed asserted)"
# One RTT of the quick matrix: every tool and carrier still runs, in half the time.
"$target_dir/release/soku-bench" --quick --rtts 50 --soku "$target_dir/release/soku"
step "all tests passed"
