"""The database's cancel-flag poll (`DatabaseSignals.listen`): it still finds a flag set on a
run that goes past a poll's wait, and it waits for nothing while no run goes
(docs/decisions/0028-no-idle-timers.md)."""

from __future__ import annotations

import asyncio

from gateway.backends.database import DatabaseSignals
from gateway.protocol.clock import new_id, now_ms
from gateway.runs.log.live import LiveLog
from gateway.runs.registry import ActiveRun, RunRegistry
from gateway.runs.timings import Timings
from gateway.store.repository import Store
from tests.inprocess.conftest import new_thread
from tests.integration.store.conftest import run_row


async def going(store: Store) -> ActiveRun:
    """A run started in the store, as the registry holds it while it goes."""
    row = run_row((await new_thread(store)).id, "process-a")
    assert await store.start_run(row, [], now_ms(), None) == "started"
    return ActiveRun(row=row, live=LiveLog(new_id("run_")))


async def test_the_registry_says_when_no_run_goes(store: Store) -> None:
    registry = RunRegistry()
    await asyncio.wait_for(registry.idle(), 1)  # none goes: at once
    active = await going(store)
    registry.add(active)
    waiting = asyncio.create_task(registry.idle())
    await asyncio.sleep(0)
    assert not waiting.done()  # a run goes: a poll due now must look at it
    registry.retire(active)
    await asyncio.wait_for(waiting, 1)
    registry._sweep.cancel()  # the ended run's lingering log


async def test_a_run_going_past_the_poll_is_still_cancelled_by_its_flag(store: Store) -> None:
    # The poll's timer is dropped only when every run ended before it was due; a run that
    # goes on is looked at, and a flag set on it lands.
    registry, cancelled = RunRegistry(), asyncio.Queue[str]()
    signals = DatabaseSignals(store, Timings(cancel_poll_seconds=0.01))
    short, long = await going(store), await going(store)
    listening = asyncio.create_task(signals.listen(registry, cancelled.put_nowait))
    try:
        registry.add(short)
        registry.retire(short)  # ended before any poll: nothing to look at
        registry.add(long)
        await signals.request_cancel(long.run_id)
        assert await asyncio.wait_for(cancelled.get(), 5) == long.run_id
        assert cancelled.empty()
    finally:
        listening.cancel()
        registry._sweep.cancel()
