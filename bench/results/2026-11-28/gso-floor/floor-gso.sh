#!/bin/bash
# CPU per byte of a bare paced UDP sender on the bench's emulated path, with and without
# GSO (UDP_SEGMENT): no encryption, no protocol, no file. The sender runs under
# `perf stat`; sink.py counts what arrives.
# usage: floor-gso.sh OUT ROUNDS [RATE RTT SECONDS]   (defaults: 100mbit 50ms 10)
# Needs root, perf, python3 and soku-netem (NETEM, default target/release/soku-netem).
set -euo pipefail
out=$1; rounds=$2; rate=${3:-100mbit}; rtt=${4:-50ms}; secs=${5:-10}
here=$(dirname "$0")
netem=${NETEM:-target/release/soku-netem}
name=skgso
mbit=$(( ${rate%mbit} * 95 / 100 ))
mkdir -p "$out"
"$netem" up --name $name --rtt "$rtt" --rate "$rate" --stats-every 0 > "$out/netem.log" 2>&1 &
netem_pid=$!
trap 'kill $netem_pid 2>/dev/null; wait $netem_pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do ip netns exec $name-b true 2>/dev/null && break; sleep 0.1; done
sleep 1
# The interpreter's own start costs tens of ms: measured each round with a 0 s run
# and taken off the figure.
startup_ms() {
  ip netns exec $name-a perf stat -x, -e task-clock -o "$out/start.stat" \
    python3 "$here/gso_send.py" 10.77.0.2 9000 "$mbit" 0 17 > /dev/null
  awk -F, '$3=="task-clock"{print $1}' "$out/start.stat"
}
echo "segments_per_send,round,bytes_sent,bytes_arrived,task_clock_ms,context_switches,startup_ms,cpu_s_per_gb_net_of_startup" > "$out/gso-floor.csv"
for r in $(seq 1 "$rounds"); do
  start=$(startup_ms)
  for segs in 1 10 17 44; do
    ip netns exec $name-b python3 "$here/sink.py" 9000 > "$out/sink.txt" &
    sink=$!
    sleep 1.5
    ip netns exec $name-a perf stat -x, -e task-clock,context-switches -o "$out/send.stat" \
      python3 "$here/gso_send.py" 10.77.0.2 9000 "$mbit" "$secs" "$segs" > "$out/sent.txt"
    wait $sink
    ms=$(awk -F, '$3=="task-clock"{print $1}' "$out/send.stat")
    cs=$(awk -F, '$3=="context-switches"{print $1}' "$out/send.stat")
    sent=$(cat "$out/sent.txt"); got=$(cat "$out/sink.txt")
    net=$(python3 -c "print(round(($ms - $start) / 1000 / ($sent / 1e9), 2))")
    echo "$segs,$r,$sent,$got,$ms,$cs,$start,$net" >> "$out/gso-floor.csv"
  done
done
cat "$out/gso-floor.csv"
