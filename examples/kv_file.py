#!/usr/bin/python3
# SPDX-License-Identifier: BSD-2-Clause
"""Put a file into a qpgate KV server and get it back, from Python.

    kv_file.py HOST SERVERNAME CA FILE [PORT [TRANSPORT]]
"""
import os
import sys

import qpgate

host, servername, ca, path = sys.argv[1:5]
port = int(sys.argv[5]) if len(sys.argv) > 5 else 7471
transport = sys.argv[6] if len(sys.argv) > 6 else "rdma"

data = open(path, "rb").read()
key = os.path.basename(path).encode()
with qpgate.KVPool(host, servername, ca=ca, port=port, transport=transport, conns=2) as kv:
    kv.put(key, data)
    back = kv.get(key)
print(f"{path}: put {len(data)} bytes, got {len(back)} back, "
      f"{'the same' if back == data else 'DIFFERENT'}")
sys.exit(0 if back == data else 1)
