#!/usr/bin/python3
# SPDX-License-Identifier: BSD-2-Clause
# A TCP forwarder on loopback, for cutting one server off from etcd in a
# test: tcp_proxy.py LISTEN_PORT TARGET_PORT. Killing it cuts every
# connection through it; starting it again on the same port restores them.
import asyncio
import sys


async def pipe(r, w):
    try:
        while data := await r.read(65536):
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
    await asyncio.gather(pipe(cr, sw), pipe(sr, cw))


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]), reuse_address=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
