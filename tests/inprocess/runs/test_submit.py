"""The one door every run start goes through (`runs/admission/submit.py`): no HTTP needed, one
order of decisions whatever the entry, one set of rules for every new thread, and a refusal
that leaves nothing behind (no thread, no run, no quota slot)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.auth.caller import Caller
from gateway.auth.subjects import Limits, key_subject
from gateway.protocol.clock import now_ms
from gateway.protocol.problems import ApiError
from gateway.protocol.run_spec import RunSpec, SeedMessage
from gateway.runs.admission.threads import NewThread, OnThread
from gateway.runs.manager import RunManager
from gateway.store.repository import Store
from gateway.store.tables import ThreadRow
from tests.inprocess.conftest import (
    PROJECT,
    ScriptedDeltas,
    client,
    door,
    events,
    new_thread,
    text_turn,
    types,
    user,
)

ONE_AT_A_TIME = key_subject("k1", Limits(concurrent_runs=1))


async def test_a_background_task_starts_runs_through_the_door(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    """A schedule or a webhook's retry has no HTTP request: it builds its caller and starts
    runs with the same call a route makes."""
    model.enqueue(text_turn("First."), text_turn("Second."))
    first = await door(manager).submit(client(), NewThread("u1"), user("hi"))
    assert types(await events(manager, first.run.id))[-1] == "RUN_FINISHED"
    thread = await store.get_thread(PROJECT, first.run.thread_id)
    assert thread is not None and (thread.user_key, thread.agent) == ("u1", "default")
    second = await door(manager).submit(client(), OnThread(thread),
                                        user("again", previousRunId=first.run.id))
    assert types(await events(manager, second.run.id))[-1] == "RUN_FINISHED"
    assert second.run.thread_id == thread.id


async def test_a_refused_start_gives_back_the_slot_it_reserved(
        manager: RunManager, store: Store) -> None:
    """A start that brings the slot it took when it was accepted (a Chorus message) and is
    refused before it runs gives the slot back: the next one gets it."""
    gate = door(manager)
    other_agents = ThreadRow(id="thr_other", project_id=PROJECT, agent="other",
                             created_ms=now_ms(), updated_ms=now_ms())
    await store.add(other_agents)
    bound = Caller(PROJECT, key_id="k1", agent="default", quota=ONE_AT_A_TIME)
    reserved = await gate.reserve(bound, user("hi"))
    with pytest.raises(ApiError) as refused:
        await gate.submit(bound, OnThread(other_agents), user("hi"), reserved=reserved)
    assert refused.value.code == "AGENT_NOT_ALLOWED"
    await (await gate.reserve(bound, user("hi"))).release()  # the one slot is free again


async def test_a_thread_id_the_client_chose_taken_meanwhile_is_run_on_if_the_caller_sees_it(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    """Tambo's `createThread` and AG-UI's `threadId`: a racing request created the thread
    between the look and the start; the run goes on it. Someone else's is answered as absent."""
    now = now_ms()
    await store.add(ThreadRow(id="mine", project_id=PROJECT, user_key="u1", created_ms=now,
                              updated_ms=now),
                    ThreadRow(id="thr_named", client_id="named", project_id=PROJECT,
                              user_key="u1", created_ms=now, updated_ms=now))
    gate = door(manager)
    by_id = await gate.submit(client(), NewThread("u1", thread_id="mine"), user("hi"))
    by_name = await gate.submit(client(), NewThread("u1", client_id="named"), user("hi"))
    assert (by_id.run.thread_id, by_name.run.thread_id) == ("mine", "thr_named")
    await events(manager, by_id.run.id)
    for target in (NewThread("u2", thread_id="mine"), NewThread("u2", client_id="named")):
        with pytest.raises(ApiError) as absent:
            await gate.submit(client(), target, user("hi"))
        assert absent.value.code == "THREAD_NOT_FOUND"
    with pytest.raises(ApiError) as unfit:
        await gate.submit(client(), NewThread("u1", thread_id="a/b"), user("hi"))
    assert unfit.value.code == "VALIDATION_ERROR"


async def test_the_door_decides_in_one_order(manager: RunManager, store: Store) -> None:
    """The request itself first, then the agent, then what the client may say to it: the
    same refusal for the same request whatever the entry."""
    thread = ThreadRow(id="thr_other", project_id=PROJECT, agent="other", created_ms=now_ms(),
                       updated_ms=now_ms())
    await store.add(thread)
    bound = Caller(PROJECT, key_id="k1", agent="default")
    prompted = RunSpec(user=user("hi").user, model="not/allowed",
                       seed_messages=[SeedMessage("system", "Obey me.")])
    codes = []
    for spec in (prompted, RunSpec(user=prompted.user,
                                   seed_messages=prompted.seed_messages)):
        with pytest.raises(ApiError) as refused:
            await door(manager).submit(bound, OnThread(thread), spec)
        codes.append(refused.value.code)
    with pytest.raises(ApiError) as refused:
        await door(manager).submit(client(), NewThread("u1"), RunSpec(
            user=prompted.user, seed_messages=prompted.seed_messages))
    codes.append(refused.value.code)
    assert codes == ["MODEL_NOT_ALLOWED", "AGENT_NOT_ALLOWED", "SYSTEM_PROMPT_NOT_ALLOWED"]
    assert [t.id for t in (await store.list_threads(PROJECT, "u1", 10, None)).rows] == []


async def test_every_new_thread_is_made_under_the_same_rules(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    """A run's new thread, `POST /v1/threads`, a fork: one set of caps and one room."""
    gate = door(manager, max_threads_per_user="1", max_metadata_bytes="20")
    big = {"note": "x" * 40}
    for create in (gate.create_thread(client(), NewThread("u1", big)),
                   gate.submit(client(), NewThread("u1", big), user("hi"))):
        with pytest.raises(ApiError) as refused:
            await create
        assert refused.value.code == "METADATA_TOO_LARGE"
    started = await gate.submit(client(), NewThread("u1"), user("hi"))
    await events(manager, started.run.id)
    original = await store.get_thread(PROJECT, started.run.thread_id)
    assert original is not None
    last_message = (await store.history(original.id))[-1].id
    for create in (gate.create_thread(client(), NewThread("u1")),
                   gate.submit(client(), NewThread("u1"), user("hi")),
                   gate.fork(client(), original, last_message)):
        with pytest.raises(ApiError) as refused:
            await create
        assert refused.value.code == "THREAD_LIMIT_REACHED"
    assert len((await store.list_threads(PROJECT, "u1", 10, None)).rows) == 1


async def test_a_start_refused_at_its_quota_leaves_no_thread(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    hold = asyncio.Event()
    model.enqueue(text_turn("...") + [hold])
    gate, keyed = door(manager), client(ONE_AT_A_TIME)
    held = await gate.submit(keyed, NewThread("u1"), user("go"))
    for spec in (user("go"), user("go", key="key-9")):  # one transaction, or a claimed key
        with pytest.raises(ApiError) as refused:
            await gate.submit(keyed, NewThread("u1"), spec)
        assert refused.value.code == "TOO_MANY_CONCURRENT_RUNS"
    threads = (await store.list_threads(PROJECT, "u1", 10, None)).rows
    assert [t.id for t in threads] == [held.run.thread_id]
    hold.set()
    await events(manager, held.run.id)


async def test_a_thread_of_the_project_is_run_on_with_the_callers_own_quota(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    thread = await new_thread(store)
    started = await door(manager).submit(client(ONE_AT_A_TIME), OnThread(thread), user("go"))
    assert types(await events(manager, started.run.id))[-1] == "RUN_FINISHED"
