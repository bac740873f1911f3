# SPDX-License-Identifier: BSD-2-Clause
"""Tenants through the Python binding: two pools with two client
certificates (cert= and key=) against a server with --client-ca and a
tenants file. Each sees only its own keys, through every call, sync and
asyncio; a PUT over a tenant's quota raises OverQuota; an identity the file
does not name cannot connect. tcp on the host, rdma in the lab."""
import asyncio
import os
import subprocess
import tempfile

import pytest

import qpgate
from test_kv import TRANSPORT, Server, make_certs, pattern

QUOTA = 1 << 20
MAKE_CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                          "make-certs")


def issue(d, name, cn, san=None):
    """A client certificate from D's CA (scripts/make-certs --client)."""
    subprocess.run([MAKE_CERTS, "--client", d, name, cn, *([san] if san else [])], check=True,
                   capture_output=True)
    return os.path.join(d, f"{name}.crt"), os.path.join(d, f"{name}.key")


@pytest.fixture(scope="module")
def tenants():
    d = tempfile.mkdtemp(prefix="qpg-py-tenants.")
    make_certs(d)
    ids = {n: issue(d, n, n, san) for n, san in
           (("a", "URI:spiffe://py/a"), ("b", "URI:spiffe://py/b"), ("eve", None))}
    path = os.path.join(d, "tenants.json")
    with open(path, "w") as f:
        f.write('{"tenants": [{"name": "a", "identities": ["spiffe://py/a"], "quota": "1M"},'
                ' {"name": "b", "identities": ["spiffe://py/b"]}]}')
    s = Server(d, "--client-ca", os.path.join(d, "ca.crt"), "--kv-tenants", path,
               "--kv-capacity", "8M")
    yield d, s, ids
    s.stop()


def open_pool(env, who, cls=qpgate.KVPool):
    d, s, ids = env
    cert, key = ids[who]
    return cls("127.0.0.1", "localhost", ca=os.path.join(d, "ca.crt"), cert=cert, key=key,
               port=s.port, transport=TRANSPORT, conns=2)


def test_each_tenant_sees_its_own_keys(tenants):
    keys = [f"t/{i}".encode() for i in range(8)]
    va = [pattern(4096, i) for i in range(8)]
    vb = [pattern(4096, 100 + i) for i in range(8)]
    with open_pool(tenants, "a") as a, open_pool(tenants, "b") as b:
        a.batch_put(keys, va)
        assert b.get(keys[0]) is None
        assert not b.exists(keys[0])
        assert b.batch_exists(keys) == 0 and b.exists_many(keys) == [False] * 8
        bufs = [bytearray(4096) for _ in keys]
        assert b.batch_get_into(keys, bufs) == [None] * 8
        assert b.delete(keys[0]) is False
        b.batch_put(keys[:4], vb[:4])  # B's own keys of the same names
        assert a.batch_exists(keys) == 8
        assert a.batch_get_into(keys, bufs) == [4096] * 8
        assert [bytes(x) for x in bufs] == va  # A's values, untouched by B
        assert b.batch_exists(keys) == 4 and b.get(keys[3]) == vb[3]

    async def main():
        async with open_pool(tenants, "a", qpgate.AsyncKVPool) as a, \
                open_pool(tenants, "b", qpgate.AsyncKVPool) as b:
            assert await b.exists_many(keys) == [True] * 4 + [False] * 4
            assert await a.batch_exists(keys) == 8
            assert await b.get(keys[5]) is None and await a.get(keys[5]) == va[5]
    asyncio.run(main())


def test_over_quota_raises_its_own_error(tenants):
    with open_pool(tenants, "a") as a:
        with pytest.raises(qpgate.OverQuota):
            a.put(b"huge", bytes(QUOTA + 1))
        # Within the quota, any number of PUTs: A evicts its own.
        for i in range(8):
            a.put(f"q/{i}".encode(), pattern(256 << 10, i))
        assert a.get(b"q/7") == pattern(256 << 10, 7)


def test_an_identity_without_a_tenant_cannot_connect(tenants):
    with pytest.raises(qpgate.ConnectionError, match="identity not admitted"):
        with open_pool(tenants, "eve") as e:
            e.get(b"t/0")
