#!/bin/bash
# Alternates, ROUNDS times, on the bench's emulated path (RATE x RTT, default 100mbit x 50ms):
# the quinn floor program (`bench/src/floor.rs`, `soku-floor`) sending MIB MiB from
# memory to a receiver that hashes (then one that also writes into tmpfs), each side in its
# own namespace under its own CPU count; then the bench's own soku row on the same path
# (its client and server CPU are in its results.csv). Writes path-floor.csv under OUT.
# Usage: floor-path.sh OUT ROUNDS [RATE RTT MIB SECONDS]   (from the repository's root, after
#   cargo build --release -p soku -p soku-bench -p soku-netem)
set -euo pipefail
out=$1 rounds=$2 rate=${3:-100mbit} rtt=${4:-50ms} mib=${5:-180} secs=${6:-15}
floor=target/release/soku-floor
name=skqf
mkdir -p "$out"
"$floor" --make-keys "$out/keys"
echo "round,work,sender_cpu_s_per_gb,receiver_cpu_s_per_gb,sender_line,receiver_line" > "$out/path-floor.csv"
for r in $(seq 1 "$rounds"); do
    target/release/soku-netem up --name $name --rtt "$rtt" --rate "$rate" --stats-every 0 > "$out/netem.log" 2>&1 &
    netem=$!
    trap 'kill $netem 2>/dev/null; wait $netem 2>/dev/null || true' EXIT
    for _ in $(seq 50); do ip netns exec $name-b true 2>/dev/null && break; sleep 0.1; done
    sleep 1
    for work in hash write; do
        extra=()
        [ "$work" = write ] && extra=(--target /dev/shm/quic-floor-path.bin)
        ip netns exec $name-b "$floor" --keys "$out/keys" --receive 10.77.0.2:9000 --mib "$mib" \
            --work "$work" "${extra[@]}" > "$out/receiver.txt" &
        receiver=$!
        sleep 1
        ip netns exec $name-a "$floor" --keys "$out/keys" --send 10.77.0.2:9000 --mib "$mib" > "$out/sender.txt"
        wait $receiver
        rm -f /dev/shm/quic-floor-path.bin
        s=$(cat "$out/sender.txt") rcv=$(cat "$out/receiver.txt")
        echo "$r,$work,$(echo "$s" | sed -E 's/.*: ([0-9.]+) CPU-s\/GB/\1/'),$(echo "$rcv" | sed -E 's/.*: ([0-9.]+) CPU-s\/GB/\1/'),\"$s\",\"$rcv\"" >> "$out/path-floor.csv"
    done
    kill $netem; wait $netem 2>/dev/null || true
    target/release/soku-bench --no-cpu --no-smallpkt --no-sharing --no-small-files --rates "$rate" \
        --rtts "$rtt" --losses 0 --tools soku --duration "$secs" --repeat 1 --out "$out/bench-$r" > /dev/null
done
cat "$out/path-floor.csv"
