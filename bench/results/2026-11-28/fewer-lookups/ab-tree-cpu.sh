#!/bin/bash
# CPU of a local copy of the 20 000-file tree into tmpfs, two soku builds alternated
# round by round: task-clock of both processes (`perf stat` follows the local
# `soku serve`). The tree comes from ../../2026-11-27/small-files-lan/gen-tree.py
# (in /dev/shm/sf/src). Prints CSV: build,cpu_ms.
# Usage: ab-tree-cpu.sh OLD NEW ROUNDS
OLD=$1; NEW=$2; ROUNDS=${3:-15}
echo "build,cpu_ms"
for r in $(seq "$ROUNDS"); do
  for b in old new; do
    bin=$OLD; [ $b = new ] && bin=$NEW
    rm -rf /dev/shm/sf/dst && mkdir /dev/shm/sf/dst
    perf stat -x, -e task-clock -o /tmp/ab-stat.txt "$bin" -q -r /dev/shm/sf/src /dev/shm/sf/dst/
    echo "$b,$(grep task-clock /tmp/ab-stat.txt | cut -d, -f1)"
  done
done
