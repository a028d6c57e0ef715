#!/bin/bash
# The bench's loopback rows (1 GiB on the real disk under /var/tmp, every soku cipher),
# once per binary, round after round; OUT/BIN-ROUND/cpu.csv gets each run's rows and
# OUT/summary.txt the `soku (default)` row of each.
# usage: ab-loopback.sh OUT ROUNDS "BIN_A BIN_B"
out=$1; rounds=$2; bins=$3
bench=${BENCH:?set BENCH to the soku-bench binary, e.g. target/release/soku-bench}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do for b in $bins; do
  d=$out/$(basename "$b")-$r
  "$bench" --soku "$b" --no-matrix --no-smallpkt --no-small-files --no-sharing \
    --work /var/tmp --cpu-size 1gib --tools soku --out "$d" > "$d.log" 2>&1
  echo "$(basename "$b") $r $(grep -m1 'soku (default)' "$d.log")" >> "$out/summary.txt"
done; done
