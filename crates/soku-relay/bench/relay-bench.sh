#!/usr/bin/env bash
# scp uploads through the relay family, MB/s (file size / wall time incl. login).
#
#   relay-bench.sh SOKU_BIN PRELOAD_LIB [SIZE_MIB] [NETEM_NAME]
#
# Without NETEM_NAME: sshd and clients on loopback. With it: sshd in NETEM_NAME-b
# (10.77.0.2), clients and relays in NETEM_NAME-a (a path brought up beforehand by
# `soku-netem up --name NETEM_NAME ...`). The 8 KiB case moves SIZE/16 (it is slow).
set -euo pipefail
SOKU=$1; PRELOAD=$2; SIZE=${3:-512}; NS=${4:-}
RUNS=${RUNS:-2}
D=$(mktemp -d /dev/shm/relay-bench.XXXXXX)
cleanup() { [ -n "${SSHD_PID:-}" ] && kill "$SSHD_PID" 2>/dev/null; [ -n "${RELAY_PID:-}" ] && kill "$RELAY_PID" 2>/dev/null; rm -rf "$D"; }
trap cleanup EXIT
if [ -n "$NS" ]; then A="ip netns exec $NS-a"; B="ip netns exec $NS-b"; HOST=10.77.0.2; else A=""; B=""; HOST=127.0.0.1; fi
PORT=$((20000 + RANDOM % 20000))
mkdir -p /run/sshd
. "$(dirname "$0")/sshd-setup.sh"
sshd_setup "$D" "$HOST" "$PORT"
$B /usr/sbin/sshd -D -e -f "$D/sshd_config" 2>"$D/sshd.log" & SSHD_PID=$!
for _ in $(seq 500); do [ -s "$D/sshd.pid" ] && break; sleep 0.02; done
OPTS=(-o IdentityFile="$D/user" -o UserKnownHostsFile="$D/known" -o StrictHostKeyChecking=yes -o BatchMode=yes -o LogLevel=ERROR)
head -c "$((SIZE << 20))" /dev/urandom > "$D/big"
head -c "$((SIZE << 16))" /dev/urandom > "$D/small"

# one_run LABEL FILE PORT [scp args...] ; env via ENVV
one_run() {
  local label=$1 file=$2 port=$3; shift 3
  local bytes; bytes=$(stat -c %s "$file")
  local best=0
  for _ in $(seq "$RUNS"); do
    rm -f "$D/remote"
    local t0 t1; t0=$(date +%s.%N)
    if ! $A env ${ENVV:-} scp -q "${OPTS[@]}" -P "$port" "$@" "$file" "root@$HOST:$D/remote"; then
      echo "$label: scp FAILED (relay log: $(tail -2 "$D/relay.log" 2>/dev/null | tr '\n' ' '))"; continue
    fi
    t1=$(date +%s.%N)
    cmp -s "$file" "$D/remote" || { echo "$label: DATA MISMATCH"; exit 1; }
    local r; r=$(echo "$bytes / ($t1 - $t0) / 1000000" | bc -l)
    printf '%-44s %8.1f MB/s (%d MiB)\n' "$label" "$r" $((bytes >> 20))
  done
}
start_relay() {
  [ -n "${RELAY_PID:-}" ] && kill "$RELAY_PID" 2>/dev/null && wait "$RELAY_PID" 2>/dev/null || true
  $A "$SOKU" relay --listen 127.0.0.1:0 --to "$HOST:$PORT" "$@" 2>"$D/relay.log" & RELAY_PID=$!
  for _ in $(seq 500); do grep -q listening "$D/relay.log" 2>/dev/null && break; sleep 0.02; done
  RPORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\),.*/\1/p' "$D/relay.log" | head -1)
}
echo "# $(date -u +%F) ${NS:+netem path $NS}${NS:-loopback}, $SIZE MiB, scp (SFTP mode unless -O), $(ssh -V 2>&1)"
for mode in sftp legacy; do
  X=(); [ $mode = legacy ] && X=(-O)
  ENVV= one_run "scp $mode direct" "$D/big" "$PORT" "${X[@]}"
  ENVV= one_run "scp $mode via soku proxy" "$D/big" "$PORT" "${X[@]}" -o "ProxyCommand=$SOKU proxy %h %p"
  start_relay
  ENVV= one_run "scp $mode via soku relay (default buffers)" "$D/big" "$RPORT" "${X[@]}" -o HostKeyAlias=bench-alias
  start_relay --sndbuf 8192 --rcvbuf 8192
  ENVV= one_run "scp $mode via soku relay --sndbuf/--rcvbuf 8192" "$D/small" "$RPORT" "${X[@]}" -o HostKeyAlias=bench-alias
  ENVV="LD_PRELOAD=$PRELOAD SOKU_PRELOAD=$PORT" one_run "scp $mode via preload" "$D/big" "$PORT" "${X[@]}"
  ENVV="LD_PRELOAD=$PRELOAD SOKU_PRELOAD=$PORT SOKU_PRELOAD_SNDBUF=8192 SOKU_PRELOAD_RCVBUF=8192" one_run "scp $mode via preload, 8192 buffers" "$D/small" "$PORT" "${X[@]}"
done
