"""What a run start costs on SQLite's connection thread: items, wake-ups, calls, CPU.

    .venv/bin/python -m bench.dbthread                   # 3 x 100 starts one at a time
    .venv/bin/python -m bench.dbthread --profile 25      # plus cProfile's top 25 on that thread
    .venv/bin/python -m bench.dbthread --tokens 200      # plus that thread's cost per token

The app runs in-process as in `bench.start_cost` (SQLite in a temporary directory, the paced
upstream in its own process, one-token runs, each start read to its end). aiosqlite's worker
thread is wrapped before the app makes its connection, so that, per start with its end:

- **items**: what was put on the connection thread's queue (one trip each);
- **wake-ups** of the loop from the thread: the items that asked aiosqlite for an answer (its
  `call_soon_threadsafe`), plus the outcomes the work posts itself (`engines.sqlite._post`; uvloop's
  `call_soon_threadsafe` is not seen by cProfile), counted by cProfile on the thread;
- **calls**: the thread's Python (and C) calls, cProfile with the thread's own clock;
- **CPU**: the thread's own clock per start (without the profiler).

The trailing writes of the last start (its end commits after the stream's last frame) are
waited for before each batch is counted.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import threading
import time
from pathlib import Path
from typing import Any

import aiosqlite.core

from bench.start_cost import inprocess_app, one_start, with_upstream


class _Counted:
    """aiosqlite's queue as its worker thread sees it: every item taken is counted."""

    def __init__(self, tx: Any) -> None:
        self.tx, self.items, self.answered = tx, 0, 0

    def get(self) -> Any:
        future, function = item = self.tx.get()
        if not getattr(function, "bench_control", False):
            self.items += 1
            self.answered += future is not None
        return item


class Watch:
    """The connection threads, their queues and profilers."""

    def __init__(self) -> None:
        self.queues: list[_Counted] = []
        self.threads: list[threading.Thread] = []
        self.profilers: list[cProfile.Profile] = []
        original = aiosqlite.core._connection_worker_thread

        def worker(tx: Any) -> None:
            counted = _Counted(tx)
            self.queues.append(counted)
            self.threads.append(threading.current_thread())
            original(counted)

        aiosqlite.core._connection_worker_thread = worker  # type: ignore[assignment]

    def counts(self) -> tuple[int, int]:
        return sum(q.items for q in self.queues), sum(q.answered for q in self.queues)

    def cpu(self) -> float:
        used = 0.0
        for thread in self.threads:
            try:
                used += time.clock_gettime(time.pthread_getcpuclockid(thread.ident or 0))
            except (OSError, ProcessLookupError):
                pass
        return used

    def control(self, function: Any) -> None:
        """`function` on every live connection thread (not counted as an item)."""
        function.bench_control = True
        for counted in self.queues:
            counted.tx.put_nowait((None, function))

    def profile(self, on: bool) -> None:
        if on:
            self.profilers = []

            def enable() -> None:
                profiler = cProfile.Profile(time.thread_time)
                self.profilers.append(profiler)
                profiler.enable()

            self.control(enable)
        else:
            profilers = self.profilers

            def disable() -> None:
                for profiler in profilers:
                    profiler.disable()  # only the calling thread's takes effect

            self.control(disable)


async def settle() -> None:
    await asyncio.sleep(0.3)  # the last end's writes (the log writer's, the end's commit)


