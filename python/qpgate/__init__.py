# SPDX-License-Identifier: BSD-2-Clause
"""qpgate: the KV cache of a qpgate server (libqpgate-kv.so.0), from Python.

    import qpgate
    with qpgate.KVPool("10.0.0.1", "server.example.org", ca="ca.crt") as kv:
        kv.put(b"layer0/blk17", memoryview(buf))
        n = kv.get_into(b"layer0/blk17", out)
        v = kv.get(b"layer0/blk17")          # bytes, or None on a miss
        n = kv.batch_exists(blocks)         # the cached prefix of a prompt's blocks
    async with qpgate.AsyncKVPool(...) as kv:
        await asyncio.gather(*(kv.get(k) for k in keys))
"""
from ._async import AsyncKVPool
from ._errors import (ConnectionError, CorruptValue, Error, KeyTooLarge, OverQuota,
                      StoreFull, Unavailable, ValueTooLarge)
from ._pool import MAX_KEY
from ._sync import KVPool

__all__ = ["KVPool", "AsyncKVPool", "Error", "ConnectionError", "KeyTooLarge", "ValueTooLarge",
           "StoreFull", "OverQuota", "Unavailable", "CorruptValue", "MAX_KEY"]
