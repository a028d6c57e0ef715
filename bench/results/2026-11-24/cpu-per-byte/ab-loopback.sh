#!/bin/bash
# A/B of the loopback CPU rows (soku-bench --no-matrix --cpu-size 256mib), each binary in
# turn, round after round; OUT/summary.txt gets the soku rows of each run's log.
# usage: ab-loopback.sh OUT ROUNDS "BIN_A BIN_B"
out=$1; rounds=$2; bins=$3; shift 3
bench=${BENCH:?set BENCH to the soku-bench binary, e.g. target/release/soku-bench}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
    for b in $bins; do
        d=$out/$(basename "$b")-$r
        "$bench" --soku "$b" --name skcpu --no-smallpkt --no-matrix --cpu-size 256mib --out "$d" "$@" > "$d.log" 2>&1
        grep soku "$d.log" | grep "MB/s" | sed "s/^/$(basename "$b") $r /" >> "$out/summary.txt"
    done
done
