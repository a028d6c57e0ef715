#!/bin/bash
# A local copy of /dev/shm/big.bin (`head -c 1G /dev/urandom > /dev/shm/big.bin`):
# wall time and the task-clock of both processes. Usage: local-1gib.sh SOKU_BINARY
BIN=$1
rm -rf /dev/shm/bigdst && mkdir /dev/shm/bigdst
s=$(date +%s.%N)
perf stat -x, -e task-clock -o /tmp/bigstat.txt "$BIN" -q /dev/shm/big.bin /dev/shm/bigdst/
e=$(date +%s.%N)
echo "$(basename "$BIN") wall $(echo "$e - $s" | bc) cpu_ms $(grep task-clock /tmp/bigstat.txt | cut -d, -f1)"
