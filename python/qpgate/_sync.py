# SPDX-License-Identifier: BSD-2-Clause
"""KVPool: the blocking pool. Each call waits in C with the GIL released;
threads may share one pool."""
import ctypes
import errno

from . import _errors as e
from . import _native as n
from ._pool import (_Base, _buffers, _chunks, _exists_result, _key, _key_list, _result,
                    _ttl_ms, _what)


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
