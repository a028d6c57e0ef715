#!/bin/bash
# Every syscall of interest and every context switch during a soku upload, per process.
# usage: syscalls.sh OUT SOKU_BINARY [soku-bench path args]
# Then: perf script -i OUT/sys.data -F comm,pid,event --comms NAME,tokio-rt-worker |
#         awk '{print $2, $NF}' | sort | uniq -c      (NAME: the binary's file name)
set -e
out=$1; soku=$2; shift 2
bench=${BENCH:?set BENCH to the soku-bench binary, e.g. target/release/soku-bench}
mkdir -p "$out"
ev=""
for s in sendmsg recvmsg sendmmsg recvmmsg epoll_wait epoll_ctl futex pwrite64 write read; do
    ev="$ev -e syscalls:sys_enter_$s"
done
perf record -a -c 1 $ev -e sched:sched_switch -o "$out/sys.data" > "$out/perf.log" 2>&1 &
perf_pid=$!
sleep 1
"$bench" --soku "$soku" --name skcpu --no-smallpkt --no-cpu --no-small-files --no-sharing --tools soku --out "$out/bench" "$@" > "$out/bench.log" 2>&1 || true
kill -INT $perf_pid; wait $perf_pid || true
