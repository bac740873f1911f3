# SPDX-License-Identifier: BSD-2-Clause
"""AsyncKVPool: the same pool for asyncio. Its completions are queued in
C, whose eventfd wakes the loop (add_reader), and drained in batches."""
import asyncio
import ctypes
import errno

from . import _errors as e
from . import _native as n
from ._pool import (_Base, _buffers, _chunks, _exists_result, _key, _key_list, _result,
                    _ttl_ms, _what)


class AsyncKVPool(_Base):
    """The same pool for asyncio: every method is a coroutine. The pool has
    no threads of its own: its connections run on the asyncio loop (the
    library's qpg_kv_target_run, when its fd is readable and after each
    batch is submitted), so no request crosses threads. Opening connects in
    a worker thread, so the loop goes on meanwhile. (threads and
    busy_poll_us are not used.) Over a cluster (cluster=, as KVPool's), the
    members' pools run on threads of their own, and their completions wake
    the loop through the queue's fd."""

    def __init__(self, *args, **kw):
        self._args, self._kw = args, kw
        self._handle = None
        self._regs = {}
        self._cq = None
        self._fd = None
        self._loop = None
        self._pending = {}  # token -> (future, what holds the buffers, op, key, cap, alloc)
        self._outq = []  # queued for the next _flush: (token, op, key, value, vlen, buf, cap)
        self._next = 0
        self._batch = bytearray(n.CQE.size * 256)  # struct qpg_kv_cq_entry[256]
        self._batch_view = ctypes.c_char.from_buffer(self._batch)  # (held: never resized)
        self._batch_addr = ctypes.addressof(self._batch_view)

    async def open(self):
        loop = asyncio.get_running_loop()
        cq = n.lib.qpg_kv_cq_new()
        if not cq:
            raise MemoryError("qpgate: no completion queue")
        try:
            await loop.run_in_executor(
                None, lambda: self._init(*self._args, **self._kw, _external=True))
        except BaseException:
            n.lib.qpg_kv_cq_free(cq)
            raise
        self._cq, self._loop = cq, loop
        fd = n.lib.qpg_kv_target_fd(self._handle)
        # A target with threads of its own (a cluster) runs no loop here:
        # its completions make the queue's fd readable.
        self._fd = fd if fd >= 0 else n.lib.qpg_kv_cq_fd(cq)
        loop.add_reader(self._fd, self._turn)
        return self

    def _turn(self):
        """One turn of the pool's loop, then the completions it made."""
        try:
            handle = self._take()
        except e.ConnectionError:
            return
        try:
            n.lib.qpg_kv_target_run(handle)
        finally:
            self._give()
        self._drain()

    def _drain(self):
        batch, cap = self._batch, len(self._batch) // n.CQE.size
        view = memoryview(batch)
        while True:
            got = n.lib.qpg_kv_cq_poll(self._cq, self._batch_addr, cap)
            for token, status, vlen, data in n.CQE.iter_unpack(view[:got * n.CQE.size]):
                fut, keep, op, k, cap_, alloc = self._pending.pop(token)
                try:
                    if op == n.EXISTS:  # K: how many keys; KEEP: the bitmap
                        r = _exists_result(status, k, keep.raw)
                    else:
                        r = _result(op, k, status, vlen, data, cap_, alloc)
                except BaseException as exc:
                    if not fut.cancelled():
                        fut.set_exception(exc)
                else:
                    if not fut.cancelled():
                        fut.set_result(r)
                finally:
                    del keep  # C is done with the buffers
            if got < cap:
                return

    def _call(self, op, key, value=None, out=None, ttl_ms=0):
        """Queues one request; the loop hands what has queued to C in one
        call (_flush), at its next turn."""
        if asyncio.get_running_loop() is not self._loop:
            raise RuntimeError("qpgate: an AsyncKVPool is used from the loop that opened it")
        if not self._handle:
            raise e.ConnectionError(0, "the pool is closed")
        k = _key(key)
        keep, vaddr, vsize, oaddr, osize = _buffers(value, out)
        fut = self._loop.create_future()
        self._next += 1
        token = self._next
        self._pending[token] = (fut, keep, op, k, osize, op == n.GET and out is None)
        self._outq.append((token, op, k, vaddr, vsize, oaddr, osize, ttl_ms))
        if len(self._outq) == 1:
            self._loop.call_soon(self._flush)
        return fut

    def _flush(self):
        q, self._outq = self._outq, []
        if not q:
            return
        # The keys side by side in one bytes object (C copies each).
        keys = b"".join([r[2] for r in q])
        kaddr = n.address(keys)
        reqs = bytearray(n.REQ.size * len(q))
        pack, size, off = n.REQ.pack_into, n.REQ.size, 0
        for i, (token, op, k, vaddr, vsize, oaddr, osize, ttl_ms) in enumerate(q):
            pack(reqs, i * size, token, kaddr + off, vaddr or 0, oaddr or 0, vsize, osize,
                 len(k), op, ttl_ms)
            off += len(k)
        try:
            handle = self._take()
        except e.ConnectionError:
            got, rc = 0, -errno.ECANCELED
        else:
            try:
                got = rc = n.lib.qpg_kv_call_many(
                    handle, ctypes.addressof(ctypes.c_char.from_buffer(reqs)), len(q),
                    n.CQ_DONE, self._cq)
                n.lib.qpg_kv_target_run(handle)  # sent now, not at the loop's next turn
            finally:
                self._give()
            got = max(got, 0)
        del keys
        for token, op, k, *_ in q[got:]:  # no completion will come for these
            fut = self._pending.pop(token)[0]
            if not fut.cancelled():
                fut.set_exception(e.from_status(rc if rc < 0 else -errno.ENOMEM, _what(op, k)))

    async def put(self, key, value, ttl=None):
        await self._call(n.PUT, key, value=value, ttl_ms=_ttl_ms(ttl))

    async def get(self, key):
        return await self._call(n.GET, key)

    async def get_into(self, key, out):
        return await self._call(n.GET, key, out=out)

    async def delete(self, key):
        return await self._call(n.DEL, key)

    def _exists(self, keys):
        """One EXISTS batch, submitted now (its keys are copied in the call)."""
        if asyncio.get_running_loop() is not self._loop:
            raise RuntimeError("qpgate: an AsyncKVPool is used from the loop that opened it")
        keep, addr = _key_list(keys)
        bits = ctypes.create_string_buffer(n.EXISTS_MAX // 8)
        fut = self._loop.create_future()
        handle = self._take()
        self._next += 1
        token = self._next
        self._pending[token] = (fut, bits, n.EXISTS, len(keys), 0, False)
        try:
            rc = n.lib.qpg_kv_call_exists(handle, addr, len(keys), bits, n.CQ_DONE, self._cq,
                                          token)
            if rc == 0:
                n.lib.qpg_kv_target_run(handle)  # sent now
        finally:
            self._give()
            del keep
        if rc != 0:
            self._pending.pop(token)
            raise e.from_status(rc, _what(n.EXISTS, len(keys)))
        return fut

    async def batch_put(self, keys, values, ttl=None):
        """As KVPool.batch_put: handed to C in one call."""
        keys, values = list(keys), list(values)
        if len(keys) != len(values):
            raise ValueError("qpgate: batch_put takes as many values as keys")
        ms = _ttl_ms(ttl)
        rs = await asyncio.gather(*(self._call(n.PUT, k, value=v, ttl_ms=ms)
                                    for k, v in zip(keys, values)), return_exceptions=True)
        for r in rs:
            if isinstance(r, BaseException):
                raise r

    async def batch_get_into(self, keys, buffers):
        """As KVPool.batch_get_into: handed to C in one call."""
        keys, buffers = list(keys), list(buffers)
        if len(keys) != len(buffers):
            raise ValueError("qpgate: batch_get_into takes as many buffers as keys")
        rs = await asyncio.gather(*(self._call(n.GET, k, out=b) for k, b in zip(keys, buffers)),
                                  return_exceptions=True)
        for r in rs:
            if isinstance(r, BaseException):
                raise r
        return rs

    async def exists(self, key):
        return (await self._exists([key]))[0]

    async def exists_many(self, keys):
        """As KVPool.exists_many; batches of 256 go out together."""
        parts = await asyncio.gather(*(self._exists(p) for p in _chunks(keys)))
        return [h for part in parts for h in part]

    async def batch_exists(self, keys):
        """As KVPool.batch_exists: the stored prefix's length."""
        have = await self.exists_many(keys)
        return next((i for i, h in enumerate(have) if not h), len(have))

    def close(self):
        """Fails what is in flight (qpgate.ConnectionError) and closes."""
        if self._loop and self._fd is not None:
            try:
                self._loop.remove_reader(self._fd)
            except Exception:  # the loop is closed
                pass
            self._fd = None
        if self._loop and not self._loop.is_closed():
            self._flush()  # what was queued is answered too (failed, once closed)
        self._destroy()
        if self._cq:
            # Every completion is queued by now, the failed ones too.
            if self._loop and not self._loop.is_closed():
                self._drain()
            else:
                self._pending.clear()
            n.lib.qpg_kv_cq_free(self._cq)
            self._cq = None

    async def aclose(self):
        loop = asyncio.get_running_loop()
        if self._fd is not None:
            loop.remove_reader(self._fd)
            self._fd = None
        self._flush()
        await loop.run_in_executor(None, self._destroy)
        if self._cq:
            self._drain()
            n.lib.qpg_kv_cq_free(self._cq)
            self._cq = None

    async def __aenter__(self):
        return await self.open()

    async def __aexit__(self, *exc):
        await self.aclose()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _fail(exc, loop):
    fut = loop.create_future()
    fut.set_exception(exc)
    return fut
