#!/bin/bash
# Small files A/B: the soku-next row of two builds, invocations alternated.
out=$1; rounds=$2; bins=$3
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do for b in $bins; do
  d=$out/$(basename "$b")-$r
  target/release/soku-bench --soku "$b" --no-matrix --no-cpu --no-smallpkt --no-sharing \
    --small-tools soku-next --repeat 3 --out "$d" > "$d.log" 2>&1
  tail -n +2 "$d/small-files.csv" | cut -d, -f7,8,9,10 | sed "s/^/$(basename "$b") /" >> "$out/summary.txt"
done; done
