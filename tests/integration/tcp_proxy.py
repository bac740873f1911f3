#!/usr/bin/python3
# SPDX-License-Identifier: BSD-2-Clause
# A TCP forwarder on loopback, for cutting one server off from etcd in a
# test: tcp_proxy.py LISTEN_PORT TARGET_PORT [READY_FILE]. Killing it cuts
# every connection through it; starting it again on the same port restores
# them. It writes READY_FILE once it listens. A port still held (a connection
# of the proxy killed a moment ago) is tried again for up to 10 s; then it
# exits 1 with the reason.
# With QPG_PROXY_FLIP=N in its environment it is a wire attacker instead:
# the byte at offset N of each connection's client-to-server stream goes
# through with its lowest bit flipped.
import asyncio
import errno
import os
import sys


FLIP = int(os.environ.get("QPG_PROXY_FLIP", "-1"))


async def pipe(r, w, flip=-1):
    seen = 0
    try:
        while data := await r.read(65536):
            if 0 <= flip - seen < len(data):
                data = bytearray(data)
                data[flip - seen] ^= 1
                data = bytes(data)
            seen += len(data)
            w.write(data)
            await w.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        w.close()


async def handle(cr, cw):
    try:
        sr, sw = await asyncio.open_connection("127.0.0.1", int(sys.argv[2]))
    except OSError:
        cw.close()
        return
    await asyncio.gather(pipe(cr, sw, FLIP), pipe(sr, cw))


async def listen(port):
    for _ in range(100):
        try:
            return await asyncio.start_server(handle, "127.0.0.1", port, reuse_address=True)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            await asyncio.sleep(0.1)
    sys.exit(f"tcp_proxy: port {port} stayed in use for 10 s: pick another")


async def main():
    server = await listen(int(sys.argv[1]))
    if len(sys.argv) > 3:
        with open(sys.argv[3] + ".tmp", "w") as f:
            f.write(f"{sys.argv[1]}\n")
        os.rename(sys.argv[3] + ".tmp", sys.argv[3])
    async with server:
        await server.serve_forever()


asyncio.run(main())
