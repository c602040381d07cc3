"""`RunRegistry`: which run of this process a thread's updates go to, and a finished run's log
lingering for late subscribers."""

from __future__ import annotations

from gateway.protocol.clock import new_id
from gateway.runs.log import LiveLog
from gateway.runs.phase import RunPhase
from gateway.runs.registry import ActiveRun, RunRegistry
from gateway.store.repository import Store
from tests.inprocess.conftest import new_thread
from tests.inprocess.store.test_repository import run_row


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
