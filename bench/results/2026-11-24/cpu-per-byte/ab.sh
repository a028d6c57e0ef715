#!/bin/bash
# A/B: the same soku-bench path run with each binary in turn, round after round.
# usage: ab.sh OUT ROUNDS "BIN_A BIN_B" [soku-bench path args]
# Each line of OUT/summary.txt: binary, round, then results.csv's
# cc,bytes,mbit_s,pct_of_link,client_cpu_s,server_cpu_s,status,load_start
out=$1; rounds=$2; bins=$3; shift 3
bench=${BENCH:?set BENCH to the soku-bench binary, e.g. target/release/soku-bench}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
    for b in $bins; do
        d=$out/$(basename "$b")-$r
        "$bench" --soku "$b" --name skcpu --no-smallpkt --no-cpu --no-small-files --no-sharing --tools soku --out "$d" "$@" > "$d.log" 2>&1
        echo "$(basename "$b") $r $(tail -1 "$d/results.csv" | cut -d, -f8,9,11,12,13,14,15,16)" >> "$out/summary.txt"
    done
done
