#!/usr/bin/python3
# SPDX-License-Identifier: BSD-2-Clause
"""The nemesis test's checker: every read judged against the writes.

    nemesis_check.py WRITER_LOG READER_LOG [READER_LOG...]

Logs are nemesis_client's. A read of a key that returned version V, and
began at T0, is
  - stale if a PUT of a newer version of that key was acknowledged before
    T0 (the writer has one write of a key in flight at a time, so versions
    of a key are acknowledged in order);
  - phantom if no PUT of V was ever tried;
  - not whole (corrupt) if its bytes are not the value of its key and version.
Prints the counts, and the first few stale or phantom reads; exits 1 if any
read is stale, phantom or corrupt, or if fewer than MIN_READS reads verified
(a run that read nothing proves nothing)."""
import bisect
import collections
import os
import sys

MIN_READS = int(os.environ.get("NEMESIS_MIN_READS", "1000"))


def main():
    acks = collections.defaultdict(list)  # key -> [(t, version)], in t order
    tried = collections.defaultdict(set)
    writes = 0
    with open(sys.argv[1]) as f:
        for line in f:
            p = line.split()
            if len(p) == 3 and p[0] == "T":
                tried[int(p[1])].add(int(p[2]))
            elif len(p) == 4 and p[0] == "A":
                acks[int(p[1])].append((int(p[3]), int(p[2])))
                writes += 1
    # The newest version acknowledged by each time: a running max.
    newest = {}
    for k, a in acks.items():
        a.sort()
        ts, best, m = [], [], 0
        for t, v in a:
            m = max(m, v)
            ts.append(t)
            best.append(m)
        newest[k] = (ts, best)
    n = collections.Counter()
    bad = []
    for path in sys.argv[2:]:
        with open(path) as f:
            for line in f:
                p = line.split()
                if not p:
                    continue
                kind = p[0]
                if kind == "R" and len(p) == 5:
                    k, v, t0 = int(p[1]), int(p[2]), int(p[3])
                    n["reads"] += 1
                    if v not in tried[k]:
                        n["phantom"] += 1
                        bad.append(f"phantom: key {k} version {v} was never written")
                        continue
                    ts, best = newest.get(k, ([], []))
                    i = bisect.bisect_left(ts, t0)
                    if i and best[i - 1] > v:
                        n["stale"] += 1
                        bad.append(f"stale: key {k} read version {v} at {t0}, after version "
                                   f"{best[i - 1]} was acknowledged at {ts[i - 1]}")
                elif kind == "M":
                    n["misses"] += 1
                elif kind == "U":
                    n["unavailable"] += 1
                elif kind == "C":
                    n["corrupt"] += 1
                elif kind == "E":
                    n["errors"] += 1
    print(f" writes acknowledged: {writes}")
    print(f" reads verified: {n['reads']}, stale: {n['stale']}, phantom: {n['phantom']}, "
          f"not whole: {n['corrupt']}")
    print(f" misses: {n['misses']}, unavailable: {n['unavailable']}, other errors: {n['errors']}")
    for b in bad[:10]:
        print("  " + b)
    ok = n["stale"] == 0 and n["phantom"] == 0 and n["corrupt"] == 0 and n["reads"] >= MIN_READS
    if n["reads"] < MIN_READS:
        print(f" too few reads verified ({n['reads']} < {MIN_READS}): the run proves nothing")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
