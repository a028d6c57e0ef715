#!/bin/bash
# soku by itself beside the floor, both sides: ROUNDS times, alternated, a 1 GiB copy of
# SRC over loopback by soku (the client and its ssh under `perf stat`; `soku serve` under
# `perf stat` through serve-stat.sh) and by soku-floor reading the same file (`--from`),
# each onto ext4 (DISK, default /var/tmp) and into tmpfs. Writes alone.csv under OUT.
# Usage: SSH_ARGS="-P PORT -i KEY -o ..." alone.sh OUT ROUNDS USER@127.0.0.1 SRC
#   (from the repository's root, after cargo build --release -p soku -p soku-bench; SRC
#   holds at least 1 GiB, in tmpfs so that the read costs the same for both)
set -euo pipefail
out=$1 rounds=$2 dest=$3 src=$4
disk=${DISK:-/var/tmp}
here=$(cd "$(dirname "$0")" && pwd)
gb=1.073741824
mkdir -p "$out"
echo "round,what,target,sender_cpu_s_per_gb,receiver_cpu_s_per_gb" > "$out/alone.csv"
warm() { dd if=/dev/zero of=/dev/shm/alone-warm bs=1M count=2048 status=none; rm -f /dev/shm/alone-warm; }
ms() { awk -F, '$3=="task-clock"{print $1}' "$1"; }
for r in $(seq 1 "$rounds"); do
    for target in "$disk" /dev/shm; do
        label=$([ "$target" = /dev/shm ] && echo tmpfs || echo ext4)
        warm
        rm -f /tmp/serve-stat.*.txt "$target/alone-dst.bin"
        # shellcheck disable=SC2086
        perf stat -x, -e task-clock -o "$out/client.txt" target/release/soku -q $SSH_ARGS \
            --remote-soku "$here/serve-stat.sh" "$src" "$dest:$target/alone-dst.bin"
        # The server stays for the next copy (crates/soku/src/serve/kept.rs): end it, so
        # that perf stat writes its count.
        for pid in $(pgrep -x soku-kept); do kill "$pid"; done
        for _ in $(seq 50); do ls /tmp/serve-stat.*.txt > /dev/null 2>&1 && [ -s "$(ls /tmp/serve-stat.*.txt | head -1)" ] && break; sleep 0.1; done
        sleep 0.5
        c=$(ms "$out/client.txt") s=$(ms "$(ls /tmp/serve-stat.*.txt | head -1)")
        awk -v r="$r" -v t="$label" -v c="$c" -v s="$s" -v gb="$gb" \
            'BEGIN { printf "%s,soku,%s,%.2f,%.2f\n", r, t, c / 1000 / gb, s / 1000 / gb }' >> "$out/alone.csv"
        rm -f "$target/alone-dst.bin"
        warm
        line=$(target/release/soku-floor --from "$src" --work write --direct --target "$target/alone-floor.bin")
        rm -f "$target/alone-floor.bin"
        echo "$line" | sed -E "s/.*sender ([0-9.]+) .* receiver ([0-9.]+) .*/$r,floor from the file,$label,\1,\2/" >> "$out/alone.csv"
    done
done
cat "$out/alone.csv"
