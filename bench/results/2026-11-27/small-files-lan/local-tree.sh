#!/bin/bash
# A local `soku -r` copy of the tree gen-tree.py wrote to /dev/shm/sf/src, N times:
# wall time and the task-clock of both processes (`perf stat` follows the local
# `soku serve` it starts). Usage: local-tree.sh SOKU_BINARY [N]
BIN=$1; N=${2:-3}
cd /dev/shm/sf
for i in $(seq "$N"); do
  rm -rf dst && mkdir dst && sync
  s=$(date +%s.%N)
  perf stat -x, -e task-clock -o /tmp/sfstat.txt "$BIN" -q -r src dst/
  e=$(date +%s.%N)
  tc=$(grep task-clock /tmp/sfstat.txt | cut -d, -f1)
  echo "$(basename "$BIN") wall $(echo "$e - $s" | bc) cpu_ms $tc files $(find dst -type f | wc -l)"
done
