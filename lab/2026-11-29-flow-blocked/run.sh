#!/usr/bin/env bash
# Does the peer's flow control ever hold soku's sender back under heavy random loss?
# One upload per loss rate on 100 Mbit/s x 100 ms (loss on the data direction only),
# reading the sender's last path sample: see README.md. Needs root.
#
#   lab/2026-11-29-flow-blocked/run.sh target/release/soku [SIZE_MIB] [LOSSES...]
set -euo pipefail
soku=$(realpath "$1")
size_mib=${2:-200}
shift 2 || shift $#
losses=("$@")
[ ${#losses[@]} -gt 0 ] || losses=(0 5 10 15 20)
here=$(cd "$(dirname "$0")" && pwd)
netem=${SOKU_NETEM:-$here/../../target/release/soku-netem}
work=$(mktemp -d /tmp/soku-flow-blocked.XXXXXX)

cleanup() {
    [ -n "${sshd_pid:-}" ] && kill "$sshd_pid" 2>/dev/null || true
    [ -n "${netem_pid:-}" ] && kill "$netem_pid" 2>/dev/null && wait "$netem_pid" 2>/dev/null || true
    "$netem" down "fb$$" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

ssh-keygen -q -t ed25519 -N "" -f "$work/host_key"
ssh-keygen -q -t ed25519 -N "" -f "$work/user_key"
cp "$work/user_key.pub" "$work/authorized_keys"
cat >"$work/sshd_config" <<CONF
Port 22
ListenAddress 10.77.0.2
HostKey $work/host_key
AuthorizedKeysFile $work/authorized_keys
PermitRootLogin yes
StrictModes no
PidFile $work/sshd.pid
UsePAM no
CONF
head -c $((size_mib << 20)) /dev/urandom >"$work/src.bin"

echo "loss_pct,seconds,pct_of_link,sent_packets,lost_packets,flow_blocked,rounds,app_limited_rounds"
for loss in "${losses[@]}"; do
    name=fb$$
    "$netem" up --name "$name" --rtt 100ms --rate 100mbit --loss "$loss%" --loss-a-to-b-only \
        --stats-every 0 >"$work/netem.log" 2>&1 &
    netem_pid=$!
    for _ in $(seq 50); do ip netns list | grep -q "^$name-b" && break; sleep 0.1; done
    sleep 0.5
    ip netns exec "$name-b" /usr/sbin/sshd -D -f "$work/sshd_config" -E "$work/sshd.log" \
        </dev/null >/dev/null 2>&1 &
    sshd_pid=$!
    sleep 0.5
    rm -f "$work/dst.bin"
    start=$(date +%s.%N)
    ip netns exec "$name-a" timeout 120 "$soku" --json -o IdentityFile="$work/user_key" \
        -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
        --remote-soku "$soku" "$work/src.bin" "root@10.77.0.2:$work/dst.bin" \
        2>"$work/events.json" || true
    end=$(date +%s.%N)
    python3 - "$work/events.json" "$loss" "$start" "$end" "$size_mib" <<'PY'
import json, sys
path, loss, start, end, size = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
last = None
# When the app-limited rounds came: seconds into the data (path samples come every
# 0.5 s), on stderr, to tell a copy's start and tail from its middle.
when, seen, sample = [], 0, 0
for line in open(path):
    try:
        event = json.loads(line)
    except ValueError:
        continue
    if event.get("event") in ("path_sample", "path"):
        last = event
    if event.get("event") == "path_sample":
        sample += 1
        limited = event.get("app_limited_rounds") or 0
        if limited > seen:
            when.append(f"{sample * 0.5:.1f}s+{limited - seen}")
            seen = limited
print(f"loss {loss} %: app-limited rounds at " + " ".join(when), file=sys.stderr)
secs = end - start
pct = size * 8 * 1048576 / secs / 1e8 * 100
if last is None:
    print(f"{loss},{secs:.1f},{pct:.1f},,,,,")
else:
    fields = [last.get(k) for k in ("sent_packets", "lost_packets", "flow_blocked", "rounds", "app_limited_rounds")]
    print(f"{loss},{secs:.1f},{pct:.1f}," + ",".join("" if v is None else str(v) for v in fields))
PY
    kill "$sshd_pid" 2>/dev/null || true
    kill "$netem_pid" 2>/dev/null || true
    wait "$netem_pid" 2>/dev/null || true
    "$netem" down "$name" >/dev/null 2>&1 || true
    sshd_pid=; netem_pid=
done
cmp "$work/src.bin" "$work/dst.bin" && echo "the last copy's bytes match" >&2
