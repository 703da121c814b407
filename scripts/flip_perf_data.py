#!/usr/bin/env python3
"""Byte-flip robustness of `profreport --import` (issue 13.8).

usage: scripts/flip_perf_data.py PROFREPORT PERF_DATA N SEED

Writes N copies of PERF_DATA with 1-8 random bytes changed (half of them
in the first 4 KiB: header, attributes, feature table) and imports each
under a 4 GB address-space limit and a 20 s timeout. Prints the outcomes
by exit status; anything but exit 0/1 (a panic is 101, an abort signal 6,
a hang 'timeout') is a bug, its input kept in /tmp/flips/N.data.
"""
import os, random, subprocess, sys

rep, src_path, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
src = open(src_path, 'rb').read()
random.seed(seed)
os.makedirs('/tmp/flips', exist_ok=True)
out = {}
for i in range(n):
    b = bytearray(src)
    for _ in range(random.randint(1, 8)):
        top = len(b) if random.random() < 0.5 else min(len(b), 4096)
        b[random.randrange(top)] = random.randrange(256)
    p = f'/tmp/flips/{i}.data'
    open(p, 'wb').write(b)
    try:
        r = subprocess.run(['bash', '-c', f'ulimit -v 4000000; exec "$0" --import "$1" -l >/dev/null 2>&1', rep, p], timeout=20)
        k = f'exit{r.returncode}' if r.returncode >= 0 else f'sig{-r.returncode}'
    except subprocess.TimeoutExpired:
        k = 'timeout'
    out.setdefault(k, []).append(i)
    if k in ('exit0', 'exit1'):
        os.remove(p)
print({k: len(v) for k, v in out.items()})
for k, v in out.items():
    if k not in ('exit0', 'exit1'):
        print(k, v[:10])
