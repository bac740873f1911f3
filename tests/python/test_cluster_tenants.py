# SPDX-License-Identifier: BSD-2-Clause
"""Tenants across a cluster of three members (etcd of the test's own on
loopback; tcp on the host, rdma in the lab): every member derives the same
tenant from the same client certificate, so a tenant's keys are its own on
whichever member owns them, through batches split by owner; each member
holds a tenant to its quota; an identity without a tenant is refused."""
import os
import subprocess

import pytest

import qpgate
from test_cluster import BIN, TRANSPORT, Cluster, again, pattern
from test_tenants import issue

QUOTA = 512 << 10  # per member (the members' largest value: 1 MiB)


def prepare(d):
    for n, san in (("a", "URI:spiffe://cl/a"), ("b", "URI:spiffe://cl/b"), ("eve", None)):
        issue(d, n, n, san)
    path = os.path.join(d, "tenants.json")
    with open(path, "w") as f:
        f.write('{"tenants": [{"name": "a", "identities": ["spiffe://cl/a"], "quota": "512K"},'
                ' {"name": "b", "identities": ["spiffe://cl/b"]}]}')
    return ["--client-ca", os.path.join(d, "ca.crt"), "--kv-tenants", path]


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(prepare)
    yield c
    c.stop()


def pool(c, who):
    return c.pool(cert=os.path.join(c.dir, f"{who}.crt"), key=os.path.join(c.dir, f"{who}.key"))


def test_tenants_across_three_members(cluster):
    keys = [f"ct/{i}".encode() for i in range(60)]
    va = [pattern(2000 + i, i) for i in range(60)]
    vb = [pattern(1000 + i, 100 + i) for i in range(60)]
    with pool(cluster, "a") as a, pool(cluster, "b") as b:
        again(a.batch_put, keys, va)
        assert again(b.exists_many, keys) == [False] * 60
        assert again(b.batch_exists, keys) == 0
        bufs = [bytearray(4096) for _ in keys]
        assert again(b.batch_get_into, keys, bufs) == [None] * 60
        assert again(b.delete, keys[0]) is False
        again(b.batch_put, keys, vb)  # B's own values, same names
        assert again(a.batch_exists, keys) == 60
        assert again(a.batch_get_into, keys, bufs) == [len(v) for v in va]
        assert [bytes(bufs[i][:len(va[i])]) for i in range(60)] == va
        # A writes 6 MiB, about 2 per member, against 512 KiB per member:
        # every PUT is taken, A evicts its own, and B keeps all of its.
        for i in range(48):
            again(a.put, f"big/{i}".encode(), pattern(128 << 10, i))
        assert again(a.get, b"big/47") == pattern(128 << 10, 47)
        assert again(b.batch_get_into, keys, bufs) == [len(v) for v in vb]
        assert [bytes(bufs[i][:len(vb[i])]) for i in range(60)] == vb
        with pytest.raises(qpgate.OverQuota):
            a.put(b"huge", bytes(QUOTA + 1))


def test_stats_show_the_callers_tenant_on_each_member(cluster):
    """qpgate-kv --stats over the cluster: one STAT per member, routed by a
    key each member owns; every member names the caller's tenant."""
    d = cluster.dir
    out = subprocess.run(
        [os.path.join(BIN, "qpgate-kv"), "--transport", TRANSPORT, "--ca", cluster.ca,
         "--cert", os.path.join(d, "a.crt"), "--key", os.path.join(d, "a.key"),
         "--cluster", cluster.url, "--cluster-name", cluster.name, "--stats"],
        capture_output=True, text=True, timeout=60)
    lines = [x for x in out.stdout.splitlines() if x.startswith("TENANT ")]
    assert out.returncode == 0 and len(lines) == 3, out.stdout + out.stderr
    assert all(x.startswith(f"TENANT a (server {i + 1} of 3): ") and "524288-byte quota" in x
               for i, x in enumerate(lines)), lines


def test_an_identity_without_a_tenant_is_refused(cluster, capfd):
    """Every member refuses it at connect, with the reason (the library
    logs it per member); its calls find no member to serve them."""
    with pytest.raises(qpgate.Unavailable):
        with pool(cluster, "eve") as kv:
            kv.get(b"ct/1")
    err = capfd.readouterr().err
    assert err.count('identity not admitted): identity "eve" has no tenant here') >= 3, err
