#!/bin/bash
# A/B of the bench's sharing cases, binaries and RTTs alternated round after round.
# Appends each run's sharing.csv rows to OUT/sharing-ab.csv with the binary, RTT and
# round in front.
# usage: sharing-ab.sh OUT ROUNDS "BIN_A BIN_B" "RTTS, e.g. 200ms 50ms" CASES
#   CASES: the bench's --sharing-cases, e.g. cubic,soku-cubic
out=$1; rounds=$2; bins=$3; rtts=$4; cases=$5
bench=${BENCH:?set BENCH to the soku-bench binary, e.g. target/release/soku-bench}
mkdir -p "$out"
[ -f "$out/sharing-ab.csv" ] || echo "build,rtt,round,case,flow,index,goodput_mbit_s,note" > "$out/sharing-ab.csv"
for r in $(seq 1 "$rounds"); do for rtt in $rtts; do for b in $bins; do
  name=$(basename "$b")-$rtt-$r
  "$bench" --soku "$b" --no-matrix --no-cpu --no-smallpkt --no-small-files \
    --sharing-rtt "$rtt" --sharing-cases "$cases" --out "$out/$name" > "$out/$name.log" 2>&1
  tail -n +2 "$out/$name/sharing.csv" | sed "s/^/$(basename "$b"),$rtt,$r,/" >> "$out/sharing-ab.csv"
done; done; done
