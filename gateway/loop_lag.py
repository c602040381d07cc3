"""An event-loop lag monitor for benchmarks (`GATEWAY_LOOP_LAG_LOG_SECONDS`).

Every stream of the process shares one event loop, so anything that holds it (a long
computation, a blocking call, a full garbage collection) delays every token of every run by as
much. The monitor wakes every `TICK_SECONDS` and records how late it woke; every `every` seconds
it logs the largest and the 99th percentile of those delays, at WARNING so that the benchmark
sees it with the log level it runs the gateway at. One timer per tick: nothing per token.
"""

from __future__ import annotations

import asyncio
import logging

TICK_SECONDS = 0.02

log = logging.getLogger("gateway.loop_lag")


async def monitor_loop_lag(every: float) -> None:
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    report_at = loop.time() + every
    while True:
        expected = loop.time() + TICK_SECONDS
        await asyncio.sleep(TICK_SECONDS)
        now = loop.time()
        lags.append(max(0.0, now - expected))
        if now >= report_at:
            lags.sort()
            p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
            log.warning("loop lag ms: ticks=%d p50=%.1f p99=%.1f max=%.1f", len(lags),
                        lags[len(lags) // 2] * 1000, p99 * 1000, lags[-1] * 1000)
            lags.clear()
            report_at = now + every
