"""The Chorus sweeper: every process looks, now and then, for waiting messages that nobody is
starting, and starts them.

A message waits (`chorus_deliveries`) while its channel's thread is busy; normally the process
whose run on the thread ends starts the next one (`routes_delivery.Deliveries.pump`). When that
process dies, its run is failed by a reaper (`runs/supervisor.py`) and the thread unlocked, but
nobody is left to start the waiting message: the sweeper finds idle threads with a message no
live claim holds (a claim lasts a lease, so a dead process's claim runs out) and pumps them as
the process that took the message would have. First, it reports the end of a run lost with
its process to that message's callback (`error` `RUN_LOST`, then `lifecycle idle`): the
message's row is kept until its run's end is reported, and a channel's next message is not
started before (a row whose run went with its deleted thread is reported as ended too, with
`lifecycle idle` only, so it cannot hold the channel back). Only the channel's oldest message is started,
by whoever claims it first, so messages still run once each and in order. It also sweeps at
start-up: a single process that was restarted starts what it had stored before it died.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from ...observability import outages
from ...protocol.clock import now_ms
from ...store.repository import UNAVAILABLE
from .routes_delivery import Deliveries

log = logging.getLogger("gateway.chorus")

SWEEP_BATCH = 100  # threads per look; more are found at the next


async def report_ended(deliveries: Deliveries) -> int:
    """Report the end of each started message whose run ended while nobody relays it (the
    process that did died: its claim ran out) to its callback: a run lost with its process
    (`RUN_LOST`), or one that ended just before its process died, or one gone with its
    deleted thread; returns how many."""
    store = deliveries.svc.store
    reported = 0
    for row, run in await store.ended_chorus_deliveries(now_ms(), SWEEP_BATCH):
        if await store.take_chorus_delivery(row.id):  # once, whoever looks
            await deliveries.report_end(row, run)
            reported += 1
    return reported


async def sweep(deliveries: Deliveries) -> int:
    """Report the ends nobody reported, then wake each thread with a stranded message (after:
    a channel hears its messages in order); returns how many threads were woken."""
    await report_ended(deliveries)
    found = await deliveries.svc.store.stranded_chorus_threads(now_ms(), SWEEP_BATCH)
    for project, thread_id in found:
        deliveries.wake(project, thread_id)
    return len(found)


async def sweep_forever(deliveries: Deliveries, every: float) -> None:
    while True:
        try:
            await sweep(deliveries)
        except asyncio.CancelledError:
            raise
        except UNAVAILABLE as error:  # logged once per outage, not once per sweep
            outages.down("database", f"chorus sweep: {type(error).__name__}")
        except Exception:
            log.exception("chorus sweep failed")
        await asyncio.sleep(every)


@contextlib.asynccontextmanager
async def background(app: Any) -> AsyncIterator[None]:
    """The process's `Deliveries` and its sweeper, for the app's lifetime (its lifespan). The
    sweeper looks as often as the reaper does (a quarter of `GATEWAY_LEASE_SECONDS`)."""
    svc = app.state.services
    deliveries = app.state.chorus = Deliveries(svc)
    timings = svc.runs.timings
    every = max(timings.supervisor_tick_seconds, timings.lease_seconds / 4)
    task = asyncio.create_task(sweep_forever(deliveries, every), name="chorus sweeper")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await deliveries.close()
