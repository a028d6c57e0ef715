#!/bin/sh
# Stands in for the remote soku (`--remote-soku`): runs `soku serve` under `perf stat`,
# writing its own CPU (task-clock) to /tmp/serve-stat.PID.txt when it ends. A kept
# server (`crates/soku/src/serve/kept.rs`) ends after its idle time, or at SIGTERM.
# SOKU: the soku binary (default target/release/soku of this checkout).
trap "" HUP
here=$(cd "$(dirname "$0")" && pwd)
soku=${SOKU:-$here/../../../../target/release/soku}
exec perf stat -x, -e task-clock -o "/tmp/serve-stat.$$.txt" -- "$soku" "$@"
