"""`Idempotency-Key`: racing retries of one request start one run, on one thread."""

from __future__ import annotations

import asyncio

from gateway.protocol.clock import new_id, now_ms
from gateway.runs.admission.admit import NewThread
from gateway.runs.manager import RunManager
from gateway.store.repository import Store
from gateway.store.tables import ThreadRow
from tests.inprocess.conftest import PROJECT, ScriptedDeltas, events, new_thread, user


async def test_racing_retries_on_a_thread_attach_to_one_run(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    for attempt in range(5):  # the race is between the key lookup and the thread lock
        thread = await new_thread(store)
        started = await asyncio.gather(*[manager.start(PROJECT, thread,
                                                       user("once", key="key-1"))
                                         for _ in range(10)])
        assert len({s.run.id for s in started}) == 1
        assert sorted(s.attached for s in started) == [False] + [True] * 9
        await events(manager, started[0].run.id)
        assert len(model.requests) == attempt + 1


def fresh_thread() -> NewThread:  # each request makes its own, as the API does
    now = now_ms()
    return NewThread(ThreadRow(id=new_id("thr_"), project_id=PROJECT, created_ms=now,
                               updated_ms=now), [])


async def test_racing_retries_of_a_new_thread_run_create_one_thread(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    started = await asyncio.gather(*[
        manager.start_new_thread(PROJECT, fresh_thread(), user("once", key="key-2"), None)
        for _ in range(4)])
    assert len({s.run.id for s in started}) == 1
    await events(manager, started[0].run.id)
    page = await store.list_threads(PROJECT, None, 10, None)
    assert [t.id for t in page.rows] == [started[0].run.thread_id]


async def test_a_retry_long_after_the_run_ended_gets_that_run_again(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    first = await manager.start_new_thread(PROJECT, fresh_thread(), user("once", key="key-3"), None)
    done = await events(manager, first.run.id)
    late = await manager.start_new_thread(PROJECT, fresh_thread(), user("once", key="key-3"), None)
    assert (late.run.id, late.attached) == (first.run.id, True)
    assert await events(manager, late.run.id) == done  # a full replay
    assert len(model.requests) == 1
    assert len((await store.list_threads(PROJECT, None, 10, None)).rows) == 1
