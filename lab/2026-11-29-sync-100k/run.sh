#!/usr/bin/env bash
# Re-running a sync of a 100 000-file tree with 1 % changed: soku sync (quick check and
# --checksum) against rsync -a (and rsync -a --checksum), same run, on an emulated
# 100 Mbit/s x 50 ms path with sshd in the far namespace. See README.md. Needs root.
#
#   lab/2026-11-29-sync-100k/run.sh [FILES] [ROUNDS] > results.csv
set -euo pipefail
files=${1:-100000}
rounds=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
soku=${SOKU:-$here/../../target/release/soku}
netem=${SOKU_NETEM:-$here/../../target/release/soku-netem}
name=sy$$
work=$(mktemp -d /tmp/soku-sync-100k.XXXXXX)

cleanup() {
    [ -n "${sshd_pid:-}" ] && kill "$sshd_pid" 2>/dev/null || true
    [ -n "${netem_pid:-}" ] && kill "$netem_pid" 2>/dev/null && wait "$netem_pid" 2>/dev/null || true
    "$netem" down "$name" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

python3 "$here/make_tree.py" "$work/src" "$files"
echo "tree: $(find "$work/src" -type f | wc -l) files, $(du -sb "$work/src" | cut -f1) bytes" >&2

"$netem" up --name "$name" --rtt 50ms --rate 100mbit --stats-every 0 >"$work/netem.log" 2>&1 &
netem_pid=$!
for _ in $(seq 50); do ip netns list | grep -q "^$name-b" && break; sleep 0.1; done
sleep 0.5
ssh-keygen -q -t ed25519 -N "" -f "$work/host_key"
ssh-keygen -q -t ed25519 -N "" -f "$work/user_key"
mkdir -p /root/.ssh && touch /root/.ssh/authorized_keys
cat >"$work/sshd_config" <<CONF
Port 22
ListenAddress 10.77.0.2
HostKey $work/host_key
PidFile $work/sshd.pid
AuthorizedKeysFile $work/user_key.pub
StrictModes no
CONF
ip netns exec "$name-b" /usr/sbin/sshd -D -f "$work/sshd_config" -E "$work/sshd.log" \
    </dev/null >/dev/null 2>&1 &
sshd_pid=$!
sleep 0.5
ssh_opts="-i $work/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"

# Bytes through the near namespace's devices, both ways.
wire() { ip netns exec "$name-a" awk 'NR > 2 && $1 != "lo:" { s += $2 + $10 } END { print s }' /proc/net/dev; }

# Runs one command in the near namespace; prints "seconds,wire_bytes".
timed() {
    local before after start end
    before=$(wire)
    start=$(date +%s.%N)
    ip netns exec "$name-a" "$@" >"$work/last.out" 2>"$work/last.err" || {
        cat "$work/last.err" >&2
        exit 1
    }
    end=$(date +%s.%N)
    after=$(wire)
    echo "$(echo "$end - $start" | bc),$((after - before))"
}

soku_sync() { timed "$soku" sync --no-share-login -q --remote-soku "$soku" $ssh_opts "$@" "$work/src/" "10.77.0.2:$work/$dst/"; }
rsync_sync() { timed rsync -a "$@" -e "ssh $ssh_opts" "$work/src/" "10.77.0.2:$work/$dst/"; }

# One CSV row: LABEL then the command's figures; a failed command ends the run.
row() {
    local label=$1 figures
    shift
    figures=$("$@") || exit 1
    echo "$label,$figures"
}

echo "round,tool,seconds,wire_bytes"
dst=soku; row "0,soku sync (first)" soku_sync
dst=rsync; row "0,rsync -a (first)" rsync_sync
cp -a "$work/soku" "$work/soku-c"
cp -a "$work/rsync" "$work/rsync-c"
for round in $(seq "$rounds"); do
    echo "round $round: $(python3 "$here/make_tree.py" --change "$work/src" "$round" "$files") files changed" >&2
    dst=soku; row "$round,soku sync" soku_sync
    dst=rsync; row "$round,rsync -a" rsync_sync
    dst=soku-c; row "$round,soku sync --checksum" soku_sync --checksum
    dst=rsync-c; row "$round,rsync -a --checksum" rsync_sync --checksum
done
# Nothing changed since the last round: what a no-op re-run costs.
dst=soku; row "$((rounds + 1)),soku sync (nothing changed)" soku_sync
dst=rsync; row "$((rounds + 1)),rsync -a (nothing changed)" rsync_sync

# Every target matches the source.
for t in soku rsync soku-c rsync-c; do
    diff -r "$work/src" "$work/$t" >/dev/null || { echo "$t differs from the source" >&2; exit 1; }
done
echo "all four targets equal the source (diff -r)" >&2

# --delete with --dry-run lists exactly the extra files and removes nothing.
for i in $(seq 10); do echo extra >"$work/soku/d000/e0$((i % 10))/extra-$i.txt"; done
mkdir -p "$work/soku/extra-dir/deeper" && echo x >"$work/soku/extra-dir/deeper/f"
before=$(find "$work/soku" | sort | md5sum)
ip netns exec "$name-a" "$soku" sync --no-share-login -q -n --delete --remote-soku "$soku" $ssh_opts "$work/src/" \
    "10.77.0.2:$work/soku/" >"$work/dry.out"
after=$(find "$work/soku" | sort | md5sum)
listed=$(grep -c '^would delete: ' "$work/dry.out" || true)
sends=$(grep -c '^would send: ' "$work/dry.out" || true)
want=$( (for i in $(seq 10); do echo "would delete: d000/e0$((i % 10))/extra-$i.txt"; done; echo "would delete: extra-dir") | sort)
got=$(grep '^would delete: ' "$work/dry.out" | sort)
[ "$want" = "$got" ] && exact=yes || exact=no
[ "$before" = "$after" ] && untouched=yes || untouched=no
echo "dry run --delete: $listed paths listed (exactly the 11 extras: $exact), $sends to send, target untouched: $untouched" >&2
