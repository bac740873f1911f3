# SPDX-License-Identifier: BSD-2-Clause
"""libqpgate-kv.so.0 through ctypes: its binding API (qpgate/kv_call.h),
and libqpgate-cluster.so.0's qpg_kv_cluster_open (loaded when a cluster is
first opened). Both open a target (qpgate/kv_target.h) that every other
call takes alike."""
import ctypes
import ctypes.util
import os
import struct

# enum qpg_kv_op and enum qpg_kv_status (qpgate/kv.h)
PUT, GET, DEL, EXISTS = 1, 2, 3, 5
EXISTS_MAX = 256  # keys in one EXISTS batch (QPG_KV_EXISTS_MAX)
OK, NOT_FOUND, KEY_TOO_LARGE, VALUE_TOO_LARGE, STORE_FULL = 0, 1, 2, 3, 4
MALFORMED, BUSY, UNSUPPORTED, WRONG_OWNER, UNAVAILABLE = 5, 6, 7, 8, 9
OVER_QUOTA = 10
CORRUPT = 100

DONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_uint32,
                        ctypes.c_void_p)


class CQEntry(ctypes.Structure):
    """struct qpg_kv_cq_entry (qpgate/kv_call.h)."""
    _fields_ = [("token", ctypes.c_uint64), ("status", ctypes.c_int32),
                ("value_len", ctypes.c_uint32), ("data", ctypes.c_void_p)]


# The same two records packed by struct, for the asyncio pool's batches:
# one pack_into or iter_unpack per request instead of a ctypes attribute
# per field (the layouts are checked against the ctypes ones below).
REQ = struct.Struct("=QQQQIIHBxI")
CQE = struct.Struct("=QiIQ")
KEY = struct.Struct("=QH6x")  # struct qpg_kv_key


class CallReq(ctypes.Structure):
    """struct qpg_kv_call_req (qpgate/kv_call.h)."""
    _fields_ = [("token", ctypes.c_uint64), ("key", ctypes.c_char_p), ("value", ctypes.c_void_p),
                ("buf", ctypes.c_void_p), ("value_len", ctypes.c_uint32),
                ("cap", ctypes.c_uint32), ("key_len", ctypes.c_uint16), ("op", ctypes.c_uint8),
                ("reserved", ctypes.c_uint8), ("ttl_ms", ctypes.c_uint32)]


class MemberStats(ctypes.Structure):
    """struct qpg_kv_member_stats (qpgate/kv_target.h)."""
    _fields_ = [("id", ctypes.c_char * 64), ("incarnation", ctypes.c_uint64),
                ("active", ctypes.c_bool), ("up", ctypes.c_bool), ("suspect", ctypes.c_bool),
                ("ops", ctypes.c_uint64), ("misses", ctypes.c_uint64),
                ("unavailable", ctypes.c_uint64), ("wrong_owner", ctypes.c_uint64),
                ("errors", ctypes.c_uint64), ("zero_copy", ctypes.c_uint64),
                ("pool_waits", ctypes.c_uint64)]


class TargetStats(ctypes.Structure):
    """struct qpg_kv_target_stats (qpgate/kv_target.h)."""
    _fields_ = [("revision", ctypes.c_int64), ("views", ctypes.c_uint64),
                ("redirects", ctypes.c_uint64), ("unroutable", ctypes.c_uint64),
                ("etcd_ok", ctypes.c_bool), ("n", ctypes.c_uint),
                ("m", ctypes.POINTER(MemberStats))]


