"""A way out of every pause (`runs/pauses.py`): cancelling a paused run, a new message that
abandons the pending calls (asked, or after the TTL), and the race with the client's results."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import update

from gateway.protocol.problems import ApiError
from gateway.runs.manager import RunManager
from gateway.runs.pauses import CANCELLED_BY_USER
from gateway.store.repository import Store
from gateway.store.tables import RunRow, ThreadRow
from tests.inprocess.conftest import (
    PROJECT,
    ManagerFactory,
    ScriptedDeltas,
    events,
    new_thread,
    text_turn,
    tool_results,
    tool_turn,
    types,
    user,
)

TIME_TOOL = {"name": "get_time", "description": "The time.",
             "inputSchema": {"type": "object", "properties": {}}}


async def paused_thread(manager: RunManager, store: Store, model: ScriptedDeltas
                        ) -> tuple[ThreadRow, RunRow]:
    thread = await new_thread(store)
    model.enqueue(tool_turn("call_1", "get_time", "{}"))
    paused = (await manager.start(thread, user("time?", tools=[TIME_TOOL]))).run
    assert types(await events(manager, paused.id))[-2] == "tambo.run.awaiting_input"
    waiting = await store.get_thread(PROJECT, thread.id)
    assert waiting is not None and waiting.pending_tool_calls
    return waiting, paused


def cancelled_answers(store_history: list) -> list[dict]:
    return [part for row in store_history for part in row.parts
            if part["type"] == "tool_result" and part["toolCallId"] == "call_1"]


async def test_cancelling_a_paused_run_answers_its_calls_and_frees_the_thread(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    thread, paused = await paused_thread(manager, store, model)

    ended = await manager.cancel(paused.id)

    assert (ended.status, ended.error["code"], ended.pending_tool_calls) == (
        "cancelled", "CANCELLED", None)
    after = await store.get_thread(PROJECT, thread.id)
    assert (after.run_status, after.pending_tool_calls, after.last_run_cancelled,
            after.last_completed_run_id) == ("idle", None, True, paused.id)
    answers = cancelled_answers(await store.history(thread.id))
    assert [(a["status"], a["error"], a["name"]) for a in answers] == [
        ("error", CANCELLED_BY_USER, "get_time")]
    assert (await manager.cancel(paused.id)).status == "cancelled"  # idempotent
    assert len(cancelled_answers(await store.history(thread.id))) == 1

    model.enqueue(text_turn("Sorry, no time then."))
    nxt = (await manager.start(after, user("never mind", previousRunId=paused.id))).run
    assert types(await events(manager, nxt.id))[-1] == "RUN_FINISHED"
    sent = model.requests[-1].messages
    answer = next(m for m in sent if m.get("tool_call_id") == "call_1")
    assert CANCELLED_BY_USER in str(answer["content"])
    assert sent[-1]["content"] == "never mind"


async def test_a_new_message_abandons_the_pause_only_when_asked_or_stale(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    thread, paused = await paused_thread(manager, store, model)
    with pytest.raises(ApiError) as refused:
        await manager.start(thread, user("hello?", previousRunId=paused.id))
    assert refused.value.extra["reason"] == "MISSING_RESULTS"

    run = (await manager.start(thread, user(
        "hello?", previousRunId=paused.id, abandonPendingTools=True))).run
    assert types(await events(manager, run.id))[-1] == "RUN_FINISHED"
    assert (await store.get_run(paused.id)).status == "cancelled"
    assert model.requests[-1].messages[-1]["content"] == "hello?"
    assert len(cancelled_answers(await store.history(thread.id))) == 1


async def test_a_pause_older_than_the_ttl_is_abandoned_by_a_new_message(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    manager = managers(pending_tool_ttl_seconds=3600.0)
    thread, paused = await paused_thread(manager, store, model)
    with pytest.raises(ApiError):  # paused just now: still waiting for its results
        await manager.start(thread, user("hello?", previousRunId=paused.id))

    runs = RunRow.__table__  # type: ignore[attr-defined]
    ago = (update(runs).where(runs.c.id == paused.id)  # paused two hours ago
           .values(finished_ms=paused.created_ms - 7_200_000))
    await store.transaction(lambda tx: tx.execute(ago))
    run = (await manager.start(thread, user("hello?", previousRunId=paused.id))).run
    assert types(await events(manager, run.id))[-1] == "RUN_FINISHED"
    assert (await store.get_run(paused.id)).status == "cancelled"


async def test_results_racing_a_cancel_leave_exactly_one_answer_per_call(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    for _ in range(3):
        thread, paused = await paused_thread(manager, store, model)
        outcomes = await asyncio.gather(
            manager.cancel(paused.id),
            manager.start(thread, tool_results({"call_1": "12:00"},
                                                        previousRunId=paused.id)),
            return_exceptions=True)
        started = outcomes[1]
        if not isinstance(started, BaseException):
            await events(manager, started.run.id)
        else:
            assert isinstance(started, ApiError) and started.code == "INVALID_TOOL_RESULT"
        answers = cancelled_answers(await store.history(thread.id))
        assert len(answers) == 1
        assert (await store.get_run(paused.id)).status == (
            "awaiting_input" if answers[0]["status"] == "success" else "cancelled")
