"""The CPU of the two parts PostgreSQL + Redis add to a one-token run's start with its end,
apart from the rest of the app, in-process (far less noise than the whole start):

    .venv/bin/python -m bench.pg_redis_parts [--runs 300] [--rounds 3]

- **publish**: a run's publisher (`RedisFeed.publish`) over a one-token run's log as the app
  writes it: `RUN_STARTED` and the input's value, 2 ms later the token's three frames and the
  end under way (`LiveLog.ending`), 2 ms later the end, then the log closes. The loop thread's
  CPU per run, less the same script without a publisher; and the pipelines sent per run.
- **statements**: a start on a new thread (`Store.start_run_on_new_thread`, one input message)
  and its end (`Store.finish_run` with the rest of its log, its answer and its usage), each one
  statement: the loop thread's CPU per start with its end (SQLAlchemy, asyncpg, the greenlet;
  the round trips' waits are not CPU).

Starts a throwaway PostgreSQL and Redis (`tests/support/engines`). Rounds alternate the two
parts; medians are printed with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from gateway.backends.redis import RedisFeed
from gateway.protocol import timbal
from gateway.protocol.clock import new_id, now_ms
from gateway.runs.log.live import LiveLog
from gateway.runs.timings import Timings
from gateway.store import db
from gateway.store.repository import Store
from gateway.store.tables import MessageRow, RunRow, ThreadRow
from tests.support.engines import Engines

SENT: list[int] = []


def count_pipelines() -> None:
    execute = Pipeline.execute

    async def counted(self: Pipeline, raise_on_error: bool = True) -> Any:
        SENT.append(len(self.command_stack))
        return await execute(self, raise_on_error)

    Pipeline.execute = counted  # type: ignore[method-assign]


async def one_run(feed: RedisFeed | None) -> None:
    live = LiveLog(new_id("run_"))
    publishing = asyncio.create_task(feed.publish(live, lambda: False)) if feed else None
    await asyncio.sleep(0)
    live.append({"c": timbal.RUN_STARTED, "threadId": "t", "runId": live.run_id})
    live.append({"c": "set", "i": "u1", "v": {"type": "user", "content": "hi"}, "t": "x"})
    await asyncio.sleep(0.002)
    live.append({"c": "start", "i": "a1", "m": {"type": "agent", "messageId": "m1"}})
    live.append({"c": "append", "i": "a1", "a": "token"})
    live.append({"c": "set", "i": "a1", "v": {"type": "agent", "content": "token"}, "t": "x"})
    live.ending = True  # as `RunRecorder.finish` (an attribute nobody reads before it existed)
    await asyncio.sleep(0.002)
    live.extend([live.next_entry({"c": timbal.RUN_FINISHED})])
    await asyncio.sleep(0)
    live.close()
    if publishing is not None:
        await publishing


async def publish_cost(redis: Redis, runs: int) -> dict[str, float]:
    feed = RedisFeed(None, redis, Timings())  # type: ignore[arg-type]  # no subscriber here
    cpu = {}
    for name, with_feed in (("without", None), ("with", feed)):
        sent, started = len(SENT), time.thread_time()
        for _ in range(runs):
            await one_run(with_feed)
        cpu[name] = (time.thread_time() - started) / runs
        cpu[f"pipelines {name}"] = (len(SENT) - sent) / runs
    return {"publish_us_per_run": round((cpu["with"] - cpu["without"]) * 1e6, 1),
            "pipelines_per_run": round(cpu["pipelines with"], 2)}


async def statements_cost(store: Store, runs: int) -> dict[str, float]:
    started = time.thread_time()
    for _ in range(runs):
        now = now_ms()
        thread = ThreadRow(id=new_id("thr_"), project_id="p", user_key="bench", created_ms=now,
                           updated_ms=now)
        run = RunRow(id=new_id("run_"), thread_id=thread.id, project_id="p", status="running",
                     created_ms=now, started_ms=now, request={"message": {"content": "hi"}},
                     lease_owner="bench", lease_expires_ms=now + 30_000, model="paced")
        message = MessageRow(id=new_id("msg_"), thread_id=thread.id, run_id=run.id,
                             role="user", parts=[{"type": "text", "text": "hi"}],
                             created_ms=now)
        await store.start_run_on_new_thread(thread, [], run, [message])
        answer = MessageRow(id=new_id("msg_"), thread_id=thread.id, run_id=run.id,
                            role="assistant", parts=[{"type": "text", "text": "token"}],
                            created_ms=now)
        frames = [(seq, now, {"c": "append", "i": "a1", "a": "x"}) for seq in range(1, 7)]
        usage = [{"run_id": run.id, "model": "paced", "thread_id": thread.id, "project_id": "p",
                  "agent": None, "api_key_id": None, "calls": 1, "input_tokens": 3,
                  "output_tokens": 1, "reasoning_tokens": 0, "cached_input_tokens": 0,
                  "cost_usd": 0.0, "created_ms": now}]
        await store.finish_run(run.id, thread.id, "completed", now, owner="bench",
                               frames=frames, usage=usage, messages=[answer])
    return {"statements_us_per_run": round((time.thread_time() - started) / runs * 1e6, 1)}


async def measure(args: argparse.Namespace, engines: Engines) -> None:
    url = engines.postgres.create_database("bench_pg_redis_parts")
    engine = db.create_engine(url.replace("postgresql://", "postgresql+asyncpg://", 1))
    await db.migrate(engine)
    store, redis = Store(engine), Redis.from_url(engines.redis.url)
    try:
        await publish_cost(redis, 30)  # warm-up: connections, statements prepared
        await statements_cost(store, 30)
        rows: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for row in (await publish_cost(redis, args.runs),
                        await statements_cost(store, args.runs)):
                print(json.dumps(row), flush=True)
                for key, value in row.items():
                    rows.setdefault(key, []).append(value)
        print(json.dumps({"medians": {k: statistics.median(v) for k, v in rows.items()},
                          "rounds": rows}), flush=True)
    finally:
        await redis.aclose()
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    count_pipelines()
    engines = Engines().start()
    try:
        print("load average at the start:", *Path("/proc/loadavg").read_text().split()[:3])
        import uvloop

        uvloop.run(measure(args, engines))
        print("load average at the end:", *Path("/proc/loadavg").read_text().split()[:3])
    finally:
        engines.stop()


if __name__ == "__main__":
    main()
