#!/bin/bash
# A/B of soku's next copy (the shared login and the path memory of a copy just before
# it) on the emulated 100 Mbit/s x 200 ms path, 30 s copies, binaries alternated round
# after round, 0 % and 1 % loss. One line per run in OUT/summary.txt: binary, loss,
# round, then results.csv's seconds, % of link, netem packets A->B (the untimed copies
# before the timed one included), loss drops and queue drops.
# usage: ab-next.sh OUT ROUNDS "BIN_A BIN_B"
out=$1; rounds=$2; bins=$3
bench=${BENCH:?set BENCH to the soku-bench binary, e.g. target/release/soku-bench}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do for loss in 0 1; do for b in $bins; do
  d=$out/$(basename "$b")-l$loss-$r
  "$bench" --soku "$b" --rates 100mbit --rtts 200 --losses $loss --tools soku-next \
    --duration 30s --no-cpu --no-smallpkt --no-small-files --no-sharing --no-flat-tree \
    --out "$d" > "$d.log" 2>&1
  echo "$(basename "$b") loss$loss $r $(tail -1 "$d/results.csv" | cut -d, -f10,12,20,21,22)" >> "$out/summary.txt"
done; done; done