async def batch(app: Any, watch: Watch, n: int, profile: bool,
                text: str | None = None) -> dict[str, Any]:
    await settle()
    if profile:
        watch.profile(True)
        await asyncio.sleep(0.05)
    items, answered = watch.counts()
    cpu = watch.cpu()
    for _ in range(n):
        await one_start(app, text=text)
    await settle()
    cpu = watch.cpu() - cpu
    items, answered = watch.counts()[0] - items, watch.counts()[1] - answered
    row: dict[str, Any] = {"starts": n, "items_per_start": round(items / n, 2),
                           "aiosqlite_answers_per_start": round(answered / n, 2),
                           "thread_cpu_ms_per_start": round(cpu * 1000 / n, 3)}
    if profile:
        watch.profile(False)
        await asyncio.sleep(0.05)
        stats = pstats.Stats(*watch.profilers)
        posts = sum(calls for (path, _, name), (_, calls, *_) in
                    stats.stats.items()  # type: ignore[attr-defined]
                    if "call_soon_threadsafe" in name
                    or (path.endswith("engines/sqlite.py") and name == "_post"))
        row["calls_per_start"] = round(stats.total_calls / n)  # type: ignore[attr-defined]
        row["wakeups_per_start"] = round(posts / n + answered / n, 2)
        row["stats"] = stats
    return row


async def per_token(app: Any, watch: Watch, args: argparse.Namespace) -> None:
    """The thread's CPU and calls per streamed token: runs of `--tokens` tokens (the log
    writer's commits of their frames) less one-token runs, over the tokens between."""
    tokens, runs = args.tokens, max(4, args.calls // 10)
    rows = {}
    for text in ("paced 1 100000", f"paced {tokens} 100000"):
        cpu = [(await batch(app, watch, runs, False, text))["thread_cpu_ms_per_start"]
               for _ in range(args.rounds)]
        profiled = await batch(app, watch, runs, True, text)
        rows[text] = (sorted(cpu)[len(cpu) // 2], profiled["calls_per_start"],
                      profiled["items_per_start"])
    (one_cpu, one_calls, one_items), (cpu, calls, items) = rows.values()
    print(json.dumps({"per_token": {
        "thread_cpu_us": round((cpu - one_cpu) * 1000 / (tokens - 1), 2),
        "calls": round((calls - one_calls) / (tokens - 1), 2),
        "items": round((items - one_items) / (tokens - 1), 4)}}), flush=True)


async def measure(args: argparse.Namespace, upstream_url: str) -> None:
    watch = Watch()
    workdir = Path(os.environ.get("BENCH_DBTHREAD_DIR") or "/tmp") / f"dbthread-{os.getpid()}"
    workdir.mkdir(parents=True, exist_ok=True)
    app = inprocess_app(f"sqlite+aiosqlite:///{workdir / 'gateway.db'}", upstream_url, args.env)
    async with app.router.lifespan_context(app):
        for _ in range(20):  # lazy imports, the first model call, caches
            await one_start(app)
        cpu: list[float] = []
        for _ in range(args.rounds):
            row = await batch(app, watch, args.starts, False)
            cpu.append(row["thread_cpu_ms_per_start"])
            print(json.dumps(row), flush=True)
        row = await batch(app, watch, args.calls, True)
        stats = row.pop("stats")
        print(json.dumps({"profiled": row}), flush=True)
        print(json.dumps({"summary": {"thread_cpu_ms_per_start": sorted(cpu)[len(cpu) // 2],
                                      "items_per_start": row["items_per_start"],
                                      "calls_per_start": row["calls_per_start"],
                                      "wakeups_per_start": row["wakeups_per_start"]}}),
              flush=True)
        if args.tokens:
            await per_token(app, watch, args)
        if args.profile:
            out = io.StringIO()
            stats.stream = out
            stats.sort_stats("tottime").print_stats(args.profile)
            stats.sort_stats("cumulative").print_stats(args.profile)
            print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=100, help="starts per batch")
    parser.add_argument("--rounds", type=int, default=3, help="batches timed")
    parser.add_argument("--calls", type=int, default=100, help="starts profiled")
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's top N")
    parser.add_argument("--tokens", type=int, default=0,
                        help="also the thread's CPU and calls per token, over runs of this many")
    parser.add_argument("--env", action="append", default=[], help="NAME=value setting")
    args = parser.parse_args()
    print(f"load average at the start: {loadavg()}", flush=True)
    with_upstream(lambda url: measure(args, url))
    print(f"load average at the end: {loadavg()}", flush=True)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main()
