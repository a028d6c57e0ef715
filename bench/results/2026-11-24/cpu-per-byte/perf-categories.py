#!/usr/bin/env python3
"""Where the CPU went: `perf script -F pid,tid,event,ip,sym,dso` output (cpu-clock
samples with call chains) of the given pids (comma-separated), sorted into categories
by the leaf frame and, for kernel frames, by the syscall or fault under it.

usage: perf-categories.py PIDS [TOP] < script.txt
"""
import collections
import re
import sys

PIDS = set(sys.argv[1].split(','))
TOP = int(sys.argv[2]) if len(sys.argv) > 2 else 0

# Kernel samples: the first of these found in the call chain (leaf to root) names it.
KERNEL = [
    ('page_fault', 'kernel: page faults (zeroing new memory)'),
    ('sendmsg', 'kernel: UDP send (sendmsg, GSO, path to the peer)'),
    ('sendmmsg', 'kernel: UDP send (sendmsg, GSO, path to the peer)'),
    ('recvmmsg', 'kernel: UDP receive (recvmmsg, checksum, copy)'),
    ('recvmsg', 'kernel: UDP receive (recvmmsg, checksum, copy)'),
    ('pwrite', 'kernel: file write / read'),
    ('pread', 'kernel: file write / read'),
    ('ksys_read', 'kernel: file write / read'),
    ('epoll_wait', 'kernel: sleep/wakeup (epoll_wait, futex, switches)'),
    ('futex', 'kernel: sleep/wakeup (epoll_wait, futex, switches)'),
    ('schedule', 'kernel: sleep/wakeup (epoll_wait, futex, switches)'),
    ('finish_task_switch', 'kernel: sleep/wakeup (epoll_wait, futex, switches)'),
]
USER = [
    (r'blake3', 'BLAKE3 (chunk hashes)'),
    (r'aes|gcm|ghash|chacha|poly1305|ring_core|HeaderProtection|PacketKey', 'crypto (AES-GCM, header protection)'),
    (r'memmove|memcpy|memset', 'memcpy (libc)'),
    (r'^mi_|^_mi_|malloc|free', 'malloc/free (mimalloc)'),
    (r'quinn_proto', 'quinn-proto (packets, ACKs, streams, loss recovery)'),
    (r'quinn', 'quinn (endpoint/connection drivers, quinn-udp)'),
    (r'tokio', 'tokio (scheduler, wakers, timers, channels)'),
    (r'tracing', 'tracing spans'),
    (r'soku|zstd', 'soku (engine, proto, soku-cc)'),
    (r'clock_gettime|Timespec|Instant', 'clock reads'),
]


def classify(frames):
    sym, dso = frames[0]
    if 'kernel' in dso:
        chain = ' '.join(f[0] for f in frames if 'kernel' in f[1])
        for key, name in KERNEL:
            if key in chain:
                return name
        return 'kernel: other (interrupts, softirq, syscall entry/exit)'
    for pattern, name in USER:
        if re.search(pattern, sym, re.I):
            return name
    return 'other user space'


cats, syms = collections.Counter(), collections.Counter()
cur, frames = False, []


def flush():
    if cur and frames:
        cats[classify(frames)] += 1
        syms[frames[0][0][:90]] += 1


for line in sys.stdin:
    if not line.strip():
        flush()
        cur, frames = False, []
    elif not line.startswith((' ', '\t')):
        cur = line.split()[0].split('/')[0] in PIDS and 'cpu-clock' in line
        frames = []
    elif cur:
        m = re.match(r'\s*[0-9a-f]+\s+(.*)\s+\((.*)\)\s*$', line)
        if m:
            frames.append((re.sub(r'\+0x[0-9a-f]+$', '', m.group(1).strip()), m.group(2)))
flush()
total = sum(cats.values())
print(f'samples\t{total}')
for c, n in cats.most_common():
    print(f'{100 * n / total:.1f}\t{c}')
if TOP:
    print('-- leaf symbols')
    for s, n in syms.most_common(TOP):
        print(f'{100 * n / total:.1f}\t{s}')
