#!/bin/bash
# A 1 GiB copy between two local paths (the client and a local `soku serve` over loopback
# QUIC, the same engine as through ssh), the client killed with SIGKILL once half
# is verified, then the same command again: what the second run sends.
set -u
S=$(realpath "${SOKU:-target/release/soku}")
D=${DIR:-/tmp/k50}
cd "$D"
[ -f src.bin ] || head -c 1073741824 /dev/urandom > src.bin
rm -rf dst; mkdir dst
$S --json -l 400000 "$@" src.bin dst/ 2> first.jsonl &
pid=$!
while true; do
  v=$(grep '"event":"verified"' first.jsonl | tail -1 | sed 's/.*"bytes":\([0-9]*\).*/\1/')
  [ -n "$v" ] && [ "$v" -ge 536870912 ] && break
  sleep 0.05
done
kill -9 $pid; wait $pid 2>/dev/null
echo "killed at verified=$v"
$S --json "$@" src.bin dst/ 2> second.jsonl
grep '"event":"finished"' second.jsonl
cmp src.bin dst/src.bin && echo identical
