#!/usr/bin/env bash
# The relay family on emulated WAN paths: where a relay helps, where ssh's own windows
# cap every relay, and where only soku's transport helps. Needs root.
#
#   relay-wan.sh SOKU_BIN PRELOAD_LIB SOKU_NETEM_BIN [SCENARIO...]
#
# Scenarios (default: all three), each on its own soku-netem path (namespaces rw-a, rw-b;
# sshd in rw-b at 10.77.0.2, every client and relay in rw-a):
#   smallbuf  100 Mbit/s, 50 ms: the sender host's TCP send buffer capped at 8 KiB
#             (tcp_wmem in rw-a), the seeds' situation; scp direct vs through the relays.
#   window    500 Mbit/s, 100 ms, default buffers: OpenSSH's 2 MiB channel window
#             (and SFTP's request window) cap scp direct and through every relay; soku.
#   lossy     100 Mbit/s, 100 ms, 1 % loss A->B, TCP CUBIC in both namespaces: rsync and
#             scp direct vs rsync through `soku tunnel`, and soku.
# Each line: one upload, MB/s = file size / wall time including ssh login, data checked
# with cmp. RUNS (default 2) repeats each case.
set -euo pipefail
SOKU=$1; PRELOAD=$2; NETEM=$3; shift 3
SCENARIOS=("$@"); [ ${#SCENARIOS[@]} -eq 0 ] && SCENARIOS=(smallbuf window lossy)
RUNS=${RUNS:-2}
NS=rw; A="ip netns exec $NS-a"; B="ip netns exec $NS-b"; HOST=10.77.0.2; PORT=22
D=$(mktemp -d /dev/shm/relay-wan.XXXXXX)
NETEM_PID=; SSHD_PID=; RELAY_PID=; TUNNEL_PID=
stop() { # stop PID: end one process we started, and reap it
  [ -n "$1" ] && kill "$1" 2>/dev/null && wait "$1" 2>/dev/null || true
}
down() {
  stop "$TUNNEL_PID"; stop "$RELAY_PID"; stop "$SSHD_PID"; stop "$NETEM_PID"
  TUNNEL_PID=; RELAY_PID=; SSHD_PID=; NETEM_PID=
}
trap 'down; rm -rf "$D"' EXIT

. "$(dirname "$0")/sshd-setup.sh"
sshd_setup "$D" "$HOST" "$PORT"
OPTS=(-o IdentityFile="$D/user" -o UserKnownHostsFile="$D/known" -o GlobalKnownHostsFile=/dev/null
      -o StrictHostKeyChecking=yes -o BatchMode=yes -o LogLevel=ERROR)

# up SPEC...: brings up the path (bounded wait for soku-netem's `path NAME up` line) and sshd.
up() {
  "$NETEM" down "$NS" >/dev/null 2>&1 || true
  "$NETEM" up --name "$NS" --stats-every 0 "$@" >"$D/netem.log" 2>&1 & NETEM_PID=$!
  for _ in $(seq 100); do grep -q "path $NS up" "$D/netem.log" && break; sleep 0.1; done
  grep -q "path $NS up" "$D/netem.log" || { echo "path did not come up: $(cat "$D/netem.log")"; exit 1; }
  rm -f "$D/sshd.pid"
  $B /usr/sbin/sshd -D -e -f "$D/sshd_config" 2>"$D/sshd.log" & SSHD_PID=$!
  for _ in $(seq 500); do [ -s "$D/sshd.pid" ] && break; sleep 0.02; done
}

# run LABEL FILE CMD...: times CMD (run in rw-a), checks the copy, prints MB/s.
run() {
  local label=$1 file=$2; shift 2
  local bytes; bytes=$(stat -c %s "$file")
  for _ in $(seq "$RUNS"); do
    rm -f "$D/remote"
    local t0 t1; t0=$(date +%s.%N)
    if ! timeout 300 $A "$@" >"$D/run.log" 2>&1; then
      echo "$label: FAILED ($(tail -2 "$D/run.log" | tr '\n' ' '))"; continue
    fi
    t1=$(date +%s.%N)
    cmp -s "$file" "$D/remote" || { echo "$label: DATA MISMATCH"; exit 1; }
    local r; r=$(echo "$bytes / ($t1 - $t0) / 1000000" | bc -l)
    printf '  %-52s %7.2f MB/s %7.1f Mbit/s (%d MiB)\n' "$label" "$r" "$(echo "$r * 8" | bc -l)" $((bytes >> 20))
  done
}
file() { [ -f "$D/f$1" ] || head -c "$(($1 << 20))" /dev/urandom > "$D/f$1"; echo "$D/f$1"; }
start_relay() {
  stop "$RELAY_PID"
  $A "$SOKU" relay --listen 127.0.0.1:0 --to "$HOST:$PORT" "$@" 2>"$D/relay.log" & RELAY_PID=$!
  for _ in $(seq 500); do grep -q listening "$D/relay.log" 2>/dev/null && break; sleep 0.02; done
  RPORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\),.*/\1/p' "$D/relay.log" | head -1)
}
start_tunnel() {
  stop "$TUNNEL_PID"
  $A "$SOKU" tunnel -L 0 --to "$HOST:$PORT" "${OPTS[@]}" --remote-soku "$SOKU" "root@$HOST" \
    2>"$D/tunnel.log" & TUNNEL_PID=$!
  for _ in $(seq 1000); do grep -q listening "$D/tunnel.log" 2>/dev/null && break; sleep 0.02; done
  TPORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$D/tunnel.log" | head -1)
  [ -n "$TPORT" ] || { echo "tunnel did not start: $(cat "$D/tunnel.log")"; exit 1; }
}
SCP=(scp -q "${OPTS[@]}")
SOKUC=("$SOKU" -q "${OPTS[@]}" --remote-soku "$SOKU")
# relay_cases FILE: scp through each member of the relay family.
relay_cases() {
  local f=$1
  run "scp via soku proxy" "$f" "${SCP[@]}" -o "ProxyCommand=$SOKU proxy %h %p" "$f" "root@$HOST:$D/remote"
  start_relay
  run "scp via soku relay" "$f" "${SCP[@]}" -P "$RPORT" -o HostKeyAlias=bench-alias "$f" "root@127.0.0.1:$D/remote"
  run "scp via preload" "$f" env LD_PRELOAD="$PRELOAD" SOKU_PRELOAD="$PORT" "${SCP[@]}" "$f" "root@$HOST:$D/remote"
}
# route_cc ALGO: TCP congestion control on the path's route in both namespaces (a non-init
# netns may only pick from tcp_allowed_congestion_control; a route's congctl may use any).
route_cc() {
  local ns r
  for ns in "$A" "$B"; do
    r=$($ns ip route show | grep '^10\.77\.0\.0/24' | head -1)
    $ns ip route replace $r congctl "$1"
  done
}
tcp_cc() { $A sysctl -qn net.ipv4.tcp_congestion_control; }

echo "# $(date -u +%FT%TZ) relay-wan.sh, $(ssh -V 2>&1), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
for s in "${SCENARIOS[@]}"; do
  case $s in
  smallbuf)
    up --rtt 50ms --rate 100mbit
    $A sysctl -qw net.ipv4.tcp_wmem="4096 8192 8192"
    echo "smallbuf: 100 Mbit/s, RTT 50 ms, no loss; rw-a tcp_wmem = $($A sysctl -n net.ipv4.tcp_wmem | tr '\t' ' '), tcp cc $(tcp_cc)"
    small=$(file 2); big=$(file 64)
    run "scp direct (8 KiB send buffer)" "$small" "${SCP[@]}" "$small" "root@$HOST:$D/remote"
    run "scp -O direct (8 KiB send buffer)" "$small" "${SCP[@]}" -O "$small" "root@$HOST:$D/remote"
    relay_cases "$big"
    run "soku" "$big" "${SOKUC[@]}" "$big" "root@$HOST:$D/remote"
    down
    ;;
  window)
    up --rtt 100ms --rate 500mbit
    echo "window: 500 Mbit/s, RTT 100 ms (BDP 6.25 MB), no loss, default buffers, tcp cc $(tcp_cc); ssh cap 2 MiB/RTT = 168 Mbit/s"
    big=$(file 128); bigger=$(file 256)
    run "scp direct" "$big" "${SCP[@]}" "$big" "root@$HOST:$D/remote"
    run "scp -O direct" "$big" "${SCP[@]}" -O "$big" "root@$HOST:$D/remote"
    relay_cases "$big"
    start_tunnel
    run "scp via soku tunnel" "$big" "${SCP[@]}" -P "$TPORT" -o HostKeyAlias=bench-alias "$big" "root@127.0.0.1:$D/remote"
    run "soku" "$bigger" "${SOKUC[@]}" "$bigger" "root@$HOST:$D/remote"
    down
    ;;
  lossy)
    up --rtt 100ms --rate 100mbit --loss 1% --loss-a-to-b-only
    route_cc cubic
    echo "lossy: 100 Mbit/s, RTT 100 ms, 1 % loss A->B, tcp cc cubic on the route both ways (netns default: $(tcp_cc))"
    small=$(file 8); big=$(file 64)
    run "rsync direct" "$small" rsync -e "ssh ${OPTS[*]}" "$small" "root@$HOST:$D/remote"
    run "scp direct" "$small" "${SCP[@]}" "$small" "root@$HOST:$D/remote"
    start_tunnel
    run "rsync via soku tunnel" "$big" rsync -e "ssh -p $TPORT -o HostKeyAlias=bench-alias ${OPTS[*]}" "$big" "root@127.0.0.1:$D/remote"
    run "scp via soku tunnel" "$big" "${SCP[@]}" -P "$TPORT" -o HostKeyAlias=bench-alias "$big" "root@127.0.0.1:$D/remote"
    run "soku" "$big" "${SOKUC[@]}" "$big" "root@$HOST:$D/remote"
    down
    ;;
  *) echo "unknown scenario $s (smallbuf, window, lossy)"; exit 2 ;;
  esac
done
