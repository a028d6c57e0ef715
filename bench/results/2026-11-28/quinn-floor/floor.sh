#!/bin/bash
# Alternates, ROUNDS times: the quinn floor program (`bench/src/floor.rs`, `soku-floor`)
# at each amount of receiving work, then the bench's loopback CPU rows (soku and scp, 1 GiB)
# into tmpfs and into ext4. Writes floor.csv and the bench's own cpu.csv per round under OUT.
# Usage: floor.sh OUT ROUNDS   (from the repository's root, after
#   cargo build --release -p soku -p soku-bench)
set -euo pipefail
out=$1 rounds=$2
disk=${DISK:-/var/tmp}
mkdir -p "$out"
echo "round,work,target,mb_s,sender_cpu_s_per_gb,receiver_cpu_s_per_gb" > "$out/floor.csv"
floor() { # round work label [args...]
    local r=$1 w=$2 label=$3; shift 3
    local line
    # Fresh memory, as the bench gives each of its copies (docs/bench.md, "Loopback CPU
    # efficiency"): written and freed just before, so that no row pays the host's
    # first-touch cost for the target's pages and another does not.
    dd if=/dev/zero of=/dev/shm/quic-floor-warm bs=1M count=2048 status=none
    rm -f /dev/shm/quic-floor-warm
    line=$(target/release/soku-floor --work "$w" "$@")
    echo "$line" | sed -E "s/.*\(([0-9]+) MB\/s\): sender ([0-9.]+) .* receiver ([0-9.]+) .*/$r,$w,$label,\1,\2,\3/" >> "$out/floor.csv"
}
for r in $(seq 1 "$rounds"); do
    floor "$r" discard none
    floor "$r" hash none
    floor "$r" write tmpfs --target /dev/shm/quic-floor.bin; rm -f /dev/shm/quic-floor.bin
    floor "$r" write ext4-direct --direct --target "$disk/quic-floor.bin"; rm -f "$disk/quic-floor.bin"
    [ "${BENCH:-1}" = 0 ] && continue
    target/release/soku-bench --no-matrix --no-smallpkt --no-sharing --no-small-files \
        --tools soku,scp --repeat 1 --out "$out/bench-tmpfs-$r" > /dev/null
    target/release/soku-bench --no-matrix --no-smallpkt --no-sharing --no-small-files \
        --tools soku,scp --repeat 1 --work "$disk" --out "$out/bench-ext4-$r" > /dev/null
done
tail -n +2 "$out/floor.csv"
