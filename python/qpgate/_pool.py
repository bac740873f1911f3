# SPDX-License-Identifier: BSD-2-Clause
"""KVPool and AsyncKVPool: a pool of secure connections to a qpgate KV
server. Each request is handed to the C pool (qpg_kv_call) with the
caller's buffers, and its completion comes back on a pool thread through
one callback: a sync caller waits on an event with the GIL released; an
asyncio caller gets its future set through loop.call_soon_threadsafe."""
import asyncio
import atexit
import ctypes
import itertools
import threading
import weakref

from . import _errors as e
from . import _native as n

MAX_KEY = 250

_pending = {}  # token -> _Op: what a request holds until its completion
_tokens = itertools.count(1)


class _Op:
    __slots__ = ("bufs", "notify")

    def __init__(self, bufs, notify):
        self.bufs, self.notify = bufs, notify


@n.DONE
def _done(arg, token, status, vlen, data):
    # A pool thread, holding the GIL for this call only.
    op = _pending.pop(token, None)
    if op is None:
        return
    for b in op.bufs:
        b.release()
    op.notify(op, status, vlen, data)


def _key(key):
    k = key if isinstance(key, bytes) else bytes(key)
    if len(k) > MAX_KEY:
        raise e.KeyTooLarge(f"a key of {len(k)} bytes: at most {MAX_KEY}")
    return k


def _what(op, key):
    return f"{('PUT', 'GET', 'DEL')[op - 1]} {key[:40]!r}"


def _result(op, key, status, vlen, data, cap, alloc):
    """What a completed request returns, or the exception it raises."""
    if alloc and data:
        try:
            value = ctypes.string_at(data, vlen) if vlen else b""
        finally:
            n.lib.qpg_kv_free(data)
    if status == n.NOT_FOUND:
        return False if op == n.DEL else None
    if status != n.OK:
        raise e.from_status(status, _what(op, key))
    if op == n.PUT:
        return None
    if op == n.DEL:
        return True
    if alloc:
        return value
    if vlen > cap:
        raise e.ValueTooLarge(f"{_what(op, key)}: a value of {vlen} bytes, the buffer holds {cap}")
    return vlen


