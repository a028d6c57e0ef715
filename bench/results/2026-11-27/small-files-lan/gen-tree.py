#!/usr/bin/env python3
"""A source-like tree for local copies: 20 000 files of random bytes in 1 250
directories (two levels), sizes drawn log-normally (median ~4 KiB, capped at 1 MiB).
Usage: gen-tree.py DIR  (writes DIR/src)."""
import os
import random
import sys

root = os.path.join(sys.argv[1], "src")
random.seed(7)
FILES, DIRS = 20000, 1250
for d in range(DIRS):
    os.makedirs(f"{root}/d{d // 50}/e{d}", exist_ok=True)
for i in range(FILES):
    d = i % DIRS
    size = int(min(max(random.lognormvariate(8.3, 1.2), 0), 1 << 20))
    with open(f"{root}/d{d // 50}/e{d}/f{i}.c", "wb") as f:
        f.write(os.urandom(size))
