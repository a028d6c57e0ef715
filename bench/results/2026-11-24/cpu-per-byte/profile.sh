#!/bin/bash
# CPU profile of a soku upload on an emulated path: every process, kernel and user
# stacks, 999 Hz (cpu-clock: this guest has no hardware counters).
# usage: profile.sh OUT SOKU_BINARY [soku-bench path args, e.g. --rates 100mbit --rtts 50 --losses 0 --duration 10s]
# Then: perf script -i OUT/perf.data -F pid,tid,event,ip,sym,dso > OUT/script.txt
#       python3 perf-categories.py PID < OUT/script.txt   (PIDs: the binary's two processes)
set -e
out=$1; soku=$2; shift 2
bench=${BENCH:?set BENCH to the soku-bench binary, e.g. target/release/soku-bench}
mkdir -p "$out"
perf record -a -g -F 999 -e cpu-clock -o "$out/perf.data" > "$out/perf.log" 2>&1 &
perf_pid=$!
sleep 1
"$bench" --soku "$soku" --name skcpu --no-smallpkt --no-cpu --tools soku --out "$out/bench" "$@" > "$out/bench.log" 2>&1 || true
kill -INT $perf_pid; wait $perf_pid || true
