#!/usr/bin/env bash
# A 1 GiB get inside an sftp session on an emulated 100 Mbit/s x 100 ms path with 1 %
# random loss each way: soku sftp against OpenSSH's sftp against a plain soku copy,
# same run, alternated. See README.md. Needs root.
#
#   lab/2026-11-29-sftp-get/run.sh [MIB] [ROUNDS] [SFTP_CAP_SECONDS] > results.csv
set -euo pipefail
mib=${1:-1024}
rounds=${2:-2}
cap=${3:-240}
here=$(cd "$(dirname "$0")" && pwd)
soku=${SOKU:-$here/../../target/release/soku}
netem=${SOKU_NETEM:-$here/../../target/release/soku-netem}
name=sg$$
work=$(mktemp -d /tmp/soku-sftp-get.XXXXXX)

cleanup() {
    [ -n "${sshd_pid:-}" ] && kill "$sshd_pid" 2>/dev/null || true
    [ -n "${netem_pid:-}" ] && kill "$netem_pid" 2>/dev/null && wait "$netem_pid" 2>/dev/null || true
    "$netem" down "$name" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/remote" "$work/dst"
head -c "$((mib << 20))" /dev/urandom >"$work/remote/big.bin"
bytes=$(stat -c %s "$work/remote/big.bin")

"$netem" up --name "$name" --rtt 100ms --rate 100mbit --loss 1% --stats-every 0 >"$work/netem.log" 2>&1 &
netem_pid=$!
for _ in $(seq 50); do ip netns list | grep -q "^$name-b" && break; sleep 0.1; done
sleep 0.5
ssh-keygen -q -t ed25519 -N "" -f "$work/host_key"
ssh-keygen -q -t ed25519 -N "" -f "$work/user_key"
cat >"$work/sshd_config" <<CONF
Port 22
ListenAddress 10.77.0.2
HostKey $work/host_key
PidFile $work/sshd.pid
AuthorizedKeysFile $work/user_key.pub
StrictModes no
Subsystem sftp internal-sftp
CONF
ip netns exec "$name-b" /usr/sbin/sshd -D -f "$work/sshd_config" -E "$work/sshd.log" \
    </dev/null >/dev/null 2>&1 &
sshd_pid=$!
sleep 0.5
ssh_opts=(-i "$work/user_key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR)

now() { date +%s.%N; }

# A batch that times its get with the local clock (`!` runs a local command in both).
batch() {
    printf 'lcd %s\n!date +%%s.%%N > %s/get.start\nget %s\n!date +%%s.%%N > %s/get.end\nbye\n' \
        "$work/dst" "$work" "$1" "$work"
}

# Runs a session or copy in the near namespace, bounded by `timeout`; prints
# "whole_seconds,get_seconds,bytes_arrived".
timed() {
    rm -f "$work"/dst/* "$work"/dst/.big* "$work/get.start" "$work/get.end"
    local start end got get
    # Each run as a first one: no shared login, kept server or path memory of another.
    rm -rf "$work/xdg" && mkdir -p "$work/xdg/run" "$work/xdg/cache" && chmod 700 "$work/xdg/run"
    start=$(now)
    ip netns exec "$name-a" env XDG_RUNTIME_DIR="$work/xdg/run" XDG_CACHE_HOME="$work/xdg/cache" \
        timeout -s INT "$cap" "$@" >"$work/last.out" 2>"$work/last.err" || true
    end=$(now)
    got=$(find "$work/dst" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
    if [ -f "$work/dst/.big.bin.soku-part" ] || [ ! -f "$work/dst/big.bin" ]; then
        got=partial:$got
    fi
    if [ -f "$work/get.end" ]; then
        get=$(echo "$(cat "$work/get.end") - $(cat "$work/get.start")" | bc)
    else
        get=
    fi
    echo "$(echo "$end - $start" | bc),$get,$got"
}

soku_sftp() { batch big.bin | timed "$soku" sftp -q --remote-soku "$soku" "${ssh_opts[@]}" -b - "10.77.0.2:$work/remote"; }
open_sftp() { batch "$work/remote/big.bin" | timed sftp -q "${ssh_opts[@]}" -b - 10.77.0.2; }
soku_copy() { timed "$soku" -q --remote-soku "$soku" "${ssh_opts[@]}" "10.77.0.2:$work/remote/big.bin" "$work/dst/"; }

echo "round,tool,whole_seconds,get_seconds,bytes"
for round in $(seq "$rounds"); do
    echo "$round,soku sftp,$(soku_sftp)"
    echo "$round,soku copy,$(soku_copy)"
    echo "$round,OpenSSH sftp,$(open_sftp)"
done
echo "file: $bytes bytes; sftp bounded at $cap s (a row with partial: did not finish)" >&2
