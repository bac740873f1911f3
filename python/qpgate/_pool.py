# SPDX-License-Identifier: BSD-2-Clause
"""KVPool and AsyncKVPool: a pool of secure connections to a qpgate KV
server. Each request goes to the C pool (qpgate/kv_call.h) with the
caller's buffers. No Python runs on the pool's threads: a sync call waits
in C with the GIL released; an asyncio pool's completions are queued in C,
whose eventfd wakes the loop (add_reader), and are drained in batches."""
import asyncio
import atexit
import ctypes
import errno
import os
import threading
import weakref

from . import _errors as e
from . import _native as n

MAX_KEY = 250


def _key(key):
    k = key if isinstance(key, bytes) else bytes(key)
    if len(k) > MAX_KEY:
        raise e.KeyTooLarge(f"a key of {len(k)} bytes: at most {MAX_KEY}")
    return k


def _what(op, key):
    if op == n.EXISTS:
        return f"EXISTS of {key} keys"
    return f"{('PUT', 'GET', 'DEL')[op - 1]} {key[:40]!r}"


def _key_list(keys):
    """KEYS (at most EXISTS_MAX) as an array of struct qpg_kv_key over one
    joined bytes object; C copies the keys in the call. Returns what holds
    them and the array's address."""
    ks = [_key(k) for k in keys]
    if not 0 < len(ks) <= n.EXISTS_MAX:
        raise ValueError(f"qpgate: 1 to {n.EXISTS_MAX} keys per EXISTS batch, not {len(ks)}")
    if any(not k for k in ks):
        raise e.KeyTooLarge("an empty key")
    joined = b"".join(ks)
    base = n.address(joined)
    arr = bytearray(n.KEY.size * len(ks))
    off = 0
    for i, k in enumerate(ks):
        n.KEY.pack_into(arr, i * n.KEY.size, base + off, len(k))
        off += len(k)
    view = ctypes.c_char.from_buffer(arr)
    return (joined, arr, view), ctypes.addressof(view)


