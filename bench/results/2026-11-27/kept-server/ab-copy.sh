#!/bin/bash
# A/B of 30 s copies on the emulated 100 Mbit/s path, binaries alternated round after
# round, for each loss. One line per run in OUT/summary.txt: binary, tool, loss, round,
# then results.csv's seconds, % of link, netem packets A->B, loss drops, queue drops.
# usage: ab-copy.sh OUT ROUNDS "BIN_A BIN_B" TOOL RTT_MS "LOSSES"
#   TOOL: soku (a first copy) or soku-next (the copy after one that shares its login)
out=$1; rounds=$2; bins=$3; tool=$4; rtt=$5; losses=$6
bench=${BENCH:?set BENCH to the soku-bench binary, e.g. target/release/soku-bench}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do for loss in $losses; do for b in $bins; do
  d=$out/$(basename "$b")-$tool-$rtt-l$loss-$r
  "$bench" --soku "$b" --rates 100mbit --rtts "$rtt" --losses "$loss" --tools "$tool" \
    --duration 30s --no-cpu --no-smallpkt --no-small-files --no-sharing --no-flat-tree \
    --out "$d" > "$d.log" 2>&1
  echo "$(basename "$b") $tool $rtt loss$loss $r $(tail -1 "$d/results.csv" | cut -d, -f10,12,20,21,22)" >> "$out/summary.txt"
done; done; done
