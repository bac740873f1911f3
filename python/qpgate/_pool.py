# SPDX-License-Identifier: BSD-2-Clause
"""What KVPool (_sync.py) and AsyncKVPool (_async.py) share: a pool of
secure connections to a qpgate KV server, opened on one server or a
cluster, its registered buffers and stats, and the checks of keys, values
and results. Each request goes to the C pool (qpgate/kv_call.h) with the
caller's buffers. No Python runs on the pool's threads: a sync call waits
in C with the GIL released; an asyncio pool's completions are queued in C,
whose eventfd wakes the loop (add_reader), and are drained in batches."""
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
        zero_copy (GETs READ straight into a registered buffer), and
        pool_waits (requests that waited for a joining member's pool)."""
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
                                                           "zero_copy", "pool_waits")}}
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


# Pools still open when the interpreter exits are closed first.
_open = weakref.WeakSet()


@atexit.register
def _close_all():
    for p in list(_open):
        try:
            p.close()
        except Exception:
            pass
