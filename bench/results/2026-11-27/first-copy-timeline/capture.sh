#!/bin/bash
# Stands in for soku in the bench (`--soku .../capture.sh`): a copy runs the real soku
# (`soku-real` beside this script) while tcpdump captures the client's side of the
# emulated link into $PCAP_DIR (default /tmp/pcap), one file per copy. On the server
# (`soku serve`, started through ssh with the same path) and for ssh's dialer it only
# runs soku. The 0.3 s before and 0.2 s after each copy let tcpdump start and flush:
# the bench's own times for this stand-in are 0.5 s long; read the captures instead.
real="$(dirname "$(readlink -f "$0")")/soku-real"
case "$1" in serve|proxy) exec "$real" "$@" ;; esac
dir=${PCAP_DIR:-/tmp/pcap}
mkdir -p "$dir"
tcpdump -i soku0 -n -s 128 -w "$dir/run-$$.pcap" >/dev/null 2>&1 &
capture=$!
sleep 0.3
"$real" "$@"
rc=$?
sleep 0.2
kill "$capture"
wait "$capture" 2>/dev/null
exit $rc
