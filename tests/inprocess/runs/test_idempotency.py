"""`Idempotency-Key`: racing retries of one request start one run, on one thread."""

from __future__ import annotations

import asyncio

from gateway.runs.admission.threads import NewThread
from gateway.runs.manager import RunManager
from gateway.store.repository import Store
from tests.inprocess.conftest import (
    PROJECT,
    ScriptedDeltas,
    client,
    door,
    events,
    new_thread,
    user,
)


async def test_racing_retries_on_a_thread_attach_to_one_run(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    for attempt in range(5):  # the race is between the key lookup and the thread lock
        thread = await new_thread(store)
        started = await asyncio.gather(*[manager.start(thread,
                                                       user("once", key="key-1"))
                                         for _ in range(10)])
        assert len({s.run.id for s in started}) == 1
        assert sorted(s.attached for s in started) == [False] + [True] * 9
        await events(manager, started[0].run.id)
        assert len(model.requests) == attempt + 1


async def test_racing_retries_of_a_new_thread_run_create_one_thread(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    started = await asyncio.gather(*[
        door(manager).submit(client(), NewThread(None), user("once", key="key-2"))
        for _ in range(4)])
    assert len({s.run.id for s in started}) == 1
    await events(manager, started[0].run.id)
    page = await store.list_threads(PROJECT, None, 10, None)
    assert [t.id for t in page.rows] == [started[0].run.thread_id]


async def test_a_retry_long_after_the_run_ended_gets_that_run_again(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    first = await door(manager).submit(client(), NewThread(None), user("once", key="key-3"))
    done = await events(manager, first.run.id)
    late = await door(manager).submit(client(), NewThread(None), user("once", key="key-3"))
    assert (late.run.id, late.attached) == (first.run.id, True)
    assert await events(manager, late.run.id) == done  # a full replay
    assert len(model.requests) == 1
    assert len((await store.list_threads(PROJECT, None, 10, None)).rows) == 1
