"""`RunRegistry`: which run of this process a thread's updates go to, and a finished run's log
lingering for late subscribers."""

from __future__ import annotations

import asyncio

import pytest

from gateway.protocol.clock import new_id
from gateway.runs import registry as registry_module
from gateway.runs.log.live import LiveLog
from gateway.runs.phase import RunPhase
from gateway.runs.registry import ActiveRun, RunRegistry
from gateway.store.repository import Store
from tests.inprocess.conftest import new_thread
from tests.integration.store.conftest import run_row


async def test_a_thread_maps_to_its_live_run_and_an_ended_runs_log_lingers(store: Store) -> None:
    thread = await new_thread(store)
    registry = RunRegistry()
    ending = ActiveRun(row=run_row(thread.id), live=LiveLog(new_id("run_")),
                       phase=RunPhase.ENDING)
    registry.add(ending)
    assert registry.for_thread(thread.id) is None  # an ending run takes no more updates
    following = ActiveRun(row=run_row(thread.id), live=LiveLog(new_id("run_")),
                          phase=RunPhase.RUNNING)
    registry.add(following)
    assert registry.for_thread(thread.id) is following

    registry.retire(ending)
    assert ending.run_id not in registry.active
    assert registry.live_log(ending.run_id) is ending.live  # late subscribers still read it
    assert registry.live_log("run_unknown") is None
    assert not RunPhase.ENDING.live and not RunPhase.LOST.live and RunPhase.STARTING.live


async def test_the_logs_of_runs_that_ended_together_go_together_after_lingering(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "LINGER_SECONDS", 0.05)
    monkeypatch.setattr(registry_module, "LINGER_SLACK_SECONDS", 0.05)
    thread = await new_thread(store)
    registry = RunRegistry()
    runs = [ActiveRun(row=run_row(thread.id), live=LiveLog(new_id("run_"))) for _ in range(3)]
    for active in runs:
        registry.add(active)
        registry.retire(active)
    sweep = registry._sweep
    assert sweep is not None and all(registry.live_log(a.run_id) is a.live for a in runs)
    later = ActiveRun(row=run_row(thread.id), live=LiveLog(new_id("run_")))
    registry.add(later)
    monkeypatch.setattr(registry_module, "LINGER_SECONDS", 60.0)  # it lingers past the test
    registry.retire(later)
    assert registry._sweep is sweep  # one timer for all of them, not one per run
    await asyncio.sleep(0.15)  # the first three's time is up (and the slack after it)
    assert [registry.live_log(a.run_id) for a in runs] == [None, None, None]
    assert registry.live_log(later.run_id) is later.live
    assert registry._sweep is not None and registry._sweep is not sweep  # set for the last
    registry._sweep.cancel()


async def test_the_cancel_poll_waits_for_a_run_while_none_goes(store: Store) -> None:
    # The backends poll the cancel flags of `ids()` only after `running()` returns: an idle
    # process is not woken four times a second to find no run to look at.
    thread = await new_thread(store)
    registry = RunRegistry()
    waiting = asyncio.create_task(registry.running())
    await asyncio.sleep(0.01)
    assert not waiting.done() and not registry.ids()
    active = ActiveRun(row=run_row(thread.id), live=LiveLog(new_id("run_")))
    registry.add(active)
    await asyncio.wait_for(waiting, 1)
    assert list(registry.ids()) == [active.run_id]
    registry.retire(active)
    waiting = asyncio.create_task(registry.running())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    waiting.cancel()
