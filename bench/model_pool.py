"""CPU per model call of the gateway's upstream client (`gateway/engine/models/upstream_pool.py`: one
aiohttp session) against one httpx pool and the httpx pool split over 8 clients it replaced,
after a burst and beside open streams.

    .venv/bin/python -m bench.model_pool

The paced upstream (`bench/paced.py`) in its own process; in this one, on uvloop, the clients
as `DirectModel` made them. First a burst of 64 one-token calls at once (it leaves idle
connections behind), then `--held` streams held open (0, then 300), then `--calls` one-token
calls one after another: the CPU of this process per call (`time.process_time`), which
includes reading the held streams' tokens (1 a second each), the same for every layout. Then
`--paced` streams of 100 tokens at 20 tok/s at once: the CPU per chunk read when each chunk
arrives alone (a run's token at that pace).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from bench.concurrency import Source
from gateway.engine.models.upstream_pool import UpstreamPool

SHARDS, KEEPALIVE_PER_SHARD = 8, 8  # the httpx layout before the aiohttp session


class HttpxShards:
    """The former `UpstreamPool`: httpx clients, each call to the one carrying the fewest."""

    def __init__(self, url: str, shards: int, keepalive: int) -> None:
        self.clients = [httpx.AsyncClient(base_url=url, timeout=600, limits=httpx.Limits(
            max_connections=None, max_keepalive_connections=keepalive)) for _ in range(shards)]
        self.streams = [0] * shards

    @contextlib.asynccontextmanager
    async def post(self, path: str, content: bytes) -> AsyncIterator[httpx.Response]:
        shard = self.streams.index(min(self.streams))
        self.streams[shard] += 1
        try:
            async with self.clients[shard].stream("POST", path, content=content) as response:
                yield response
        finally:
            self.streams[shard] -= 1

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


def body(text: str) -> bytes:
    return json.dumps({"model": "paced", "stream": True,
                       "messages": [{"role": "user", "content": text}]}).encode()


async def call(upstream: Any, text: str) -> None:
    async with upstream.post("/chat/completions", body(text)) as response:
        if isinstance(response, httpx.Response):
            async for _ in response.aiter_raw():
                pass
        else:
            async for _ in response.content.iter_any():
                pass


async def per_call(url: str, layout: tuple[int, int] | None, held: int, calls: int) -> float:
    upstream: Any = UpstreamPool(url, {}, 600.0, 10.0) if layout is None else HttpxShards(
        url, *layout)
    await asyncio.gather(*(call(upstream, "paced 1 1000") for _ in range(64)))
    holders = [asyncio.create_task(call(upstream, "paced 100000 1")) for _ in range(held)]
    await asyncio.sleep(2)
    started = time.process_time()
    for _ in range(calls):
        await call(upstream, "paced 1 1000")
    cpu = (time.process_time() - started) / calls
    for holder in holders:
        holder.cancel()
    await asyncio.gather(*holders, return_exceptions=True)
    await upstream.aclose()
    return cpu


async def per_chunk(url: str, layout: tuple[int, int] | None, streams: int) -> float:
    """CPU per chunk read of `streams` streams of 100 tokens at 20 tok/s, each chunk alone."""
    upstream: Any = UpstreamPool(url, {}, 600.0, 10.0) if layout is None else HttpxShards(
        url, *layout)
    await asyncio.gather(*(call(upstream, "paced 1 1000") for _ in range(10)))
    started = time.process_time()
    await asyncio.gather(*(call(upstream, "paced 100 20") for _ in range(streams)))
    cpu = (time.process_time() - started) / (streams * 100)
    await upstream.aclose()
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--held", default="0,300")
    parser.add_argument("--paced", type=int, default=150,
                        help="streams of 100 tokens at 20 tok/s for the CPU per chunk (0: skip)")
    args = parser.parse_args()
    import uvloop

    source = Source("upstream")
    try:
        url = f"{source.url}/v1"
        for held in (int(h) for h in args.held.split(",")):
            for layout in ((1, 64), (SHARDS, KEEPALIVE_PER_SHARD), None):
                cpu = uvloop.run(per_call(url, layout, held, args.calls))
                name = "aiohttp session" if layout is None else \
                    f"httpx: {layout[0]} client(s) x {layout[1]} kept alive"
                print(f"{name}, {held} streams open: {cpu * 1e3:.2f} ms CPU per call",
                      flush=True)
        for layout in ((SHARDS, KEEPALIVE_PER_SHARD), None) if args.paced else ():
            cpu = uvloop.run(per_chunk(url, layout, args.paced))
            name = "aiohttp session" if layout is None else "httpx"
            print(f"{name}, {args.paced} streams at 20 tok/s: {cpu * 1e6:.1f} µs CPU per "
                  "chunk", flush=True)
    finally:
        source.stop()
    print(f"load average {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
