#!/bin/bash
# A/B, alternated: ROUNDS times each of the soku binaries OLD and NEW copies SRC over
# loopback to DST (a path on the same host), every copy a first one (a fresh login, its
# own XDG homes, the kept server and the shared ssh login ended after it). Before each
# copy SRC is read once, so that it starts in the page cache. Records the whole
# command's wall time and the client's CPU (soku with its ssh, from GNU time) in ab.csv
# under OUT; each copy's target is compared with the source and removed.
# Usage: SSH_ARGS="-P PORT -i KEY -o ..." ab.sh OUT ROUNDS OLD NEW SRC USER@HOST DST
set -euo pipefail
out=$1 rounds=$2 old=$3 new=$4 src=$5 host=$6 dst=$7
mkdir -p "$out"
gb=$(stat -c %s "$src" | awk '{ print $1 / 1e9 }')
echo "round,binary,wall_s,client_cpu_s,client_cpu_s_per_gb" > "$out/ab.csv"
want=$(b3sum --no-names "$src" 2>/dev/null || sha256sum "$src" | cut -d' ' -f1)
digest() { b3sum --no-names "$1" 2>/dev/null || sha256sum "$1" | cut -d' ' -f1; }
for r in $(seq 1 "$rounds"); do
    for which in old new; do
        bin=$([ "$which" = old ] && echo "$old" || echo "$new")
        home=$(mktemp -d)
        cat "$src" > /dev/null
        # shellcheck disable=SC2086
        XDG_CACHE_HOME=$home XDG_CONFIG_HOME=$home XDG_RUNTIME_DIR=$home \
            /usr/bin/time -f "%e,%U,%S" -o "$out/time.txt" \
            "$bin" -q $SSH_ARGS --remote-soku "$bin" "$src" "$host:$dst"
        for socket in "$home"/soku/ssh/*; do
            [ -S "$socket" ] && ssh -o ControlPath="$socket" -O exit shared-login 2>/dev/null || true
        done
        for pid in $(pgrep -x soku-kept); do kill "$pid"; done
        [ "$(digest "$dst")" = "$want" ] || { echo "round $r $which: the copy differs" >&2; exit 1; }
        rm -rf "$home" "$dst"
        awk -F, -v r="$r" -v w="$which" -v gb="$gb" \
            '{ printf "%s,%s,%.3f,%.3f,%.3f\n", r, w, $1, $2 + $3, ($2 + $3) / gb }' \
            "$out/time.txt" >> "$out/ab.csv"
        sleep 1
    done
done
cat "$out/ab.csv"
