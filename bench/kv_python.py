#!/usr/bin/python3
# SPDX-License-Identifier: BSD-2-Clause
"""GETs/s through qpgate.AsyncKVPool, shaped as qpgate-kvbench runs them:
KEYS keys of SIZE bytes preloaded, WORKERS coroutines each GETting keys in
turn into its own buffer and checking every value, for SECONDS.

    kv_python.py HOST SERVERNAME CA PORT TRANSPORT CONNS WORKERS SIZE KEYS SECONDS
Prints "python: N GETs in S s, R GETs/s, all verified"."""
import asyncio
import sys
import time

import qpgate


def value(i, size):
    head = f"value-{i}-".encode()
    return (head * (size // len(head) + 1))[:size]


async def main():
    host, name, ca, port, transport = sys.argv[1:6]
    conns, workers, size, keys, secs = map(int, sys.argv[6:11])
    async with qpgate.AsyncKVPool(host, name, ca=ca, port=int(port), transport=transport,
                                  conns=conns) as kv:
        expect = [value(i, size) for i in range(keys)]
        await asyncio.gather(*(kv.put(b"py-%d" % i, expect[i]) for i in range(keys)))
        count = [0] * workers
        bad = [0]
        end = time.monotonic() + secs

        async def worker(w):
            buf = bytearray(size)
            i = w
            while time.monotonic() < end:
                k = i % keys
                n = await kv.get_into(b"py-%d" % k, buf)
                # (bytearray == bytes is one memcmp; a memoryview compares
                # item by item, 4 us for 4 KiB, which perf showed.)
                if n != size or buf != expect[k]:
                    bad[0] += 1
                count[w] += 1
                i += workers
        t0 = time.monotonic()
        await asyncio.gather(*(worker(w) for w in range(workers)))
        dt = time.monotonic() - t0
    total = sum(count)
    print(f"python: {total} GETs in {dt:.2f} s, {total / dt:.0f} GETs/s, "
          f"{'all verified' if not bad[0] else f'{bad[0]} WRONG'}")
    return 1 if bad[0] else 0


sys.exit(asyncio.run(main()))
