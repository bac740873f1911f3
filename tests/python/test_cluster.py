# SPDX-License-Identifier: BSD-2-Clause
"""The Python binding over a cluster: KVPool(cluster=..., cluster_name=...)
and the same AsyncKVPool, against three KV members and an etcd of the
test's own on loopback (tcp on the host, rdma in the lab with
QPG_TRANSPORT=rdma). A member is killed mid-run: its keys raise
Unavailable, never a wrong value, until its lease ends; then the
survivors serve them. Asserts states and counts, never times."""
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

import qpgate
from test_kv import make_certs

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("QPG_BIN", os.path.join(REPO, "build", "bin"))
TRANSPORT = os.environ.get("QPG_TRANSPORT", "tcp")
TTL = 3  # the members' lease, in seconds

if not shutil.which("etcd"):
    pytest.skip("etcd not found: make deps installs etcd-server", allow_module_level=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url):
    host, port = url.rsplit("/", 1)[-1].split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1) as s:
            s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
            return b'"health":"true"' in s.recv(4096)
    except OSError:
        return False


def pattern(n, seed):
    return bytes((i * 131 + seed) & 0xFF for i in range(n))


class Cluster:
    """An etcd on loopback (a temporary data dir) and three KV members.
    PREPARE(dir), if given, runs once the certificates are made and returns
    more flags for every member."""

    def __init__(self, prepare=None):
        self.dir = tempfile.mkdtemp(prefix="qpg-pycl.")
        make_certs(self.dir)
        self.flags = list(prepare(self.dir)) if prepare else []
        self.ca = os.path.join(self.dir, "ca.crt")
        self.name = f"py{os.getpid()}"
        self.etcd = None
        self.members = {}
        self.logs = []
        for _ in range(5):  # a port taken between the pick and the bind: again
            cport, pport = free_port(), free_port()
            self.url = f"http://127.0.0.1:{cport}"
            peer = f"http://127.0.0.1:{pport}"
            self.etcd = subprocess.Popen(
                ["etcd", "--name", "default", "--data-dir", os.path.join(self.dir, "etcd"),
                 "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", f"default={peer}"],
                stdout=subprocess.DEVNULL, stderr=self.log("etcd"))
            for _ in range(100):
                if healthy(self.url) or self.etcd.poll() is not None:
                    break
                time.sleep(0.1)
            if healthy(self.url):
                break
            self.etcd.kill()
            self.etcd.wait()
            shutil.rmtree(os.path.join(self.dir, "etcd"), ignore_errors=True)
        else:
            raise RuntimeError("etcd did not start")
        for i in (1, 2, 3):
            self.start(f"m{i}")
        self.wait_active(3)

    def log(self, name):
        f = open(os.path.join(self.dir, f"{name}.log"), "a")
        self.logs.append(f)
        return f

    def start(self, mid):
        log = self.log(mid)
        self.members[mid] = subprocess.Popen(
            [os.path.join(BIN, "qpgate-server"), "--transport", TRANSPORT, "--service", "kv",
             "--kv-capacity", "64M", "--cert", os.path.join(self.dir, "server.crt"),
             "--key", os.path.join(self.dir, "server.key"), "-p", "0", "--cluster", self.url,
             "--cluster-name", self.name, "--cluster-id", mid, "--advertise-name",
             "localhost", "--cluster-ttl", str(TTL), *self.flags], stderr=log)

    def active(self):
        out = subprocess.run(
            [os.path.join(BIN, "qpgate-cluster"), "--cluster", self.url, "--cluster-name",
             self.name, "status"], capture_output=True, text=True).stdout
        return sum(1 for line in out.splitlines() if " active " in line)

    def wait_active(self, n, seconds=20):
        for _ in range(seconds * 10):
            if self.active() == n:
                return
            time.sleep(0.1)
        raise RuntimeError(f"{n} members never active (now {self.active()})")

    def tails(self, lines=12):
        """The last lines of every member's log, and whether each member
        still runs (a crash leaves no line): what a failure prints."""
        out = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(".log") and name != "etcd.log":
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    tail = f.read().splitlines()[-lines:]
                p = self.members.get(name[:-4])
                state = "not ours now" if p is None else "running" if p.poll() is None \
                    else f"exited {p.returncode}"
                out.append(f"--- {name} ({state})\n" + "\n".join(tail))
        return "\n".join(out)

    def kill(self, mid):
        p = self.members.pop(mid)
        p.kill()
        p.wait()

    def pool(self, cls=qpgate.KVPool, **kw):
        return cls(cluster=self.url, cluster_name=self.name, ca=self.ca, conns=2, **kw)

    def stop(self):
        for p in self.members.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.members.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.etcd.poll() is None:
            self.etcd.terminate()
            try:
                self.etcd.wait(10)
            except subprocess.TimeoutExpired:
                self.etcd.kill()
                self.etcd.wait()
        for f in self.logs:
            f.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster()
    yield c
    c.stop()


