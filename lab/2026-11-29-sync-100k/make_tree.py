#!/usr/bin/env python3
"""A tree of N files with sizes like a source tree's (log-normal, median 3 KiB),
50 files per directory, two levels deep; random bytes, deterministic per seed.
   make_tree.py DIR [N]
And the change of one round: `make_tree.py --change DIR ROUND` rewrites every
100th file (offset by ROUND) with new bytes and a new size, and a new mtime."""
import os, random, sys, time

def path_of(root, i):
    return os.path.join(root, "d%03d" % (i // 1000), "e%02d" % (i // 50 % 20), "f%05d.src" % i)

def size_of(rng):
    return min(int(rng.lognormvariate(8.0, 1.2)), 2 << 20)  # e^8 ~ 2981 bytes

def make(root, n):
    rng = random.Random(1)
    for i in range(n):
        p = path_of(root, i)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(rng.randbytes(size_of(rng)))

def change(root, n, rnd):
    rng = random.Random(1000 + rnd)
    now = time.time()
    changed = 0
    for i in range(rnd % 100, n, 100):
        with open(path_of(root, i), "wb") as f:
            f.write(rng.randbytes(size_of(rng)))
        os.utime(path_of(root, i), (now, now))
        changed += 1
    print(changed)

if sys.argv[1] == "--change":
    change(sys.argv[2], int(sys.argv[4]) if len(sys.argv) > 4 else 100_000, int(sys.argv[3]))
else:
    make(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100_000)
