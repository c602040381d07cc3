"""The start gate: how many run starts one process works on at once.

Starting a run is a burst of work on the event loop that every stream of the process shares:
parsing and checking the request, the thread's lock and the run's rows in one transaction, the
run's task. When hundreds of starts arrive together (a deploy's reconnect storm, a launch, a
benchmark) and all are let in, every turn of the loop is full of start work and every token of
every run already streaming waits behind it: 300 starts at once on 2 cores delayed tokens by up
to 260 ms at p99 (bench/README.md). Through the gate they go a few at a time, in the order they
came: a start waits for its turn instead of everyone waiting for all of them.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from ..observability import metrics


class StartGate:
    """At most `width` run starts at once; the rest wait in arrival order (asyncio's
    semaphore wakes waiters first come, first served)."""

    def __init__(self, width: int) -> None:
        self._slots = asyncio.Semaphore(width)

    async def __aenter__(self) -> None:
        if self._slots.locked():
            metrics.STARTS_WAITING.inc()
            try:
                await self._slots.acquire()
            finally:
                metrics.STARTS_WAITING.dec()
        else:
            await self._slots.acquire()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        self._slots.release()
