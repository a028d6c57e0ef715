#!/bin/bash
# CPU per byte of bare iperf3 (UDP and TCP) on the bench's emulated path, each side
# under `perf stat`, for comparison with soku and scp on the same path.
# usage: floor.sh OUT ROUNDS [RATE RTT SECONDS]    (defaults: 100mbit 50ms 10)
# Needs root, iperf3, perf and soku-netem (NETEM, default target/release/soku-netem).
# Writes OUT/floor.csv: one line per run and side.
set -euo pipefail
out=$1; rounds=$2; rate=${3:-100mbit}; rtt=${4:-50ms}; secs=${5:-10}
netem=${NETEM:-target/release/soku-netem}
name=skfloor
mkdir -p "$out"
"$netem" up --name $name --rtt "$rtt" --rate "$rate" --stats-every 0 > "$out/netem.log" 2>&1 &
netem_pid=$!
trap 'kill $netem_pid 2>/dev/null; wait $netem_pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do ip netns exec $name-b true 2>/dev/null && break; sleep 0.1; done
sleep 1
pstat() { perf stat -x, -e task-clock,context-switches -o "$1" "${@:2}"; }
# task-clock ms and context switches from a `perf stat -x,` file
fields() { awk -F, '$3=="task-clock"{t=$1} $3=="context-switches"{c=$1} END{print t","c}' "$1"; }
echo "proto,round,bytes,side,task_clock_ms,context_switches,cpu_s_per_gb" > "$out/floor.csv"
for r in $(seq 1 "$rounds"); do
  for proto in udp tcp; do
    ip netns exec $name-b perf stat -x, -e task-clock,context-switches -o "$out/$proto-$r.recv" \
      iperf3 -s -1 -J > "$out/$proto-$r.server.json" 2>&1 &
    srv=$!
    sleep 1
    if [ $proto = udp ]; then args=(-u -b 95M -l 1472); else args=(); fi
    ip netns exec $name-a perf stat -x, -e task-clock,context-switches -o "$out/$proto-$r.send" \
      iperf3 -c 10.77.0.2 -t "$secs" -J "${args[@]}" > "$out/$proto-$r.client.json"
    wait $srv
    # bytes the receiver got
    bytes=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); e=j['end']; print(int((e.get('sum_received') or e['sum'])['bytes']))" "$out/$proto-$r.server.json")
    for side in recv send; do
      f=$(fields "$out/$proto-$r.$side")
      ms=${f%,*}
      echo "$proto,$r,$bytes,$side,$f,$(python3 -c "print(round($ms/1000/($bytes/1e9),2))")" >> "$out/floor.csv"
    done
    sleep 1
  done
done
cat "$out/floor.csv"
