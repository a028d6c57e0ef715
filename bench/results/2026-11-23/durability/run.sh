#!/bin/bash
# usage: run.sh MODE(fsync|nofsync) WHAT(big|small)
# DIR must hold src/big.bin (1 GiB, e.g. head -c 1073741824 /dev/urandom) and
# src/small/d1..d20/f1..f100 (8 KiB each); SOKU is the binary (default: this tree's).
S=$(realpath "${SOKU:-target/release/soku}")
cd "${DIR:-/tmp/dur}"
rm -rf dst; mkdir dst; sync
flag=""; [ "$1" = nofsync ] && flag="--no-fsync"
if [ "$2" = big ]; then args="src/big.bin dst/"; else args="-r src/small dst/"; fi
t0=$(date +%s.%N)
$S -q $flag $args || exit 1
t1=$(date +%s.%N)
sync
t2=$(date +%s.%N)
echo "$1 $2 copy=$(echo "$t1-$t0"|bc) sync_after=$(echo "$t2-$t1"|bc)"
