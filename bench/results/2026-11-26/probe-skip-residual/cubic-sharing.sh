#!/bin/bash
# The bench's "CUBIC, then soku" sharing case alone, binaries and RTTs alternated round
# after round. One line per run in OUT/summary.txt: binary, RTT, round, CUBIC's and
# soku's Mbit/s over the bench's window, and how many of the client's half-second
# path_sample events were in probe-RTT (from its --json stderr, kept in OUT/trace).
# usage: cubic-sharing.sh OUT ROUNDS "BIN_A BIN_B" "RTTS, e.g. 200ms 50ms"
out=$1; rounds=$2; bins=$3; rtts=$4
bench=${BENCH:?set BENCH to the soku-bench binary, e.g. target/release/soku-bench}
mkdir -p "$out/trace"
out=$(cd "$out" && pwd)
for b in $bins; do
  # The client's events go to stderr; `soku serve` (the remote side) runs untouched.
  cat > "$out/wrap-$(basename "$b")" <<WRAP
#!/bin/bash
case " \$* " in *" serve"*) exec $b "\$@";; esac
exec $b "\$@" 2> >(tee "\$SOKU_TRACE_FILE" >&2)
WRAP
  chmod +x "$out/wrap-$(basename "$b")"
done
for r in $(seq 1 "$rounds"); do for rtt in $rtts; do for b in $bins; do
  name=$(basename "$b")-$rtt-$r
  export SOKU_TRACE_FILE=$out/trace/$name.jsonl
  "$bench" --soku "$out/wrap-$(basename "$b")" --no-matrix --no-cpu --no-smallpkt \
    --no-small-files --sharing-rtt "$rtt" --sharing-cases cubic --out "$out/$name" \
    > "$out/$name.log" 2>&1
  rates=$(grep -A2 'CUBIC, then soku$' "$out/$name.log" | tail -2 | awk '{print $(NF-1)}' | tr '\n' ' ')
  probes=$(grep -c '"phase":"probe_rtt"' "$SOKU_TRACE_FILE" 2>/dev/null)
  echo "$(basename "$b") $rtt $r ${rates}probe_rtt_samples=${probes:-0}" >> "$out/summary.txt"
done; done; done
