"""What publishing a run's stream entries to Redis costs the gateway's process, per entry.

    .venv/bin/python -m bench.redis_appends [--runs 50] [--entries 200]

Against a throwaway Redis on loopback (as `tests/` starts it), `--runs` publishers at once, each
appending `--entries` entries one at a time, as a run streaming token by token does:

- one pipeline per batch: an `XADD` and an `EXPIRE` in a pipeline of their own, what each run
  sent before `runs/redis_appends.py`;
- shared: through `StreamAppends`, whose pipelines carry whatever every run has waiting.

Prints this process's CPU per entry (µs) and the pipelines sent. Not part of the pass/fail suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvloop
from redis.asyncio import Redis

from gateway.backends.redis import StreamAppends
from gateway.store.db import json_text
from tests.support.engines import RedisServer

FRAME = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "msg_1", "delta": " token"}

Append = Callable[[str, int], Awaitable[None]]


class CountingRedis(Redis):
    pipelines = 0

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        self.pipelines += 1
        return super().pipeline(*args, **kwargs)


async def measure(redis: CountingRedis, runs: int, entries: int, append: Append) -> float:
    """CPU µs per entry with `runs` publishers appending `entries` entries each, one by one."""
    await redis.flushdb()

    async def publisher(number: int) -> None:
        for seq in range(1, entries + 1):
            await append(f"bench:run:{number}", seq)

    before = time.thread_time()
    await asyncio.gather(*(publisher(n) for n in range(runs)))
    return (time.thread_time() - before) / (runs * entries) * 1e6


async def main(options: argparse.Namespace) -> None:
    server = RedisServer(Path(tempfile.mkdtemp(prefix="bench-redis-"))).start()
    redis = CountingRedis.from_url(server.url)
    shared = StreamAppends(redis)

    async def own_pipeline(key: str, seq: int) -> None:
        pipe = redis.pipeline(transaction=False)
        pipe.xadd(key, {"ts": 0, "f": json.dumps(FRAME)}, id=f"0-{seq}")
        pipe.expire(key, 3600)
        await pipe.execute()

    async def through_shared(key: str, seq: int) -> None:
        await shared.append(key, [(seq, 0, json_text(FRAME))], 3600 if seq == 1 else None)

    try:
        for name, append in (("one pipeline per batch", own_pipeline),
                             ("shared (StreamAppends)", through_shared)):
            await measure(redis, options.runs, 20, append)  # warm up
            redis.pipelines = 0
            per_entry = await measure(redis, options.runs, options.entries, append)
            print(f"{name:24} {per_entry:6.1f} µs CPU per entry, {redis.pipelines} pipelines "
                  f"for {options.runs * options.entries} entries")
    finally:
        await redis.aclose()
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--entries", type=int, default=200)
    uvloop.run(main(parser.parse_args()))
