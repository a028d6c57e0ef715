#!/usr/bin/env python3
"""Joins an A/B's summary (bench/results/2026-11-24/cpu-per-byte/ab.sh) with the
`perf stat` files its wrappers wrote for each soku process, in run order.

usage: collect.py SUMMARY PSTAT_DIR [SKIP]   (SKIP: runs of each wrapper to pass over,
when one PSTAT_DIR holds two A/Bs with the same wrapper names)
A wrapper named w-NAME writes PSTAT_DIR/NAME.{cli,srv}.PID; the client's short
`soku` runs before the copy (under 50 ms of task-clock) are left out.
"""
import csv, os, sys

summary, pdir = sys.argv[1], sys.argv[2]
skip = int(sys.argv[3]) if len(sys.argv) > 3 else 0

def stat(path):
    out = {}
    for line in open(path):
        f = line.strip().split(',')
        if len(f) > 2 and f[0] and f[0][0].isdigit():
            out[f[2]] = float(f[0])
    return out

files = sorted(os.listdir(pdir), key=lambda n: os.path.getmtime(os.path.join(pdir, n)))
runs = {}
for name in files:
    prefix, side, _ = name.split('.')
    s = stat(os.path.join(pdir, name))
    if side == 'cli' and s.get('task-clock', 0) < 50:
        continue
    runs.setdefault((prefix, side), []).append(s)

w = csv.writer(sys.stdout)
w.writerow(['binary', 'round', 'pct_of_link', 'client_cpu_s', 'server_cpu_s', 'client_peak_rss_mib',
            'server_peak_rss_mib', 'soku_client_task_clock_ms', 'soku_server_task_clock_ms',
            'soku_server_context_switches'])
seen = {}
for line in open(summary):
    binary, rnd, rest = line.split()
    f = rest.split(',')
    name = binary.removeprefix('w-')
    k = seen.get(name, 0) + skip
    seen[name] = seen.get(name, 0) + 1
    cli, srv = runs[(name, 'cli')][k], runs[(name, 'srv')][k]
    w.writerow([name, rnd, f[3], f[4], f[5], f[6], f[7], cli['task-clock'], srv['task-clock'],
                int(srv['context-switches'])])