def _exists_result(status, count, bits):
    """An EXISTS batch's answer: a list of bools, or the exception."""
    if status != n.OK:
        raise e.from_status(status, _what(n.EXISTS, count))
    return [bool(bits[i // 8] >> (i % 8) & 1) for i in range(count)]


def _chunks(keys):
    keys = list(keys)
    return [keys[i:i + n.EXISTS_MAX] for i in range(0, len(keys), n.EXISTS_MAX)]


def _result(op, key, status, vlen, data, cap, alloc):
    """What a completed request returns, or the exception it raises."""
    value = None
    if data:
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
        return value if value is not None else b""
    if vlen > cap:
        raise e.ValueTooLarge(f"{_what(op, key)}: a value of {vlen} bytes, the buffer holds {cap}")
    return vlen


def _buffers(value, out):
    """What holds VALUE's and OUT's memory while C uses it (dropping the
    references lets go), with their addresses and sizes."""
    keep = []
    vaddr = vsize = oaddr = osize = 0
    if value is not None:
        k, vaddr, vsize = n.hold(value)
        keep.append(k)
    if out is not None:
        k, oaddr, osize = n.hold(out, writable=True)
        keep.append(k)
    return keep, vaddr, vsize, oaddr, osize


def _s(v):
    return None if v is None else str(v).encode()


def _ttl_ms(ttl):
    """A PUT's TTL in seconds (None: none) as the library's milliseconds."""
    if ttl is None:
        return 0
    ms = int(round(ttl * 1000))
    if not 0 < ms < 1 << 32:
        raise ValueError(f"qpgate: ttl is 0.001 to 4294967 seconds, not {ttl!r}")
    return ms


def _open_cluster(cl, ca, cert, key, conns, threads, busy_poll_us):
    """A cluster target: CL holds etcd's endpoints, the cluster's name, and
    etcd's TLS files and user, as the CLI's --cluster-* options."""
    handle = ctypes.c_void_p()
    err = ctypes.create_string_buffer(512)
    s = _s
    rc = n.cluster_lib().qpg_kv_cluster_open(
        ctypes.byref(handle), s(cl["cluster"]), s(cl["cluster_name"]), s(cl["cluster_ca"]),
        s(cl["cluster_cert"]), s(cl["cluster_key"]), s(cl["cluster_user"]),
        s(cl["cluster_password_file"]), s(ca), s(cert), s(key), int(conns), int(threads),
        int(busy_poll_us), err, len(err))
    if rc != 0:
        raise e.ConnectionError(-rc if rc < 0 else 0,
                                f"cannot open cluster {cl['cluster_name']!r} from "
                                f"{cl['cluster']}: {err.value.decode()}")
    return handle


def _open_pool(host, servername, ca, cert, key, port, transport, conns, threads, busy_poll_us,
               external=False):
    handle = ctypes.c_void_p()
    err = ctypes.create_string_buffer(512)
    s = _s
    if host is None:
        raise TypeError("qpgate: a pool needs a host (or cluster= and cluster_name=)")
    if external:  # no threads: the caller's loop runs it (qpg_kv_target_run)
        rc = n.lib.qpg_kv_pool_open_external(ctypes.byref(handle), s(host), int(port),
                                             s(servername), s(ca), s(cert), s(key),
                                             s(transport), int(conns), err, len(err))
    else:
        rc = n.lib.qpg_kv_pool_open(ctypes.byref(handle), s(host), int(port), s(servername),
                                    s(ca), s(cert), s(key), s(transport), int(conns),
                                    int(threads), int(busy_poll_us), err, len(err))
    if rc != 0:
        raise e.ConnectionError(-rc if rc < 0 else 0,
                                f"cannot open a pool to {host}:{port}: {err.value.decode()}")
    return handle


class _Base:
    def _init(self, host=None, servername=None, *, ca=None, cert=None, key=None, port=7471,
              transport="rdma", conns=4, threads=0, busy_poll_us=0, cluster=None,
              cluster_name=None, cluster_ca=None, cluster_cert=None, cluster_key=None,
              cluster_user=None, cluster_password_file=None, _external=False):
        # (busy_poll_us: the pool's threads sleep until woken by default, as
        # their work comes from Python's thread; qpgate/kv_call.h)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0  # calls inside C that use the pool: close() waits for them
        self._regs = {}  # address -> (what holds the buffer, the buffer): register()
        self._handle = None
        if cluster is not None:
            # Each member's address, name, transport and key come from etcd;
            # CONNS and THREADS are per member.
            if host is not None or not cluster_name:
                raise TypeError("qpgate: cluster= takes cluster_name=, and no host")
            self._handle = _open_cluster(
                dict(cluster=cluster, cluster_name=cluster_name, cluster_ca=cluster_ca,
                     cluster_cert=cluster_cert, cluster_key=cluster_key,
                     cluster_user=cluster_user, cluster_password_file=cluster_password_file),
                ca, cert, key, conns, threads, busy_poll_us)
        else:
            self._handle = _open_pool(host, servername, ca, cert, key, port, transport, conns,
                                      threads, busy_poll_us, _external)
        _open.add(self)

    def _take(self):
        with self._lock:
            if not self._handle:
                raise e.ConnectionError(0, "the pool is closed")
            self._busy += 1
            return self._handle

    def _give(self):
        with self._lock:
            self._busy -= 1
            if self._busy == 0:
                self._idle.notify_all()

    def register(self, buffer):
        """Registers BUFFER (writable and contiguous: a bytearray, a numpy
        array, an mmap) with every connection, once (Mooncake's
        register_buffer). A one-sided GET into any part of it (get(...,
        out=), batch_get_into) then READs the value straight there and
        checks its digest there: no copy. Over tcp, and for two-sided GETs,
        it changes nothing (one copy, as always).

        BUFFER is held until unregister() or close(): while registered a
        bytearray cannot be resized nor an mmap closed (BufferError), so
        no READ can land in memory that moved."""
        keep, addr, size = n.hold(buffer, writable=True)
        if not size:
            raise ValueError("qpgate: register() takes a buffer of at least one byte")
        handle = self._take()
        try:
            rc = n.lib.qpg_kv_register(handle, addr, size)
        finally:
            self._give()
        if rc == -errno.EEXIST:
            raise ValueError("qpgate: that buffer overlaps one registered already")
        if rc == -errno.ENOSPC:
            raise ValueError("qpgate: 4,096 buffers are registered already")
        if rc < 0:
            hint = "raise the locked-memory limit (ulimit -l)" \
                if -rc in (errno.ENOMEM, errno.EPERM) else os.strerror(-rc)
            raise OSError(-rc, f"qpgate: the device cannot register {size} bytes: {hint}")
        self._regs.setdefault(addr, (keep, buffer))

    def unregister(self, buffer):
        """Undoes register(BUFFER); raises BufferError while a GET is
        reading into it."""
        keep, addr, size = n.hold(buffer, writable=True)
        del keep
        handle = self._take()
        try:
            rc = n.lib.qpg_kv_unregister(handle, addr)
        finally:
            self._give()
        if rc == -errno.EBUSY:
            raise BufferError("qpgate: a GET is reading into that buffer")
        if rc == -errno.ENOENT:
            raise ValueError("qpgate: that buffer is not registered")
        if rc < 0:
            raise e.ConnectionError(-rc, f"qpgate: unregister: {os.strerror(-rc)}")
        self._regs.pop(addr, None)

    def stats(self):
        """What each server (a cluster: each member ever seen) served, as a
        list of dicts: id, ops, misses, unavailable, wrong_owner, errors,
        and zero_copy (GETs READ straight into a registered buffer)."""
        st = n.TargetStats()
        handle = self._take()
        try:
            rc = n.lib.qpg_kv_target_stats(handle, ctypes.byref(st))
        finally:
            self._give()
        if rc < 0:
            raise MemoryError("qpgate: stats")
        try:
            return [{"id": st.m[i].id.decode(errors="replace"), "up": st.m[i].up,
                     **{f: getattr(st.m[i], f) for f in ("ops", "misses", "unavailable",
                                                           "wrong_owner", "errors",
                                                           "zero_copy")}}
                    for i in range(st.n)]
        finally:
            n.lib.qpg_kv_target_stats_free(ctypes.byref(st))

    def _destroy(self):
        """Stops new calls, waits for those inside C, then fails what is in
        flight and closes every connection."""
        with self._lock:
            handle, self._handle = self._handle, None
            while self._busy:
                self._idle.wait()
        if handle:
            n.lib.qpg_kv_target_destroy(handle)  # (ctypes releases the GIL)
        self._regs.clear()  # registrations went with the target
        _open.discard(self)
        return bool(handle)


class KVPool(_Base):
    """A pool of CONNS connections (rdma or tcp) to one KV server, for any
    number of threads: each call waits for its answer with the GIL released.

    KVPool(cluster="https://etcd:2379", cluster_name="prod", ca=...) spreads
    the keys over a cluster's members instead (CONNS per member), with
    etcd's TLS files and user as cluster_ca, cluster_cert, cluster_key,
    cluster_user and cluster_password_file. A key whose member is failing
    raises Unavailable until the cluster's view moves on."""

    def __init__(self, *args, **kw):
        self._handle = None
        self._init(*args, **kw)

    def _call(self, op, key, value=None, out=None, ttl_ms=0):
        k = _key(key)
        keep, vaddr, vsize, oaddr, osize = _buffers(value, out)
        handle = self._take()
        try:
            vlen = ctypes.c_uint32()
            data = ctypes.c_void_p()
            if ttl_ms:  # the request as a struct: it carries the TTL
                req = n.CallReq(0, k, vaddr, oaddr, vsize, osize, len(k), op, 0, ttl_ms)
                rc = n.lib.qpg_kv_call_req_wait(handle, ctypes.byref(req), ctypes.byref(vlen),
                                                ctypes.byref(data))
            else:
                rc = n.lib.qpg_kv_call_wait(handle, op, k, len(k), vaddr, vsize, oaddr, osize,
                                            ctypes.byref(vlen), ctypes.byref(data))
        finally:
            self._give()
            del keep
        return _result(op, k, rc, vlen.value, data.value, osize, op == n.GET and out is None)

    def put(self, key, value, ttl=None):
        """Stores VALUE (any object with the buffer protocol) under KEY; with
        TTL (seconds), the server drops it that long after storing it."""
        self._call(n.PUT, key, value=value, ttl_ms=_ttl_ms(ttl))

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

    def _many(self, reqs, ttl_ms=0):
        """REQS (op, key, value, out) sent at once, pipelined over the pool,
        one completion each; returns each one's result or exception, in
        order, once all are answered (no buffer is in use past that)."""
        if not reqs:
            return []
        cq = n.lib.qpg_kv_cq_new()
        if not cq:
            raise MemoryError("qpgate: no completion queue")
        keys = [_key(k) for _, k, _, _ in reqs]
        joined = b"".join(keys)
        kaddr = n.address(joined)
        arr = bytearray(n.REQ.size * len(reqs))
        keep, meta, off = [], [], 0
        for i, ((op, _, value, out), k) in enumerate(zip(reqs, keys)):
            kp, vaddr, vsize, oaddr, osize = _buffers(value, out)
            keep.append(kp)
            meta.append((op, k, osize, op == n.GET and out is None))
            n.REQ.pack_into(arr, i * n.REQ.size, i, kaddr + off, vaddr or 0, oaddr or 0, vsize,
                            osize, len(k), op, ttl_ms if op == n.PUT else 0)
            off += len(k)
        results = [None] * len(reqs)
        batch = (n.CQEntry * 256)()
        handle = self._take()
        try:
            got = n.lib.qpg_kv_call_many(handle, ctypes.addressof(ctypes.c_char.from_buffer(arr)),
                                         len(reqs), n.CQ_DONE, cq)
            done = 0
            while done < max(got, 0):
                n.lib.qpg_kv_cq_wait(cq, -1)  # (the GIL let go)
                for j in range(n.lib.qpg_kv_cq_poll(cq, ctypes.addressof(batch), 256)):
                    c = batch[j]
                    op, k, cap, alloc = meta[c.token]
                    try:
                        results[c.token] = _result(op, k, c.status, c.value_len, c.data, cap,
                                                   alloc)
                    except BaseException as exc:
                        results[c.token] = exc
                    done += 1
        finally:
            self._give()
            n.lib.qpg_kv_cq_free(cq)
            del keep, joined
        for i in range(max(got, 0), len(reqs)):  # never started
            results[i] = e.from_status(got if got < 0 else -errno.ENOMEM,
                                       _what(meta[i][0], meta[i][1]))
        return results

    def batch_put(self, keys, values, ttl=None):
        """Stores each of VALUES under its key, all at once (pipelined over
        the pool's connections); raises the first failure once every PUT is
        answered."""
        keys, values = list(keys), list(values)
        if len(keys) != len(values):
            raise ValueError("qpgate: batch_put takes as many values as keys")
        ms = _ttl_ms(ttl)
        rs = self._many([(n.PUT, k, v, None) for k, v in zip(keys, values)], ms)
        for r in rs:
            if isinstance(r, BaseException):
                raise r

    def batch_get_into(self, keys, buffers):
        """Each key's value into its buffer (writable: bytearray, numpy,
        mmap), all at once; returns each value's length, or None for a miss.
        Raises the first failure once every GET is answered."""
        keys, buffers = list(keys), list(buffers)
        if len(keys) != len(buffers):
            raise ValueError("qpgate: batch_get_into takes as many buffers as keys")
        rs = self._many([(n.GET, k, None, b) for k, b in zip(keys, buffers)])
        for r in rs:
            if isinstance(r, BaseException):
                raise r
        return rs

    def _exists(self, keys):
        keep, addr = _key_list(keys)
        bits = ctypes.create_string_buffer(n.EXISTS_MAX // 8)
        prefix = ctypes.c_uint32()
        handle = self._take()
        try:
            rc = n.lib.qpg_kv_call_exists_wait(handle, addr, len(keys), bits,
                                               ctypes.byref(prefix))
        finally:
            self._give()
            del keep
        return _exists_result(rc, len(keys), bits.raw)

    def exists(self, key):
        """Whether KEY is stored, without reading it (nor keeping it in the
        cache any longer)."""
        return self._exists([key])[0]

    def exists_many(self, keys):
        """Whether each of KEYS is stored, as a list of bools: up to 256 keys
        in one round trip (grouped by member over a cluster), more in turn."""
        out = []
        for part in _chunks(keys):
            out += self._exists(part)
        return out

    def batch_exists(self, keys):
        """How many of KEYS, from the first, are all stored (SGLang's
        batch_exists, vLLM's lookup): the blocks of a prompt the cache can
        serve. One round trip per 256 keys, and none past the first gap."""
        got = 0
        for part in _chunks(keys):
            have = self._exists(part)
            run = next((i for i, h in enumerate(have) if not h), len(have))
            got += run
            if run < len(have):
                break
        return got

    def close(self):
        """Waits for the calls in progress, then closes every connection."""
        self._destroy()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


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


# Pools still open when the interpreter exits are closed first.
_open = weakref.WeakSet()


@atexit.register
def _close_all():
    for p in list(_open):
        try:
            p.close()
        except Exception:
            pass
