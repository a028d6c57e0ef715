#!/bin/bash
# The bench's sharing section alone (soku alone, --background alone, CUBIC then soku,
# CUBIC then --background, soku then soku), once per binary and RTT, alternated.
# usage: ab-sharing.sh OUT "BIN_A BIN_B" "RTTS, e.g. 50ms 200ms"
out=$1; bins=$2; rtts=$3
bench=${BENCH:?set BENCH to the soku-bench binary, e.g. target/release/soku-bench}
mkdir -p "$out"
for rtt in $rtts; do for b in $bins; do
  d=$out/$(basename "$b")-$rtt
  "$bench" --soku "$b" --no-matrix --no-cpu --no-smallpkt --no-small-files \
    --sharing-rtt "$rtt" --out "$d" > "$d.log" 2>&1
done; done
