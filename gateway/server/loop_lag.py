"""An event-loop lag monitor for benchmarks (`GATEWAY_LOOP_LAG_LOG_SECONDS`).

Every stream of the process shares one event loop, so anything that holds it (a long
computation, a blocking call, a full garbage collection) delays every token of every run by as
much. The monitor wakes every `TICK_SECONDS` and records how late it woke; every `every` seconds
it logs the largest and the 99th percentile of those delays, at WARNING so that the benchmark
sees it with the log level it runs the gateway at, with the garbage collections of the
interval (count and longest): a collection is the one pause that no await point breaks up.
One timer per tick and one callback per collection: nothing per token.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

TICK_SECONDS = 0.02

log = logging.getLogger("gateway.server.loop_lag")


class CollectionTimer:
    """The collections since the last report: how many, and the longest (ms)."""

    def __init__(self) -> None:
        self.count, self.longest, self._started = 0, 0.0, 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.count += 1
            self.longest = max(self.longest, (time.perf_counter() - self._started) * 1000)

    def take(self) -> tuple[int, float]:
        taken = self.count, self.longest
        self.count, self.longest = 0, 0.0
        return taken


async def monitor_loop_lag(every: float) -> None:
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    collections = CollectionTimer()
    gc.callbacks.append(collections)
    try:
        await _monitor(loop, every, lags, collections)
    finally:
        gc.callbacks.remove(collections)


async def _monitor(loop: asyncio.AbstractEventLoop, every: float, lags: list[float],
                   collections: CollectionTimer) -> None:
    report_at = loop.time() + every
    while True:
        expected = loop.time() + TICK_SECONDS
        await asyncio.sleep(TICK_SECONDS)
        now = loop.time()
        lags.append(max(0.0, now - expected))
        if now >= report_at:
            lags.sort()
            p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
            count, longest = collections.take()
            log.warning("loop lag ms: ticks=%d p50=%.1f p99=%.1f max=%.1f gc=%d gc_max=%.1f",
                        len(lags), lags[len(lags) // 2] * 1000, p99 * 1000, lags[-1] * 1000,
                        count, longest)
            lags.clear()
            report_at = now + every
