"""CPU per model call of the gateway's upstream client, one pool against the pool split over
clients (`gateway/engine/upstream_pool.py`), after a burst and beside open streams.

    .venv/bin/python -m bench.model_pool

The paced upstream (`bench/paced.py`) in its own process; in this one, on uvloop, httpx clients
as `DirectModel` makes them. First a burst of 64 one-token calls at once (it leaves idle
connections behind), then `--held` streams held open (0, then 300), then `--calls` one-token
calls one after another: the CPU of this process per call (`time.process_time`), which
includes reading the held streams' tokens (1 a second each), the same for every layout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import time
from typing import Any

import httpx

from bench.concurrency import Source
from gateway.engine.upstream_pool import KEEPALIVE_PER_SHARD, SHARDS, UpstreamPool


def body(text: str) -> bytes:
    return json.dumps({"model": "paced", "stream": True,
                       "messages": [{"role": "user", "content": text}]}).encode()


async def call(upstream: Any, text: str) -> None:
    async with upstream.stream("POST", "/chat/completions", content=body(text),
                               headers={"Content-Type": "application/json"}) as response:
        async for _ in response.aiter_raw():
            pass


async def per_call(url: str, shards: int, keepalive: int, held: int, calls: int) -> float:
    def make(limits: httpx.Limits, tls: ssl.SSLContext) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=url, verify=tls, timeout=600, limits=httpx.Limits(
            max_connections=None, max_keepalive_connections=keepalive))

    upstream = UpstreamPool(make, shards)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--held", default="0,300")
    args = parser.parse_args()
    import uvloop

    source = Source("upstream")
    try:
        url = f"{source.url}/v1"
        for held in (int(h) for h in args.held.split(",")):
            for shards, keepalive in ((1, 64), (SHARDS, KEEPALIVE_PER_SHARD)):
                cpu = uvloop.run(per_call(url, shards, keepalive, held, args.calls))
                print(f"{shards} client(s) x {keepalive} kept alive, {held} streams open: "
                      f"{cpu * 1e3:.2f} ms CPU per call", flush=True)
    finally:
        source.stop()
    print(f"load average {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
