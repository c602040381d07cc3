"""Quotas of a run start (`runs/admission/submit.py` takes the slot, the run manager holds it): a
429 with `Retry-After` past a limit, and a concurrency slot that comes back on every way a run
ends (a leaked slot would lock its key or user out)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from gateway.auth.subjects import Limits, Subject, key_subject, user_subject
from gateway.backends.memory import MemoryCounters
from gateway.engine.deltas import ModelError, TextDelta, Usage
from gateway.protocol.problems import ApiError
from gateway.protocol.run_spec import RunSpec
from gateway.runs.admission.admit import StartedRun
from gateway.runs.admission.quotas import QuotaExceeded, Quotas
from gateway.runs.admission.threads import NewThread, OnThread, Target
from gateway.runs.manager import RunManager
from gateway.store.repository import Store
from tests.inprocess.conftest import (
    PROJECT,
    ManagerFactory,
    ScriptedDeltas,
    client,
    door,
    events,
    finished,
    new_thread,
    tool_turn,
    types,
    user,
)

ONE_AT_A_TIME = key_subject("k1", Limits(concurrent_runs=1))
CLIENT_TOOL = {"name": "pick", "description": "Ask the user.",
               "inputSchema": {"type": "object", "properties": {}}}


async def submitted(manager: RunManager, target: Target, spec: RunSpec,
                    quota: Subject = ONE_AT_A_TIME) -> StartedRun:
    """`spec` started on `target` through the door, for a caller whose key has `quota`."""
    return await door(manager).submit(client(quota), target, spec)


async def start(manager: RunManager, store: Store, **extra: object):
    thread = await new_thread(store, "u1")
    return (await submitted(manager, OnThread(thread), user("go", **extra))).run


async def refused(manager: RunManager, store: Store) -> QuotaExceeded:
    with pytest.raises(QuotaExceeded) as error:
        await start(manager, store)
    return error.value


async def test_a_third_concurrent_run_gets_429_with_retry_after(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    manager = managers()
    hold = asyncio.Event()
    model.enqueue([hold], [hold])
    two = key_subject("k2", Limits(concurrent_runs=2))
    runs = [(await submitted(manager, OnThread(await new_thread(store)), user("go"),
                             two)).run for _ in range(2)]
    with pytest.raises(QuotaExceeded) as third:
        await submitted(manager, OnThread(await new_thread(store)), user("go"), two)
    assert (third.value.status, third.value.code) == (429, "TOO_MANY_CONCURRENT_RUNS")
    assert int(third.value.headers["Retry-After"]) >= 1
    assert third.value.extra["limitScope"] == "apiKey"
    hold.set()
    for run in runs:
        await finished(manager, run.id)
    again = await submitted(manager, OnThread(await new_thread(store)), user("go"), two)
    await events(manager, again.run.id)


async def test_runs_per_minute_and_the_user_scope_are_counted_separately() -> None:
    quotas = Quotas(MemoryCounters())
    key = key_subject("k", Limits(runs_per_minute=4))
    alice = user_subject(PROJECT, "alice", Limits(runs_per_minute=2))
    bob = user_subject(PROJECT, "bob", Limits(runs_per_minute=2))
    for who in (alice, alice, bob):
        await (await quotas.acquire([key, who])).release()
    with pytest.raises(QuotaExceeded) as user_over:
        await quotas.acquire([key, alice])
    assert (user_over.value.code, user_over.value.extra["limitScope"]) == ("RATE_LIMITED",
                                                                          "user")
    await (await quotas.acquire([key, bob])).release()  # bob's second: the key's fourth
    with pytest.raises(QuotaExceeded) as key_over:
        await quotas.acquire([key, bob])
    assert (key_over.value.code, key_over.value.extra["limitScope"]) == ("RATE_LIMITED",
                                                                        "apiKey")
    assert 1 <= int(key_over.value.headers["Retry-After"]) <= 60


async def test_the_daily_token_budget_counts_what_the_model_reports(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    manager = managers()
    budget = key_subject("k3", Limits(daily_tokens=100))
    model.enqueue([TextDelta("hi"), Usage(60, 50)])
    run = (await submitted(manager, OnThread(await new_thread(store)), user("go"),
                           budget)).run
    await events(manager, run.id)
    with pytest.raises(QuotaExceeded) as spent:
        await submitted(manager, OnThread(await new_thread(store)), user("go"), budget)
    assert spent.value.code == "TOKEN_BUDGET_EXCEEDED"
    assert int(spent.value.headers["Retry-After"]) <= 86400


async def _completed(manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    await events(manager, (await start(manager, store)).id)


async def _awaiting_input(manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    model.enqueue(tool_turn("call_1", "pick", "{}"))
    run = await start(manager, store, tools=[CLIENT_TOOL])
    await events(manager, run.id)
    assert (await store.get_run(run.id)).status == "awaiting_input"


async def _failed(manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    model.enqueue([ModelError("LLM_SERVER_ERROR", "down", "server_error", True)])
    run = await start(manager, store)
    await events(manager, run.id)
    assert (await store.get_run(run.id)).status == "failed"


async def _held(manager: RunManager, store: Store, model: ScriptedDeltas) -> str:
    model.enqueue([TextDelta("..."), asyncio.Event()])
    asked = len(model.requests)
    run = await start(manager, store)
    while len(model.requests) == asked:  # until the model holds it
        await asyncio.sleep(0.01)
    await refused(manager, store)  # it holds the one slot while it runs
    return run.id


async def _cancelled(manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    run_id = await _held(manager, store, model)
    assert (await manager.cancel(run_id)).status == "cancelled"


async def _lost(manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    run_id = await _held(manager, store, model)
    manager.lose(run_id)  # another process ended it (our lease expired)
    await finished(manager, run_id)


async def _timed_out(manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    run_id = await _held(manager, store, model)
    seen = await events(manager, run_id)
    assert types(seen)[-1] == "RUN_ERROR" and seen[-1][1]["code"] == "RUN_TIME_LIMIT"
    assert (await store.get_run(run_id)).status == "failed"


END_PATHS: dict[str, Callable[[RunManager, Store, ScriptedDeltas], Awaitable[None]]] = {
    "completed": _completed, "awaiting_input": _awaiting_input, "failed": _failed,
    "cancelled": _cancelled, "lost": _lost, "run wall time": _timed_out}


@pytest.mark.parametrize("end", END_PATHS)
async def test_the_slot_comes_back_however_the_run_ends(
        end: str, managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    manager = managers(run_max_seconds=0.5)
    await END_PATHS[end](manager, store, model)
    # The next run of the same key is admitted at once, and ends normally.
    await _completed(manager, store, model)


async def test_the_slot_comes_back_when_the_process_drains(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    counters = MemoryCounters()
    draining = managers(counters=counters)
    run_id = await _held(draining, store, model)
    await draining.shutdown()  # the end of a drain: what is left ends with SERVER_SHUTDOWN
    assert (await store.get_run(run_id)).error["code"] == "SERVER_SHUTDOWN"
    other = managers(counters=counters)  # another process sharing the counters
    await _completed(other, store, model)


async def test_a_refused_run_leaves_no_slot_and_no_thread_lock(
        managers: ManagerFactory, store: Store) -> None:
    manager = managers()
    thread = await new_thread(store)
    with pytest.raises(ApiError):  # refused at admission: a continuation without previousRunId
        await submitted(manager, OnThread(thread), user("x", previousRunId="run_nope"))
    await _completed(manager, store, ScriptedDeltas())


async def test_a_new_thread_run_holds_its_slot_and_a_refused_one_leaves_nothing(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    # A run on a new thread is started in one transaction with its thread (no thread first).
    manager = managers()
    with pytest.raises(ApiError):  # refused at admission: a continuation on a new thread
        await submitted(manager, NewThread("u1"), user("x", previousRunId="run_nope"))
    assert (await store.list_threads(PROJECT, None, 10, None)).rows == []
    model.enqueue([TextDelta("..."), asyncio.Event()])
    held = await submitted(manager, NewThread("u1"), user("go"))
    with pytest.raises(QuotaExceeded):  # it holds the one slot while it runs
        await submitted(manager, NewThread("u1"), user("go"))
    assert [t.id for t in (await store.list_threads(PROJECT, None, 10, None)).rows] == [
        held.run.thread_id]
    assert (await manager.cancel(held.run.id)).status == "cancelled"
    await _completed(manager, store, model)  # the slot came back


async def test_a_retry_with_its_idempotency_key_attaches_even_at_the_limit(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    manager = managers()
    model.enqueue([TextDelta("..."), asyncio.Event()])
    thread = await new_thread(store, "u1")
    first = await submitted(manager, OnThread(thread), user("go", key="key-1"))
    retry = await submitted(manager, OnThread(thread), user("go", key="key-1"))
    assert retry.attached and retry.run.id == first.run.id
    await refused(manager, store)  # a new request still is refused


async def test_memory_counters_forget_past_windows() -> None:
    """Every user scope seen gets counters; those of a minute (a day) that has passed are
    dropped when the next begins, so a process does not keep one per user forever."""
    counters = MemoryCounters()
    limits = Limits(runs_per_minute=5, daily_tokens=1000)
    minute = 10 * 60_000
    for n in range(100):
        subject = user_subject(PROJECT, f"user-{n}", limits)
        assert await counters.acquire(f"t{n}", [subject], minute) is None
        await counters.add_tokens([subject], 1, minute)
        await counters.release(f"t{n}", [subject])
    assert len(counters.starts) == len(counters.tokens) == 100
    later = user_subject(PROJECT, "later", limits)
    assert await counters.acquire("t-later", [later], minute + 60_000) is None
    assert list(counters.starts) == [later.name] and len(counters.tokens) == 100
    assert await counters.acquire("t-next-day", [later], minute + 86_400_000) is None
    assert counters.tokens == {} and list(counters.starts) == [later.name]
