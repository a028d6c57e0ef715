#!/usr/bin/env bash
# What sending soku to a remote that has none costs on 100 Mbit/s x 100 ms, run as a
# new user account that has nothing installed: see README.md. Needs root.
#
#   lab/2026-11-29-deploy-cost/run.sh dist/soku-x86_64-unknown-linux-musl [SIZE_MIB] [PAIRS]
set -euo pipefail
binary=$(realpath "$1")
size_mib=${2:-100}
pairs=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
netem=${SOKU_NETEM:-$here/../../target/release/soku-netem}
user=sokudeploy
name=dc$$
work=$(mktemp -d /tmp/soku-deploy-cost.XXXXXX)
chmod 755 "$work"

cleanup() {
    [ -n "${sshd_pid:-}" ] && kill "$sshd_pid" 2>/dev/null || true
    for _ in $(seq 50); do
        pkill -u "$user" >/dev/null 2>&1 || break
        sleep 0.1
    done
    [ -n "${netem_pid:-}" ] && kill "$netem_pid" 2>/dev/null && wait "$netem_pid" 2>/dev/null || true
    "$netem" down "$name" >/dev/null 2>&1 || true
    userdel -r "$user" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# A new account, as useradd makes it: its own home, the system's shell setup, no soku.
userdel -r "$user" >/dev/null 2>&1 || true
useradd --create-home --shell /bin/bash "$user"
home=$(getent passwd "$user" | cut -d: -f6)
su - "$user" -c 'mkdir -p .ssh && ssh-keygen -q -t ed25519 -N "" -f .ssh/id_ed25519 &&
    cp .ssh/id_ed25519.pub .ssh/authorized_keys && mkdir -p src && chmod 700 .ssh'
install -m 755 "$binary" "$work/soku"
su - "$user" -c "head -c $((size_mib << 20)) /dev/urandom > src/data.bin"

# The emulated path, and sshd (OpenSSH, this machine's) in its far namespace.
"$netem" up --name "$name" --rtt 100ms --rate 100mbit --stats-every 0 >"$work/netem.log" 2>&1 &
netem_pid=$!
for _ in $(seq 50); do ip netns list | grep -q "^$name-b" && break; sleep 0.1; done
sleep 0.5
ssh-keygen -q -t ed25519 -N "" -f "$work/host_key"
cat >"$work/sshd_config" <<CONF
Port 22
ListenAddress 10.77.0.2
HostKey $work/host_key
PidFile $work/sshd.pid
UsePAM yes
CONF
ip netns exec "$name-b" /usr/sbin/sshd -D -f "$work/sshd_config" -E "$work/sshd.log" \
    </dev/null >/dev/null 2>&1 &
sshd_pid=$!
sleep 0.5

# One copy as the new user from the near namespace, with default settings; prints its
# wall seconds. The shared login and kept server the copy before left are ended first
# (every process of the account), so that each copy logs in as a first one does.
copy() {
    pkill -u "$user" >/dev/null 2>&1 || true
    sleep 0.5
    # Each copy a first one for the path too: no remembered path.
    ip netns exec "$name-a" su - "$user" -c "rm -rf dst .cache/soku/paths; mkdir dst;
        s=\$(date +%s.%N);
        $work/soku -o StrictHostKeyChecking=accept-new $* src/data.bin \
            $user@10.77.0.2:dst/ 2>>copy.log || exit 1;
        e=\$(date +%s.%N); echo \"\$e - \$s\" | bc"
}

echo "case,pair,seconds"
for pair in $(seq "$pairs"); do
    # First copy, nothing on the remote: soku sends itself.
    rm -rf "$home/.cache/soku/bin" "$home/.local/bin/soku"
    printf 'deploy,%s,%s\n' "$pair" "$(copy)"
    # Second copy: the one sent is found in the cache.
    printf 'cached,%s,%s\n' "$pair" "$(copy)"
    # First copy with soku already installed by hand: nothing to send or find.
    rm -rf "$home/.cache/soku/bin"
    su - "$user" -c "mkdir -p .local/bin && cp $work/soku .local/bin/soku"
    printf 'installed,%s,%s\n' "$pair" "$(copy)"
done
grep -h "installed soku" "$home/copy.log" | head -1 >&2
cmp "$home/src/data.bin" "$home/dst/data.bin" && echo "same bytes at the far end" >&2
