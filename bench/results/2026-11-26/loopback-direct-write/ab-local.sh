#!/bin/bash
# A/B of local 1 GiB copies (`soku SRC DIR/`: soku serve and the same QUIC path over
# loopback, no ssh), binaries alternated round after round. Prints per copy the wall
# time and the CPU seconds of the whole machine (both cores, /proc/stat: soku's two
# processes plus kernel threads such as page-cache write-back), and checks the copy.
# usage: ab-local.sh ROUNDS SRC "BIN_A BIN_B ..." [cold]
# With `cold`, SRC is evicted from the page cache before each copy.
rounds=$1; src=$2; bins=$3; cold=$4
dst=${DST:-/var/tmp/lbdst}
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
for r in $(seq 1 "$rounds"); do
  for b in $bins; do
    rm -rf "$dst"; mkdir -p "$dst"; sync
    if [ "$cold" = cold ]; then
      python3 -c "import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" "$src"
    fi
    b0=$(busy); t0=$(date +%s.%N)
    "$b" -q "$src" "$dst/" || echo FAIL
    t1=$(date +%s.%N); b1=$(busy)
    cmp -s "$src" "$dst/$(basename "$src")" || echo MISMATCH
    echo "$(basename "$b") round $r wall_s $(echo "$t1-$t0" | bc) machine_cpu_s $(echo "($b1-$b0)/100" | bc -l | cut -c1-5)"
  done
done
