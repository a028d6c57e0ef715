#!/bin/bash
# The bench's loopback rows (1 GiB on the real disk, every cipher of soku and scp), once
# per binary, round after round; OUT/TAG-BIN-ROUND/ gets each run's tables and cpu.csv.
# usage: ab-bench.sh OUT TAG ROUNDS "BIN_A BIN_B" [extra bench args, e.g. --cold-cache]
out=$1; tag=$2; rounds=$3; bins=$4; shift 4
bench=${BENCH:?set BENCH to the soku-bench binary, e.g. target/release/soku-bench}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for b in $bins; do
    d=$out/$tag-$(basename "$b")-$r
    "$bench" --soku "$b" --no-matrix --no-smallpkt --no-small-files --no-sharing \
      --work /var/tmp --cpu-size 1gib --tools soku,scp --out "$d" "$@" > "$d.log" 2>&1
  done
done