class _Base:
    def __init__(self, host, servername=None, *, ca=None, cert=None, key=None, port=7471,
                 transport="rdma", conns=4, threads=0):
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._submitting = 0
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)

        def s(v):
            return None if v is None else str(v).encode()
        rc = n.lib.qpg_kv_pool_open(ctypes.byref(handle), s(host), int(port), s(servername),
                                    s(ca), s(cert), s(key), s(transport), int(conns),
                                    int(threads), err, len(err))
        if rc != 0:
            raise e.ConnectionError(-rc if rc < 0 else 0,
                                    f"cannot open a pool to {host}:{port}: {err.value.decode()}")
        self._handle = handle
        _open.add(self)

    def _submit(self, op, key, value, out, notify):
        """Hands one request to C; returns its _Op (NOTIFY is called once)."""
        k = _key(key)
        bufs = []
        try:
            vbuf = n.Buffer(value) if value is not None else None
            if vbuf:
                bufs.append(vbuf)
            obuf = n.Buffer(out, writable=True) if out is not None else None
            if obuf:
                bufs.append(obuf)
        except BaseException:
            for b in bufs:
                b.release()
            raise
        token = next(_tokens)
        o = _Op(bufs, notify)
        with self._lock:
            handle = self._handle
            if handle:
                self._submitting += 1  # close() waits for it
        if not handle:
            for b in bufs:
                b.release()
            raise e.ConnectionError(0, "the pool is closed")
        _pending[token] = o
        try:
            rc = n.lib.qpg_kv_call(handle, op, k, len(k),
                                   vbuf.addr if vbuf else None, vbuf.size if vbuf else 0,
                                   obuf.addr if obuf else None, obuf.size if obuf else 0,
                                   _done, None, token)
        except BaseException:
            rc = -1
            raise
        finally:
            with self._lock:
                self._submitting -= 1
                if self._submitting == 0:
                    self._idle.notify_all()
            if rc != 0:  # no callback will come
                _pending.pop(token, None)
                for b in bufs:
                    b.release()
        if rc != 0:
            raise e.from_status(rc, _what(op, k))
        return o, k, (obuf.size if obuf else 0)

    def close(self):
        """Fails what is in flight (qpgate.ConnectionError), closes every
        connection, joins the pool's threads."""
        with self._lock:
            handle, self._handle = self._handle, None
            while self._submitting:
                self._idle.wait()
        if handle:
            n.lib.qpg_kv_pool_destroy(handle)  # (the GIL is released meanwhile)
        _open.discard(self)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class KVPool(_Base):
    """A pool of CONNS connections (rdma or tcp) to one KV server, for any
    number of threads: each call waits for its answer, the GIL released."""

    def _call(self, op, key, value=None, out=None):
        event = threading.Event()
        got = []

        def notify(o, status, vlen, data):  # (maybe before _submit returns)
            got.append((status, vlen, data))
            event.set()
        _, k, cap = self._submit(op, key, value, out, notify)
        event.wait()
        status, vlen, data = got[0]
        return _result(op, k, status, vlen, data, cap, op == n.GET and out is None)

    def put(self, key, value):
        """Stores VALUE (any object with the buffer protocol) under KEY."""
        self._call(n.PUT, key, value=value)

    def get(self, key):
        """The value under KEY as bytes, or None when there is none."""
        return self._call(n.GET, key)

    def get_into(self, key, out):
        """Writes the value under KEY into OUT (a writable buffer: bytearray,
        numpy array, mmap...); returns its length, or None when there is none."""
        return self._call(n.GET, key, out=out)

    def delete(self, key):
        """Removes KEY; False when there was none."""
        return self._call(n.DEL, key)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class AsyncKVPool(_Base):
    """The same pool for asyncio: every method is a coroutine; completions
    come back through the loop's call_soon_threadsafe. Opening connects
    (in a worker thread: the loop goes on meanwhile)."""

    def __init__(self, *args, **kw):
        self._args, self._kw = args, kw
        self._handle = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._submitting = 0

    async def open(self):
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, lambda: _Base.__init__(self, *self._args, **self._kw))
        return self

    def _call(self, op, key, value=None, out=None):
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        alloc = op == n.GET and out is None
        meta = {}

        def finish(status, vlen, data):
            if fut.cancelled():
                if alloc and data:
                    n.lib.qpg_kv_free(data)
                return
            try:
                fut.set_result(_result(op, meta["k"], status, vlen, data, meta["cap"], alloc))
            except BaseException as exc:  # the request's own exception
                fut.set_exception(exc)

        def notify(o, status, vlen, data):
            try:
                loop.call_soon_threadsafe(finish, status, vlen, data)
            except RuntimeError:  # the loop is closed: nobody waits
                if alloc and data:
                    n.lib.qpg_kv_free(data)
        o, k, cap = self._submit(op, key, value, out, notify)
        meta["k"], meta["cap"] = k, cap
        return fut

    async def put(self, key, value):
        await self._call(n.PUT, key, value=value)

    async def get(self, key):
        return await self._call(n.GET, key)

    async def get_into(self, key, out):
        return await self._call(n.GET, key, out=out)

    async def delete(self, key):
        return await self._call(n.DEL, key)

    async def aclose(self):
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    async def __aenter__(self):
        return await self.open()

    async def __aexit__(self, *exc):
        await self.aclose()


# Pools still open when the interpreter exits are closed first, while
# Python can still run their callbacks.
_open = weakref.WeakSet()


@atexit.register
def _close_all():
    for p in list(_open):
        try:
            p.close()
        except Exception:
            pass