@pytest.fixture(autouse=True)
def member_logs_on_failure(request):
    """Any test of this module that fails prints the tails of the members'
    logs (as captured stderr of its teardown)."""
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed and "cluster" in request.fixturenames:
        print(request.getfixturevalue("cluster").tails(), file=sys.stderr)


# Known, not yet explained (docs/cluster.md): in the lab, now and then one
# pooled rdma connection to a healthy member ends right after it comes up
# (the client reads the end of its control channel, the member never closes
# it), so that member is suspect for 2 s and its keys raise Unavailable;
# then the cluster reconnects. The tests below check what the calls return,
# not that recovery (the failover tests do): an idempotent call that raises
# Unavailable is made again, for at most 20 s, and the count is printed.
RETRIED = [0]


def again(fn, *args):
    end = time.monotonic() + 20
    while True:
        try:
            return fn(*args)
        except qpgate.Unavailable:
            if time.monotonic() > end:
                raise
            RETRIED[0] += 1
            print("made again after Unavailable:", RETRIED[0], file=sys.stderr)
            time.sleep(0.2)


async def aagain(fn, *args):
    end = time.monotonic() + 20
    while True:
        try:
            return await fn(*args)
        except qpgate.Unavailable:
            if time.monotonic() > end:
                raise
            RETRIED[0] += 1
            print("made again after Unavailable:", RETRIED[0], file=sys.stderr)
            await asyncio.sleep(0.2)


def test_every_call_over_a_cluster(cluster):
    keys = [f"cl/{i}".encode() for i in range(90)]
    with cluster.pool() as kv:
        for i, k in enumerate(keys):
            again(kv.put, k, pattern(100 + i, i))
        assert [again(kv.get, k) for k in keys] == \
            [pattern(100 + i, i) for i in range(len(keys))]
        out = bytearray(300)
        assert kv.get_into(keys[5], out) == 105
        assert bytes(out[:105]) == pattern(105, 5)
        assert kv.delete(keys[0]) is True
        assert kv.get(keys[0]) is None
        assert kv.delete(keys[0]) is False
        # One dict per member, read through the C struct's layout: each
        # member's id and counts where they belong (a field missing from
        # the ctypes mirror shifts every member after the first).
        st = kv.stats()
        assert sorted(m["id"] for m in st) == ["m1", "m2", "m3"]
        assert sum(m["ops"] for m in st) >= 2 * len(keys)
        assert all(m["errors"] == 0 and m["pool_waits"] == 0 for m in st)


def test_asyncio_over_a_cluster(cluster):
    async def main():
        async with cluster.pool(qpgate.AsyncKVPool) as kv:
            keys = [f"acl/{i}".encode() for i in range(500)]
            await asyncio.gather(*(aagain(kv.put, k, pattern(64 + i % 300, i)) for i, k in
                                   enumerate(keys)))
            got = await asyncio.gather(*(aagain(kv.get, k) for k in keys))
            assert got == [pattern(64 + i % 300, i) for i in range(len(keys))]
            assert await kv.get(b"acl/none") is None
            assert await kv.delete(keys[1]) is True
    asyncio.run(main())


def test_exists_over_a_cluster(cluster):
    """A batch's keys live on every member: it is split by owner, each part
    asked of its member, and the answers merged in the caller's order."""
    keys = [f"ex/{i}".encode() for i in range(256)]
    with cluster.pool() as kv:
        for k in keys[:200]:
            again(kv.put, k, b"v")
        again(kv.delete, keys[77])
        want = [i < 200 and i != 77 for i in range(256)]
        assert again(kv.exists_many, keys) == want
        assert again(kv.batch_exists, keys) == 77

    async def main():
        async with cluster.pool(qpgate.AsyncKVPool) as kv:
            assert await aagain(kv.exists_many, keys) == want
            assert await kv.exists(keys[199]) is True
            assert await kv.exists(keys[200]) is False
    asyncio.run(main())


def test_batches_over_a_cluster(cluster):
    keys = [f"cb/{i}".encode() for i in range(120)]
    vals = [pattern(50 + i, i) for i in range(120)]
    with cluster.pool() as kv:
        again(kv.batch_put, keys, vals)
        bufs = [bytearray(200) for _ in keys]
        assert again(kv.batch_get_into, keys, bufs) == [len(v) for v in vals]
        assert [bytes(b[:len(v)]) for b, v in zip(bufs, vals)] == vals


def test_registered_buffer_over_a_cluster(cluster):
    """register() reaches every member's pool: batch_get_into slices of one
    registered buffer returns every value, and over rdma some GETs are READ
    in place (a member whose connection has more GETs ahead than grants
    asked for sends the rest two-sided, so not necessarily all)."""
    keys = [f"cz/{i}".encode() for i in range(12)]
    vals = [pattern(65536 + i * 1000, i) for i in range(12)]
    room = 1 << 17
    with cluster.pool() as kv:
        again(kv.batch_put, keys, vals)
        arena = bytearray(room * len(keys))
        kv.register(arena)
        mv = memoryview(arena)
        got = again(kv.batch_get_into, keys,
                    [mv[i * room:(i + 1) * room] for i in range(len(keys))])
        assert got == [len(v) for v in vals]
        assert all(bytes(mv[i * room:i * room + len(v)]) == v for i, v in enumerate(vals))
        zc = sum(m["zero_copy"] for m in kv.stats())
        assert zc >= 1 if TRANSPORT == "rdma" else zc == 0
        mv.release()
        kv.unregister(arena)


