"""What a one-token run arms on the event loop, by cause: timers, hand-overs from threads, tasks.

    .venv/bin/python -m bench.wakeup_causes --runs 100 [--gap 0.01] [--env NAME=value ...]

The app (`create_app`, SQLite in a temporary directory, the settings `gateway serve` runs the
benchmarks with: the start gate's wait and the loop-lateness limit on) runs in this process on
a uvloop whose timer, thread and task entry points are counted (a subclass of `uvloop.Loop`:
`call_later`/`call_at`, `call_soon_threadsafe`, `run_in_executor`, `create_task`), and `--runs`
one-token runs are handed to it one after another, `--gap` seconds apart (runs arriving 10 ms
apart, as `bench/concurrency.py`'s cost samples send them). Per run, by the callback's or
coroutine's name:

- **timers armed** and **timers fired** (a timer that fires is a wake-up of the loop when
  nothing else woke it; one cancelled before it is due costs its handle only);
- **posted from threads** (`call_soon_threadsafe`: a write to the loop's wake-up fd, a wake-up
  of the loop and, for the thread, a hand-over of the GIL): SQLite's thread's answers;
- **to the executor** (a trip to a thread of the default executor and back);
- **tasks created** (each one is scheduled at least twice: its first step and its end).

The counts are the loop's own and do not depend on the machine's load; what each costs from
outside is `bench/wakeups_outside.py`'s (docs/decisions/0028-no-idle-timers.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import uvloop

from bench.start_cost import one_start, with_upstream

COUNTS: dict[str, Counter[str]] = {
    "timers armed": Counter(), "timers fired": Counter(), "posted from threads": Counter(),
    "to the executor": Counter(), "tasks created": Counter()}


def name_of(callback: Any) -> str:
    """A readable name for a callback: a bound method's owner, a task's coroutine."""
    inner = getattr(callback, "__func__", callback)
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task | asyncio.Future):
        coro = owner.get_coro() if isinstance(owner, asyncio.Task) else None
        return f"{type(owner).__name__}.{getattr(inner, '__name__', '?')}" + (
            f"({getattr(coro, '__qualname__', '?')})" if coro else "")
    return getattr(inner, "__qualname__", None) or repr(inner)[:80]


def caller() -> str:
    """The first frame outside asyncio and this module: who armed the timer (a sleep's or a
    timeout's owner, not asyncio's helper)."""
    frame: Any = sys._getframe(3)
    while frame is not None and (frame.f_code.co_filename.startswith(SKIPPED)
                                 or frame.f_code.co_filename == __file__):
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_qualname}"


SKIPPED = (str(Path(asyncio.__file__).parent), str(Path(anyio.__file__).parent))


class CountingLoop(uvloop.Loop):  # type: ignore[misc]
    """uvloop's loop, counting what schedules wake-ups (see the module docstring)."""

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any,
                   context: Any = None) -> asyncio.TimerHandle:
        return self._timer(delay, callback, args, context)

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any,
                context: Any = None) -> asyncio.TimerHandle:
        # uvloop's call_at is its call_later (through Python's dispatch): counted once.
        return self._timer(when - self.time(), callback, args, context)

    def _timer(self, delay: float, callback: Callable[..., Any], args: tuple[Any, ...], context: Any
               ) -> asyncio.TimerHandle:
        name = f"{name_of(callback)} <- {caller()}"
        COUNTS["timers armed"][name] += 1

        def fired(*a: Any) -> Any:
            COUNTS["timers fired"][name] += 1
            return callback(*a)

        return super().call_later(delay, fired, *args, context=context)

    def call_soon_threadsafe(self, callback: Callable[..., Any], *args: Any,
                             context: Any = None) -> asyncio.Handle:
        COUNTS["posted from threads"][name_of(callback)] += 1
        return super().call_soon_threadsafe(callback, *args, context=context)

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any
                        ) -> asyncio.Future[Any]:
        COUNTS["to the executor"][name_of(func)] += 1
        return super().run_in_executor(executor, func, *args)

    def create_task(self, coro: Any, *, name: Any = None, context: Any = None
                    ) -> asyncio.Task[Any]:
        COUNTS["tasks created"][getattr(coro, "__qualname__", repr(coro)[:60])] += 1
        return super().create_task(coro, name=name, context=context)


def switches() -> dict[str, int]:
    """Voluntary context switches of each of this process's threads, by name (the loop's is
    `MainThread`; on SQLite aiosqlite's connection thread is a `Thread-N`)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    counts: Counter[str] = Counter()
    for task in os.listdir("/proc/self/task"):
        try:
            status = Path(f"/proc/self/task/{task}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                counts[names.get(int(task), "other (libuv's workers)")] += int(line.split()[1])
    return counts


async def measure(upstream_url: str, runs: int, gap: float, env: list[str]) -> None:
    from gateway.app import create_app
    from gateway.config import Settings
    from tests.support.inprocess_app import settings_from

    settings = settings_from({
        "GATEWAY_DATABASE_URL":
            f"sqlite+aiosqlite:///{Path(tempfile.mkdtemp(prefix='wakeup-causes-')) / 'g.db'}",
        "GATEWAY_MODEL": "openai/paced", "GATEWAY_MODEL_API_BASE": f"{upstream_url}/v1",
        "GATEWAY_MODEL_API_KEY": "sk-bench", "GATEWAY_MODEL_ADAPTER": "auto",
        "GATEWAY_MAX_START_WAIT_SECONDS": str(
            Settings.model_fields["max_start_wait_seconds"].default),
        "GATEWAY_MAX_LOOP_LAG_SECONDS": "0.1",
        **dict(e.split("=", 1) for e in env)})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        for _ in range(20):  # lazy imports, the first model call, caches
            await one_start(app)
        await asyncio.sleep(1.0)
        for counter in COUNTS.values():
            counter.clear()
        before = switches()
        for _ in range(runs):
            await one_start(app)
            await asyncio.sleep(gap)
        after = switches()
        await asyncio.sleep(0.1)
    print(f"per run, over {runs} one-token runs {gap * 1000:g} ms apart "
          f"(load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}):")
    print("voluntary context switches, by thread:", ", ".join(
        f"{name} {(after[name] - before.get(name, 0)) / runs:.2f}" for name in after))
    for title, counter in COUNTS.items():
        print(f"{title}: {sum(counter.values()) / runs:.2f}")
        for name, count in counter.most_common(12):
            print(f"    {count / runs:6.2f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--gap", type=float, default=0.01,
                        help="seconds between one run's end and the next's start")
    parser.add_argument("--env", action="append", default=[], help="NAME=value setting")
    args = parser.parse_args()
    with_upstream(lambda url: measure(url, args.runs, args.gap, args.env), CountingLoop)


if __name__ == "__main__":
    main()
