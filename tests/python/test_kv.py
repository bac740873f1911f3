# SPDX-License-Identifier: BSD-2-Clause
"""The Python binding (python/qpgate) against a real KV server: tcp on the
host, rdma in the lab (QPG_TRANSPORT=rdma). Run by ctest as
  /usr/bin/python3 -X dev -m pytest tests/python
with QPG_BIN (the tools) and QPGATE_KV_LIB (the library) set."""
import asyncio
import errno
import gc
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

import qpgate

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("QPG_BIN", os.path.join(REPO, "build", "bin"))
TRANSPORT = os.environ.get("QPG_TRANSPORT", "tcp")
MAX_VALUE = 2 << 20  # the server's --kv-max-value, above the 1 MiB case


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, certs, *flags):
        self.port = free_port()
        self.log = open(os.path.join(certs, f"server-{self.port}.log"), "w")
        self.proc = subprocess.Popen(
            [os.path.join(BIN, "qpgate-server"), "--cert", os.path.join(certs, "server.crt"),
             "--key", os.path.join(certs, "server.key"), "--transport", TRANSPORT,
             "--service", "kv", "-p", str(self.port), "--kv-max-value", str(MAX_VALUE), *flags],
            stderr=self.log)
        for _ in range(300):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("the server did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
        self.log.close()


def make_certs(d):
    """The test PKI of scripts/make-certs in D: a copy of $QPG_TEST_CERTS
    when the build made one (as tests/integration/lib.sh's qpg_certs), else
    made afresh."""
    cache = os.environ.get("QPG_TEST_CERTS")
    if cache and os.path.isfile(os.path.join(cache, "client.key")):
        for f in os.listdir(cache):
            shutil.copy2(os.path.join(cache, f), d)
        return
    subprocess.run([os.path.join(REPO, "scripts", "make-certs"), d, "localhost"], check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def certs():
    d = tempfile.mkdtemp(prefix="qpg-py.")
    make_certs(d)
    return d


@pytest.fixture(scope="module")
def server(certs):
    s = Server(certs)
    yield s
    s.stop()


def pool(certs, server, cls=qpgate.KVPool, conns=4):
    return cls("127.0.0.1", "localhost", ca=os.path.join(certs, "ca.crt"), port=server.port,
               transport=TRANSPORT, conns=conns)


def pattern(n, seed):
    return bytes((i * 131 + seed) & 0xFF for i in range(n)) if n < 4096 else \
        (bytes((i * 131 + seed) & 0xFF for i in range(4096)) * (n // 4096 + 1))[:n]


SIZES = [0, 1, 4096, 1 << 20, MAX_VALUE]


def kinds():
    out = [("bytes", bytes), ("bytearray", bytearray), ("memoryview", memoryview)]
    try:
        import numpy
        out.append(("numpy", lambda b: numpy.frombuffer(bytearray(b), dtype=numpy.uint8)))
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind,make", kinds())
def test_round_trip(certs, server, size, kind, make):
    value = pattern(size, size % 251)
    with pool(certs, server) as kv:
        key = f"rt/{kind}/{size}".encode()
        kv.put(key, make(value))
        assert kv.get(key) == value
        out = bytearray(size + 7)
        assert kv.get_into(key, out) == size
        assert bytes(out[:size]) == value
        assert kv.delete(key) is True
        assert kv.get(key) is None
        assert kv.get_into(key, out) is None


def test_numpy_get_into(certs, server):
    numpy = pytest.importorskip("numpy")
    value = pattern(65536, 3)
    with pool(certs, server) as kv:
        kv.put(b"np", value)
        out = numpy.zeros(65536, dtype=numpy.uint8)
        assert kv.get_into(b"np", out) == 65536
        assert out.tobytes() == value


def test_a_thousand_concurrent_asyncio_gets(certs, server):
    async def main():
        async with pool(certs, server, qpgate.AsyncKVPool) as kv:
            keys = [f"conc/{i}".encode() for i in range(1000)]
            await asyncio.gather(*(kv.put(k, pattern(512 + i, i)) for i, k in enumerate(keys)))
            got = await asyncio.gather(*(kv.get(k) for k in keys))
            assert got == [pattern(512 + i, i) for i in range(len(keys))]
            assert await kv.get(b"conc/none") is None
    asyncio.run(main())


def test_exists_in_batches(certs, server):
    """EXISTS of one key and of batches (a prompt's blocks: 64-byte keys, the
    first 300 of 600 stored, then a hole): sync and asyncio, past 256 keys."""
    keys = [b"blk/" + f"{i:060d}".encode() for i in range(600)]
    with pool(certs, server) as kv:
        for k in keys[:300]:
            kv.put(k, b"x")
        assert kv.exists(keys[0]) is True
        assert kv.exists(keys[300]) is False
        assert kv.exists_many(keys) == [i < 300 for i in range(600)]
        assert kv.batch_exists(keys) == 300
        kv.delete(keys[123])
        assert kv.batch_exists(keys) == 123
        assert kv.exists_many(keys[120:126]) == [True, True, True, False, True, True]
        assert kv.get(keys[0]) == b"x"  # EXISTS took nothing away
        with pytest.raises(qpgate.KeyTooLarge):
            kv.exists_many([b"k", b"x" * 251])
        assert kv.exists_many([]) == [] and kv.batch_exists([]) == 0

    async def main():
        async with pool(certs, server, qpgate.AsyncKVPool) as kv:
            assert await kv.exists(keys[1]) is True
            assert await kv.exists(keys[123]) is False
            assert await kv.exists_many(keys) == [i < 300 and i != 123 for i in range(600)]
            assert await kv.batch_exists(keys) == 123
            got = await asyncio.gather(*(kv.exists(k) for k in keys[295:305]))
            assert got == [True] * 5 + [False] * 5
    asyncio.run(main())


def test_batches_of_puts_and_gets(certs, server):
    """batch_put then batch_get_into, pipelined, one result per key in
    order: lengths, None for a miss; a buffer too small raises once all
    are answered. Sync and asyncio."""
    keys = [f"bt/{i}".encode() for i in range(200)]
    vals = [pattern(100 + i * 37, i) for i in range(200)]
    with pool(certs, server) as kv:
        kv.batch_put(keys[:150], vals[:150])
        bufs = [bytearray(len(v) + 5) for v in vals]
        got = kv.batch_get_into(keys, bufs)
        assert got == [len(v) if i < 150 else None for i, v in enumerate(vals)]
        assert all(bytes(bufs[i][:len(vals[i])]) == vals[i] for i in range(150))
        with pytest.raises(qpgate.ValueTooLarge):
            kv.batch_get_into(keys[:3], [bytearray(10)] * 3)
        with pytest.raises(ValueError):
            kv.batch_put(keys[:2], vals[:1])
        assert kv.batch_put([], []) is None and kv.batch_get_into([], []) == []

    async def main():
        async with pool(certs, server, qpgate.AsyncKVPool) as kv:
            await kv.batch_put(keys[150:], vals[150:])
            bufs = [bytearray(len(v)) for v in vals]
            assert await kv.batch_get_into(keys, bufs) == [len(v) for v in vals]
            assert [bytes(b) for b in bufs] == vals
    asyncio.run(main())


def test_register_and_get_into_it(certs, server):
    """register(): GETs into slices of one registered buffer return the
    values. Over rdma each one-sided GET is READ straight into it (stats'
    zero_copy counts every GET); over tcp it is copied (zero_copy 0). While
    registered the buffer cannot be resized; an overlapping one is refused;
    unregister() lets it go. Sync and asyncio."""
    keys = [f"zc/{i}".encode() for i in range(8)]
    vals = [pattern(65536 + i * 4096, i) for i in range(8)]
    room = 1 << 17
    with pool(certs, server) as kv:
        kv.batch_put(keys, vals)
        arena = bytearray(room * 8)
        kv.register(arena)
        kv.register(arena)  # the same again: nothing to do
        mv = memoryview(arena)
        got = kv.batch_get_into(keys, [mv[i * room:(i + 1) * room] for i in range(8)])
        assert got == [len(v) for v in vals]
        assert all(bytes(mv[i * room:i * room + len(v)]) == v for i, v in enumerate(vals))
        zc = sum(m["zero_copy"] for m in kv.stats())
        if TRANSPORT == "rdma":
            assert zc == 8  # 64 KiB and up: one-sided, each READ in place
        else:
            assert zc == 0
        with pytest.raises(ValueError):
            kv.register(mv[room:2 * room])  # inside the registered one
        mv.release()
        with pytest.raises(BufferError):
            arena.extend(b"x")  # held while registered
        kv.unregister(arena)
        with pytest.raises(ValueError):
            kv.unregister(arena)
        arena.extend(b"x")  # let go
        # A GET into memory not registered still works (the copy path).
        out = bytearray(room)
        assert kv.get_into(keys[0], out) == len(vals[0])
        assert bytes(out[:len(vals[0])]) == vals[0]

    async def main():
        async with pool(certs, server, qpgate.AsyncKVPool) as kv:
            arena = bytearray(room * 8)
            kv.register(arena)
            mv = memoryview(arena)
            got = await kv.batch_get_into(keys, [mv[i * room:(i + 1) * room] for i in range(8)])
            assert got == [len(v) for v in vals]
            assert all(bytes(mv[i * room:i * room + len(v)]) == v for i, v in enumerate(vals))
            assert sum(m["zero_copy"] for m in kv.stats()) == (8 if TRANSPORT == "rdma" else 0)
            mv.release()
    asyncio.run(main())


def test_put_with_a_ttl(certs, server):
    """A value put with ttl= is there at once and gone once it passes (the
    server's clock; the waits are well past it), sync and asyncio."""
    with pool(certs, server) as kv:
        kv.put(b"ttl/s", b"short", ttl=0.5)
        kv.put(b"ttl/l", b"long", ttl=600)
        assert kv.get(b"ttl/s") == b"short" and kv.exists(b"ttl/s")
        with pytest.raises(ValueError):
            kv.put(b"ttl/x", b"v", ttl=0)

    async def main():
        async with pool(certs, server, qpgate.AsyncKVPool) as kv:
            await kv.put(b"ttl/a", b"async", ttl=0.5)
            assert await kv.get(b"ttl/a") == b"async"
            await asyncio.sleep(1.5)
            assert await kv.get(b"ttl/a") is None
    asyncio.run(main())
    with pool(certs, server) as kv:
        assert kv.get(b"ttl/s") is None and not kv.exists(b"ttl/s")
        assert kv.get(b"ttl/l") == b"long"


def test_bad_input_raises_and_the_pool_goes_on(certs, server):
    with pool(certs, server) as kv:
        kv.put(b"ok", b"still here")
        with pytest.raises(qpgate.KeyTooLarge):
            kv.put(b"k" * 251, b"x")
        with pytest.raises(qpgate.KeyTooLarge):
            kv.get(b"k" * 300)
        with pytest.raises(qpgate.ValueTooLarge):
            kv.put(b"huge", bytes(MAX_VALUE + 1))
        with pytest.raises(qpgate.ValueTooLarge):
            kv.get_into(b"ok", bytearray(3))  # the buffer is too small
        with pytest.raises((TypeError, BufferError)):
            kv.get_into(b"ok", b"read-only")
        assert kv.get(b"ok") == b"still here"


def test_full_store_evicts(certs):
    # The default: a full store makes room (SIEVE), and no PUT is refused.
    s = Server(certs, "--kv-capacity", "2M")
    try:
        with qpgate.KVPool("127.0.0.1", "localhost", ca=os.path.join(certs, "ca.crt"),
                           port=s.port, transport=TRANSPORT, conns=2) as kv:
            for i in range(8):
                kv.put(f"fill/{i}".encode(), bytes([i]) * MAX_VALUE)
            assert kv.get(b"fill/7") == bytes([7]) * MAX_VALUE
            assert kv.get(b"fill/0") is None  # evicted, the oldest and never read
    finally:
        s.stop()


def test_store_full(certs):
    s = Server(certs, "--kv-capacity", "2M", "--kv-eviction", "none")
    try:
        with qpgate.KVPool("127.0.0.1", "localhost", ca=os.path.join(certs, "ca.crt"),
                           port=s.port, transport=TRANSPORT, conns=2) as kv:
            with pytest.raises(qpgate.StoreFull):
                for i in range(8):
                    kv.put(f"fill/{i}".encode(), bytes(MAX_VALUE))
            kv.delete(b"fill/0")
            kv.put(b"small", b"fits")
            assert kv.get(b"small") == b"fits"
    finally:
        s.stop()


def test_a_server_that_goes_away(certs):
    s = Server(certs)
    kv = qpgate.KVPool("127.0.0.1", "localhost", ca=os.path.join(certs, "ca.crt"), port=s.port,
                       transport=TRANSPORT, conns=2)
    try:
        kv.put(b"a", b"1")
        s.proc.kill()
        s.proc.wait()
        with pytest.raises(qpgate.ConnectionError):
            for _ in range(50):  # the pool hears of it; from then on, every request fails
                kv.get(b"a")
                time.sleep(0.1)
        with pytest.raises(qpgate.ConnectionError):
            kv.get(b"a")
    finally:
        kv.close()
        s.stop()
    with pytest.raises(qpgate.ConnectionError):
        kv.get(b"a")  # a closed pool says so


@pytest.mark.skipif(TRANSPORT != "tcp", reason="the deadline is the client's, whatever the "
                    "transport; its 10 s wait runs once, on the host")
def test_a_server_that_hangs(certs):
    """A server that stops answering (SIGSTOP) but keeps its connections:
    the pool's request deadline (request_timeout_ms, 10 s by default)
    fails the GET with ETIMEDOUT, where it would otherwise wait for good."""
    s = Server(certs)
    kv = qpgate.KVPool("127.0.0.1", "localhost", ca=os.path.join(certs, "ca.crt"), port=s.port,
                       transport=TRANSPORT, conns=1)
    got = []
    try:
        kv.put(b"hang", b"1")
        s.proc.send_signal(signal.SIGSTOP)

        def get():
            try:
                got.append(kv.get(b"hang"))
            except qpgate.Error as e:
                got.append(e)
        t = threading.Thread(target=get, daemon=True)
        t.start()
        t.join(60)  # a bound on the test, far past the deadline
        assert not t.is_alive(), "the GET was still waiting after 60 s"
        assert isinstance(got[0], qpgate.ConnectionError), got
        assert got[0].errno == errno.ETIMEDOUT, got
    finally:
        s.proc.send_signal(signal.SIGCONT)
        kv.close()
        s.stop()


def test_close_with_requests_in_flight(certs, server):
    async def main():
        kv = await pool(certs, server, qpgate.AsyncKVPool).open()
        await kv.put(b"inflight", bytes(65536))
        futs = [asyncio.ensure_future(kv.get(b"inflight")) for _ in range(200)]
        await asyncio.sleep(0)
        await kv.aclose()
        done = await asyncio.gather(*futs, return_exceptions=True)
        for r in done:  # each answered, or failed cleanly
            assert r == bytes(65536) or isinstance(r, qpgate.ConnectionError)
    asyncio.run(main())


def test_unable_to_connect_says_why(certs):
    with pytest.raises(qpgate.ConnectionError) as exc:
        qpgate.KVPool("127.0.0.1", "localhost", ca=os.path.join(certs, "ca.crt"),
                      port=free_port(), transport=TRANSPORT, conns=1)
    assert "cannot open a pool" in str(exc.value)


def test_ten_thousand_operations_no_leak(certs, server):
    def rss_kb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    async def burst(kv, n, base):
        await asyncio.gather(*(kv.put(f"s/{i % 100}".encode(), pattern(1000 + i % 7, i))
                               for i in range(base, base + n)))
        await asyncio.gather(*(kv.get(f"s/{i % 100}".encode()) for i in range(base, base + n)))

    async def main():
        async with pool(certs, server, qpgate.AsyncKVPool) as kv:
            await burst(kv, 1000, 0)  # warm up
            gc.collect()
            before = rss_kb()
            for r in range(4):
                await burst(kv, 1000, 1000 + r * 1000)
            gc.collect()
            after = rss_kb()
            assert after - before < 16 * 1024, f"RSS grew {after - before} kB"
            assert not kv._pending  # every request accounted for
    asyncio.run(main())
    with pool(certs, server) as kv:
        for i in range(1000):
            kv.put(b"sync", pattern(100, i))
            assert kv.get(b"sync") == pattern(100, i)


def test_exit_with_a_pool_open(certs, server):
    code = f"""
import asyncio, qpgate
kv = qpgate.KVPool("127.0.0.1", "localhost", ca={os.path.join(certs, 'ca.crt')!r},
                   port={server.port}, transport={TRANSPORT!r}, conns=2)
kv.put(b"exit", b"x")
async def main():
    a = await qpgate.AsyncKVPool("127.0.0.1", "localhost", ca={os.path.join(certs, 'ca.crt')!r},
                                 port={server.port}, transport={TRANSPORT!r}, conns=2).open()
    for _ in range(100):
        asyncio.ensure_future(a.get(b"exit"))
asyncio.run(main())
print("leaving")
"""
    r = subprocess.run([sys.executable, "-X", "dev", "-c", code], capture_output=True, text=True,
                       timeout=60, env=os.environ)
    assert r.returncode == 0, r.stderr
    assert "leaving" in r.stdout