def _load():
    path = os.environ.get("QPGATE_KV_LIB") or ctypes.util.find_library("qpgate-kv") \
        or "libqpgate-kv.so.0"
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"qpgate: cannot load {path} ({e}): install qpgate (make install), "
                          "or point QPGATE_KV_LIB at libqpgate-kv.so.0") from None
    vp, u16, u32, i, cp = ctypes.c_void_p, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_int, \
        ctypes.c_char_p
    lib.qpg_kv_pool_open.argtypes = [ctypes.POINTER(vp), cp, u16, cp, cp, cp, cp, cp,
                                     ctypes.c_uint, ctypes.c_uint, u32, cp, ctypes.c_size_t]
    lib.qpg_kv_pool_open.restype = i
    lib.qpg_kv_pool_open_external.argtypes = [ctypes.POINTER(vp), cp, u16, cp, cp, cp, cp, cp,
                                              ctypes.c_uint, cp, ctypes.c_size_t]
    lib.qpg_kv_pool_open_external.restype = i
    lib.qpg_kv_target_fd.argtypes = [vp]
    lib.qpg_kv_target_fd.restype = i
    lib.qpg_kv_target_run.argtypes = [vp]
    lib.qpg_kv_target_run.restype = i
    lib.qpg_kv_target_destroy.argtypes = [vp]
    lib.qpg_kv_target_destroy.restype = None
    lib.qpg_kv_call.argtypes = [vp, ctypes.c_uint8, vp, u16, vp, u32, vp, u32, DONE, vp,
                                ctypes.c_uint64]
    lib.qpg_kv_call.restype = i
    lib.qpg_kv_call_wait.argtypes = [vp, ctypes.c_uint8, vp, u16, vp, u32, vp, u32,
                                     ctypes.POINTER(u32), ctypes.POINTER(vp)]
    lib.qpg_kv_call_wait.restype = i
    lib.qpg_kv_call_req_wait.argtypes = [vp, vp, ctypes.POINTER(u32), ctypes.POINTER(vp)]
    lib.qpg_kv_call_req_wait.restype = i
    lib.qpg_kv_free.argtypes = [vp]
    lib.qpg_kv_free.restype = None
    lib.qpg_kv_status_name.argtypes = [ctypes.c_uint8]
    lib.qpg_kv_status_name.restype = cp
    lib.qpg_kv_call_many.argtypes = [vp, vp, i, DONE, vp]  # an array of CallReq
    lib.qpg_kv_call_many.restype = i
    lib.qpg_kv_call_exists.argtypes = [vp, vp, ctypes.c_uint, vp, DONE, vp, ctypes.c_uint64]
    lib.qpg_kv_call_exists.restype = i
    lib.qpg_kv_call_exists_wait.argtypes = [vp, vp, ctypes.c_uint, vp, ctypes.POINTER(u32)]
    lib.qpg_kv_call_exists_wait.restype = i
    lib.qpg_kv_target_stats.argtypes = [vp, ctypes.POINTER(TargetStats)]
    lib.qpg_kv_target_stats.restype = i
    lib.qpg_kv_target_stats_free.argtypes = [ctypes.POINTER(TargetStats)]
    lib.qpg_kv_target_stats_free.restype = None
    lib.qpg_kv_register.argtypes = [vp, vp, ctypes.c_size_t]
    lib.qpg_kv_register.restype = i
    lib.qpg_kv_unregister.argtypes = [vp, vp]
    lib.qpg_kv_unregister.restype = i
    lib.qpg_kv_cq_new.argtypes = []
    lib.qpg_kv_cq_new.restype = vp
    lib.qpg_kv_cq_fd.argtypes = [vp]
    lib.qpg_kv_cq_fd.restype = i
    lib.qpg_kv_cq_poll.argtypes = [vp, vp, i]  # an array of CQEntry
    lib.qpg_kv_cq_poll.restype = i
    lib.qpg_kv_cq_wait.argtypes = [vp, i]
    lib.qpg_kv_cq_wait.restype = i
    lib.qpg_kv_cq_free.argtypes = [vp]
    lib.qpg_kv_cq_free.restype = None
    return lib


_cluster_lib = None


def cluster_lib():
    """libqpgate-cluster.so.0, beside libqpgate-kv when QPGATE_KV_LIB names
    one (QPGATE_CLUSTER_LIB overrides), else as installed."""
    global _cluster_lib
    if _cluster_lib is not None:
        return _cluster_lib
    path = os.environ.get("QPGATE_CLUSTER_LIB")
    if not path and os.environ.get("QPGATE_KV_LIB"):
        path = os.path.join(os.path.dirname(os.environ["QPGATE_KV_LIB"]),
                            "libqpgate-cluster.so.0")
    path = path or ctypes.util.find_library("qpgate-cluster") or "libqpgate-cluster.so.0"
    try:
        cl = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"qpgate: cannot load {path} ({e}): install qpgate (make install), "
                          "or point QPGATE_CLUSTER_LIB at libqpgate-cluster.so.0") from None
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    cl.qpg_kv_cluster_open.argtypes = [ctypes.POINTER(vp)] + [cp] * 10 + [
        ctypes.c_uint, ctypes.c_uint, ctypes.c_uint32, cp, ctypes.c_size_t]
    cl.qpg_kv_cluster_open.restype = ctypes.c_int
    _cluster_lib = cl
    return cl


assert REQ.size == ctypes.sizeof(CallReq) and CQE.size == ctypes.sizeof(CQEntry)
lib = _load()
# The library's own completion callback (no Python on its pool threads).
CQ_DONE = ctypes.cast(lib.qpg_kv_cq_done, DONE)


class _Py_buffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_PyBUF_SIMPLE, _PyBUF_WRITABLE = 0, 1
_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_Py_buffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_Py_buffer)]
_release_buffer.restype = None


class Buffer:
    """The memory of any object with the buffer protocol (contiguous), held
    until release(): its address goes to C, nothing is copied."""
    __slots__ = ("view", "held")

    def __init__(self, obj, writable=False):
        self.view = _Py_buffer()
        self.held = False
        # Raises TypeError/BufferError for a non-contiguous or read-only one.
        _get_buffer(obj, ctypes.byref(self.view), _PyBUF_WRITABLE if writable else _PyBUF_SIMPLE)
        self.held = True

    @property
    def addr(self):
        return self.view.buf

    @property
    def size(self):
        return self.view.len

    def release(self):
        if self.held:
            self.held = False
            _release_buffer(ctypes.byref(self.view))

    def __del__(self):
        self.release()


def hold(obj, writable=False):
    """(KEEP, ADDRESS, SIZE) of the memory of OBJ, any object with the
    buffer protocol (C-contiguous): the memory stays put while KEEP is
    referenced. A writable one is held by a ctypes view of it, which is
    cheaper than a Buffer; a read-only one (bytes) by a Buffer."""
    mv = memoryview(obj)
    if not mv.c_contiguous:
        raise BufferError("qpgate: the buffer is not contiguous")
    if mv.readonly:
        if writable:
            raise TypeError("qpgate: the buffer is read-only")
        b = Buffer(obj)
        return b, b.addr, b.size
    size = mv.nbytes
    if not size:
        return mv, None, 0
    c = ctypes.c_char.from_buffer(mv.cast("B") if mv.ndim != 1 or mv.itemsize != 1 else mv)
    return c, ctypes.addressof(c), size


def address(data):
    """The address of a bytes object's data (kept alive by the caller)."""
    return ctypes.cast(data, ctypes.c_void_p).value