def test_unreachable_etcd_says_why():
    with pytest.raises(qpgate.ConnectionError, match="cannot open cluster"):
        qpgate.KVPool(cluster=f"http://127.0.0.1:{free_port()}", cluster_name="none")
    with pytest.raises(TypeError):
        qpgate.KVPool(cluster="http://127.0.0.1:1")  # no cluster_name


def _failover(cluster, kv_get, kv_put):
    """Writes 120 keys, kills m2, then reads every key in rounds (bounded):
    each read is the value written, Unavailable (m2's keys, until its lease
    ends), or a miss (once a survivor took the key over). Returns the
    counts."""
    keys = [f"fo/{i}".encode() for i in range(120)]
    for i, k in enumerate(keys):
        kv_put(k, pattern(200, i))
    cluster.kill("m2")
    seen = {"ok": 0, "unavailable": 0, "miss": 0, "wrong": 0}
    deadline = time.monotonic() + 4 * TTL + 10
    clean = 0
    while time.monotonic() < deadline and clean < 2:
        round_unav = 0
        for i, k in enumerate(keys):
            try:
                v = kv_get(k)
            except qpgate.Unavailable:
                seen["unavailable"] += 1
                round_unav += 1
                continue
            if v is None:
                seen["miss"] += 1
                kv_put(k, pattern(200, i))  # cache-aside: filled again
            elif v == pattern(200, i):
                seen["ok"] += 1
            else:
                seen["wrong"] += 1
        clean = clean + 1 if round_unav == 0 else 0
        time.sleep(0.2)
    return seen, clean


def _rounds_until_clean(kv, keys, size, seconds):
    """Reads (and fills again) KEYS in rounds until one has no Unavailable,
    or SECONDS pass: how many Unavailable the last round had."""
    deadline = time.monotonic() + seconds
    while True:
        unav = 0
        for i, k in enumerate(keys):
            try:
                v = kv.get(k)
                if v is None:
                    kv.put(k, pattern(size, i))
                else:
                    assert v == pattern(size, i)
            except qpgate.Unavailable:
                unav += 1
        if unav == 0 or time.monotonic() > deadline:
            return unav
        time.sleep(0.2)


def test_a_member_killed_mid_run(cluster):
    with cluster.pool() as kv:
        seen, clean = _failover(cluster, kv.get, kv.put)
        print("sync failover:", seen)
        assert seen["wrong"] == 0
        assert seen["unavailable"] > 0, "m2's keys were never Unavailable"
        assert seen["miss"] > 0, "no survivor took m2's keys over"
        assert clean == 2, "m2's keys stayed Unavailable past its lease"
        # m2 comes back: the pool makes it a pool again, long after
        # KVPool() returned (with the option strings it was given then),
        # and its keys are served again.
        cluster.start("m2")
        cluster.wait_active(3)
        keys = [f"fo/{i}".encode() for i in range(120)]
        assert _rounds_until_clean(kv, keys, 200, 4 * TTL + 10) == 0, \
            "m2's keys stayed Unavailable after it came back"


def test_asyncio_through_a_failover(cluster):
    async def main():
        async with cluster.pool(qpgate.AsyncKVPool) as kv:
            keys = [f"afo/{i}".encode() for i in range(120)]
            await asyncio.gather(*(kv.put(k, pattern(300, i)) for i, k in enumerate(keys)))
            cluster.kill("m1")
            unav = wrong = miss = 0
            clean = 0
            deadline = time.monotonic() + 4 * TTL + 10
            while time.monotonic() < deadline and clean < 2:
                got = await asyncio.gather(*(kv.get(k) for k in keys), return_exceptions=True)
                round_unav = 0
                for i, g in enumerate(got):
                    if isinstance(g, qpgate.Unavailable):
                        round_unav += 1
                    elif isinstance(g, BaseException):
                        raise g
                    elif g is None:
                        miss += 1
                        try:  # as the sync test: the new owner may not serve it yet
                            await kv.put(keys[i], pattern(300, i))
                        except qpgate.Unavailable:
                            round_unav += 1
                    elif g != pattern(300, i):
                        wrong += 1
                unav += round_unav
                clean = clean + 1 if round_unav == 0 else 0
                await asyncio.sleep(0.2)
            return unav, wrong, miss, clean
    unav, wrong, miss, clean = asyncio.run(main())
    print("asyncio failover: unavailable", unav, "wrong", wrong, "miss", miss)
    assert wrong == 0
    assert unav > 0 and miss > 0 and clean == 2
    cluster.start("m1")
    cluster.wait_active(3)
