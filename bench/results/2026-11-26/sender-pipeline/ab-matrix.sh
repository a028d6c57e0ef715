#!/bin/bash
# A/B of soku uploads on the emulated 100 Mbit/s path, binaries alternated round after
# round. Every row of every run's results.csv goes to OUT/all.csv with the binary and
# round in front.
# usage: ab-matrix.sh OUT ROUNDS "BIN_A BIN_B" [soku-bench path args, e.g.
#        --rates 100mbit --rtts 50,200 --losses 0,1,3 --duration 10s]
out=$1; rounds=$2; bins=$3; shift 3
bench=${BENCH:?set BENCH to the soku-bench binary, e.g. target/release/soku-bench}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do for b in $bins; do
  d=$out/$(basename "$b")-$r
  "$bench" --soku "$b" --tools soku --no-cpu --no-smallpkt --no-small-files --no-sharing \
    --no-flat-tree --out "$d" "$@" > "$d.log" 2>&1
  [ -f "$out/all.csv" ] || sed -n 1p "$d/results.csv" | sed 's/^/binary,round,/' > "$out/all.csv"
  tail -n +2 "$d/results.csv" | sed "s/^/$(basename "$b"),$r,/" >> "$out/all.csv"
done; done
