#!/bin/bash
# Local copies, two soku builds alternated round by round: the 20 000-file tree of
# ../../2026-11-27/small-files-lan/gen-tree.py (in /dev/shm/sf/src) into tmpfs, the same
# tree into a directory on the real disk (ext4 here; each round into a fresh directory,
# so that ext4 does not search its inode tables around the inodes just freed), and 1 GiB
# from /dev/shm/big.bin (`head -c 1G /dev/urandom > /dev/shm/big.bin`) into tmpfs.
# Prints CSV: round,build,case,wall_s,cpu_ms (task-clock of both processes, `perf stat`
# follows the local `soku serve`).
# Usage: ab-local.sh OLD NEW ROUNDS DISK_DIR
OLD=$1; NEW=$2; ROUNDS=${3:-5}; DISK=${4:-/var/tmp/soku-ab}
mkdir -p "$DISK"
echo "round,build,case,wall_s,cpu_ms"
run() { # build binary case src dst
  local s e
  s=$(date +%s.%N)
  perf stat -x, -e task-clock -o /tmp/ab-stat.txt "$2" -q -r "$4" "$5" || echo "FAILED $1 $3" >&2
  e=$(date +%s.%N)
  echo "$r,$1,$3,$(echo "$e - $s" | bc),$(grep task-clock /tmp/ab-stat.txt | cut -d, -f1)"
}
for r in $(seq "$ROUNDS"); do
  for b in old new; do
    bin=$OLD; [ $b = new ] && bin=$NEW
    rm -rf /dev/shm/sf/dst && mkdir /dev/shm/sf/dst
    run $b "$bin" tree-tmpfs /dev/shm/sf/src /dev/shm/sf/dst/
    [ "$(find /dev/shm/sf/dst -type f | wc -l)" = 20000 ] || echo "MISSING FILES $b" >&2
    mkdir "$DISK/$r-$b"
    run $b "$bin" tree-disk /dev/shm/sf/src "$DISK/$r-$b/"
    rm -rf /dev/shm/bigdst && mkdir /dev/shm/bigdst
    run $b "$bin" 1gib-tmpfs /dev/shm/big.bin /dev/shm/bigdst/
  done
done
rm -rf "$DISK"
