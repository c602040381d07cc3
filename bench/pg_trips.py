"""Round trips to PostgreSQL, counted on the wire: a proxy in a process of its own.

    proxy = TripCounter("127.0.0.1", 5432)   # listens on proxy.port, forwards to PostgreSQL
    before = proxy.counts()
    ...                                       # a client connected to proxy.port does its work
    after = proxy.counts()                    # {"trips": ..., "parses": ..., "messages": ...}
    proxy.stop()

Each round trip of the frontend/backend protocol ends with a message the client then waits
for the answer to: a `Sync` (`S`, the end of an extended-protocol exchange: parse, bind,
execute...) or a simple `Query` (`Q`, asyncpg's `BEGIN`, `COMMIT`, a `;` ping). So counting
those two in what clients send is counting round trips, whatever the driver's API calls look
like (a prepared statement's cache miss, a type introspection, `executemany`'s pipeline).
`parses` counts `Parse` (`P`) messages: statements prepared on the server. Counted in the
proxy's own process, so the client's CPU is not changed by counting; the proxy adds a hop of
wall time, so measure CPU and latency without it.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import socket
import struct
import sys
from typing import Any

COUNTED = {b"S": "syncs", b"Q": "queries", b"P": "parses"}


def _serve(host: str, port: int, ready: Any, listen_port: int, control_port: int,
           trace: str | None) -> None:
    counts = {"syncs": 0, "queries": 0, "parses": 0, "messages": 0}
    out = open(trace, "w") if trace else None  # noqa: SIM115 (the process's lifetime)

    async def frontend(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Client -> server: the startup message has no type byte, the rest do."""
        (length,) = struct.unpack("!I", await reader.readexactly(4))
        first = await reader.readexactly(length - 4)
        writer.write(struct.pack("!I", length) + first)
        if first[:4] == struct.pack("!I", 80877103):  # SSLRequest: the server says 'N'
            (length,) = struct.unpack("!I", await reader.readexactly(4))
            writer.write(struct.pack("!I", length) + await reader.readexactly(length - 4))
        while True:
            kind = await reader.readexactly(1)
            (length,) = struct.unpack("!I", await reader.readexactly(4))
            body = await reader.readexactly(length - 4)
            counts["messages"] += 1
            name = COUNTED.get(kind)
            if name:
                counts[name] += 1
            if out is not None:  # the trips' messages, and each statement's text
                text = body.split(b"\0")[1 if kind == b"P" else 0] if kind in b"PQ" else b""
                out.write(f"{id(writer)} {kind.decode()} {text.decode(errors='replace')[:160]}\n"
                          if kind in b"PQS" else f"{id(writer)} {kind.decode()}\n")
                if kind in b"SQ":
                    out.flush()
            writer.write(kind + struct.pack("!I", length) + body)

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(host, port)
        tasks = [asyncio.ensure_future(frontend(reader, up_writer)),
                 asyncio.ensure_future(pipe(up_reader, writer))]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            writer.close()
            up_writer.close()

    async def control(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counts_now = {**counts, "trips": counts["syncs"] + counts["queries"]}
        writer.write(json.dumps(counts_now).encode())
        await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(client, "127.0.0.1", listen_port)
        controller = await asyncio.start_server(control, "127.0.0.1", control_port)
        ready.set()
        async with server, controller:
            await asyncio.Event().wait()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TripCounter:
    """The proxy, started in a process of its own (see the module's docstring)."""

    def __init__(self, host: str, port: int, trace: str | None = None) -> None:
        """`trace`: a file to write every message's type to (and the SQL of each `Parse` and
        `Query`), one line each, with the client connection's id."""
        self.port, self.control_port = _free_port(), _free_port()
        ready = multiprocessing.get_context("spawn").Event()
        self.process = multiprocessing.get_context("spawn").Process(
            target=_serve, args=(host, port, ready, self.port, self.control_port, trace), daemon=True)
        self.process.start()
        if not ready.wait(30):
            raise RuntimeError("the round-trip counter did not start")

    def counts(self) -> dict[str, int]:
        with socket.create_connection(("127.0.0.1", self.control_port), timeout=5) as sock:
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
        return dict(json.loads(data))

    def stop(self) -> None:
        self.process.kill()
        self.process.join(5)


def difference(after: dict[str, int], before: dict[str, int], per: int) -> dict[str, float]:
    return {key: round((after[key] - before[key]) / per, 2) for key in after}


if __name__ == "__main__":  # a quick look: python -m bench.pg_trips HOST PORT
    counter = TripCounter(sys.argv[1], int(sys.argv[2]))
    print(f"proxy on 127.0.0.1:{counter.port}", flush=True)
    try:
        asyncio.run(asyncio.Event().wait())
    finally:
        counter.stop()
