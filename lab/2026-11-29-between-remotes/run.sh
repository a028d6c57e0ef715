#!/usr/bin/env bash
# A copy between two remote hosts at one site, made from a host far away: soku through
# this host (-3, its default) and with the origin copying (-R), against scp -3 (scp's
# default) and scp -R, same run. See README.md. Needs root.
#
#   lab/2026-11-29-between-remotes/run.sh [SIZE_MIB] [ROUNDS] > results.csv
#
# Three hosts: local (NAME-a) reaches the site's router (NAME-b) over the emulated path
# (100 Mbit/s, 100 ms RTT); the origin (NAME-o) and the destination (NAME-d) hang off
# the router on veth links (the site's LAN: no emulation, a few Gbit/s).
set -euo pipefail
size_mib=${1:-200}
rounds=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
soku=${SOKU:-$here/../../target/release/soku}
netem=${SOKU_NETEM:-$here/../../target/release/soku-netem}
name=br$$
user=sokubetween
work=$(mktemp -d /tmp/soku-between.XXXXXX)
chmod 755 "$work"

cleanup() {
    for pid in ${sshd_pids:-}; do kill "$pid" 2>/dev/null || true; done
    for _ in $(seq 50); do
        pkill -u "$user" >/dev/null 2>&1 || break
        sleep 0.1
    done
    userdel -r "$user" >/dev/null 2>&1 || true
    [ -n "${netem_pid:-}" ] && kill "$netem_pid" 2>/dev/null && wait "$netem_pid" 2>/dev/null || true
    ip netns del "$name-o" 2>/dev/null || true
    ip netns del "$name-d" 2>/dev/null || true
    "$netem" down "$name" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

"$netem" up --name "$name" --rtt 100ms --rate 100mbit --stats-every 0 >"$work/netem.log" 2>&1 &
netem_pid=$!
for _ in $(seq 50); do ip netns list | grep -q "^$name-b" && break; sleep 0.1; done
sleep 0.5
ip netns exec "$name-b" sysctl -qw net.ipv4.ip_forward=1
for side in o d; do
    n=$([ $side = o ] && echo 1 || echo 2)
    ip netns add "$name-$side"
    ip link add "v$side$$" type veth peer name "w$side$$"
    ip link set "v$side$$" netns "$name-b"
    ip link set "w$side$$" netns "$name-$side"
    ip -n "$name-b" addr add "10.78.$n.1/24" dev "v$side$$"
    ip -n "$name-$side" addr add "10.78.$n.2/24" dev "w$side$$"
    ip -n "$name-b" link set "v$side$$" up
    ip -n "$name-$side" link set "w$side$$" up
    ip -n "$name-$side" link set lo up
    ip -n "$name-$side" route add default via "10.78.$n.1"
done
tun=$(ip -n "$name-a" -o link show | awk -F': ' '$2 != "lo" { print $2; exit }')
ip -n "$name-a" route add 10.78.0.0/16 via 10.77.0.2 dev "${tun%@*}"

# One account on all three hosts (they share this machine's users and files), with the
# ssh config that names the site's hosts: scp -R's scp on the origin runs
# /usr/bin/ssh, which reads only the account's own ~/.ssh/config.
userdel -r "$user" >/dev/null 2>&1 || true
useradd --create-home --shell /bin/bash "$user"
home=$(getent passwd "$user" | cut -d: -f6)
su - "$user" -c 'mkdir -p .ssh && chmod 700 .ssh && ssh-keygen -q -t ed25519 -N "" -f .ssh/id_ed25519 &&
    cp .ssh/id_ed25519.pub .ssh/authorized_keys'
cat >"$home/.ssh/config" <<CONF
Host origin
    HostName 10.78.1.2
Host destination
    HostName 10.78.2.2
Host *
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
    BatchMode yes
CONF
chown "$user" "$home/.ssh/config"
install -m 755 "$soku" "$work/soku"
ssh-keygen -q -t ed25519 -N "" -f "$work/host_key"
for side in o d; do
    n=$([ $side = o ] && echo 1 || echo 2)
    cat >"$work/sshd_$side" <<CONF
ListenAddress 10.78.$n.2
HostKey $work/host_key
PidFile $work/sshd_$side.pid
Subsystem sftp internal-sftp
UsePAM yes
CONF
    ip netns exec "$name-$side" /usr/sbin/sshd -D -f "$work/sshd_$side" -E "$work/sshd_$side.log" \
        </dev/null >/dev/null 2>&1 &
    sshd_pids="${sshd_pids:-} $!"
done
sleep 0.5

mkdir -p "$work/src" "$work/dst"
chown "$user" "$work/src" "$work/dst"
head -c $((size_mib << 20)) /dev/urandom >"$work/src/data.bin"
chmod 644 "$work/src/data.bin"
want=$(b3sum --no-names "$work/src/data.bin" 2>/dev/null || sha256sum "$work/src/data.bin" | cut -d' ' -f1)
sum() { b3sum --no-names "$1" 2>/dev/null || sha256sum "$1" | cut -d' ' -f1; }

# One copy from the local host as the account; prints its wall seconds, after checking
# what arrived.
copy() {
    rm -f "$work/dst/data.bin"
    # Each copy a first one: no shared login or kept server left, no remembered path.
    pkill -u "$user" >/dev/null 2>&1 || true
    sleep 0.5
    rm -rf "$home/.cache/soku/paths"
    local start end
    start=$(date +%s.%N)
    ip netns exec "$name-a" su - "$user" -c "$* origin:$work/src/data.bin destination:$work/dst/" \
        >"$work/last.out" 2>"$work/last.err" || {
        cat "$work/last.err" >&2
        exit 1
    }
    end=$(date +%s.%N)
    [ "$(sum "$work/dst/data.bin")" = "$want" ] || { echo "$* delivered other bytes" >&2; exit 1; }
    echo "$end - $start" | bc
}

row() {
    local label=$1 secs
    shift
    secs=$(copy "$@") || exit 1
    echo "$round,$label,$secs"
}

echo "round,tool,seconds"
for round in $(seq "$rounds"); do
    row "soku (through here, its default)" "$work/soku" -q --remote-soku "$work/soku"
    row "soku -R" "$work/soku" -q -R --remote-soku "$work/soku"
    row "scp (through here, its default)" scp -q
    row "scp -R" scp -q -R
done
