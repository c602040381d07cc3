"""`RunManager`: starting, the loop and its history, client tool pauses, refusals, cancel."""

from __future__ import annotations

import asyncio

import pytest

from gateway.protocol.problems import ApiError
from gateway.runs.manager import RunManager
from gateway.store.repository import Store
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


async def test_a_run_streams_persists_and_feeds_the_next_runs_history(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    thread = await new_thread(store)
    model.enqueue(text_turn("Hel", "lo!", reasoning="Greet back."), text_turn("Again."))
    first = (await manager.start(thread, user("hi"))).run
    seen = await events(manager, first.id)
    assert types(seen) == [
        "RUN_STARTED", "THINKING_TEXT_MESSAGE_START", "THINKING_TEXT_MESSAGE_CONTENT",
        "THINKING_TEXT_MESSAGE_END", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert [position for position, _ in seen] == list(range(1, len(seen) + 1))
    assert (await store.get_run(first.id)).status == "completed"
    after = await store.get_thread(PROJECT, thread.id)
    assert (after.run_status, after.last_completed_run_id) == ("idle", first.id)

    second = (await manager.start(after, user("and again",
                                                       previousRunId=first.id))).run
    await events(manager, second.id)
    history = model.requests[-1].messages
    assert [(m["role"], m.get("content")) for m in history] == [
        ("user", "hi"), ("assistant", "Hello!"), ("user", "and again")]


async def test_a_thread_with_runs_needs_the_previous_run_id(
        manager: RunManager, store: Store) -> None:
    thread = await new_thread(store)
    first = (await manager.start(thread, user("one"))).run
    await events(manager, first.id)
    with pytest.raises(ApiError) as refused:
        await manager.start(thread, user("two"))
    assert refused.value.code == "INVALID_PREVIOUS_RUN"
    with pytest.raises(ApiError) as stale:
        await manager.start(thread, user("two", previousRunId="run_other"))
    assert stale.value.code == "INVALID_PREVIOUS_RUN"


async def test_a_second_run_while_one_is_active_is_refused(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    thread = await new_thread(store)
    release = asyncio.Event()
    model.enqueue([release])
    running = (await manager.start(thread, user("hold"))).run
    with pytest.raises(ApiError) as busy:
        await manager.start(thread, user("again", previousRunId=running.id))
    assert (busy.value.code, busy.value.extra["currentRunId"]) == ("CONCURRENT_RUN", running.id)
    release.set()
    assert types(await events(manager, running.id))[-1] == "RUN_FINISHED"


async def test_a_client_tool_pauses_the_run_and_its_result_continues_it(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    thread = await new_thread(store)
    model.enqueue(tool_turn("call_1", "get_time", "{}"), text_turn("It is noon."))
    paused = (await manager.start(thread, user("time?", tools=[TIME_TOOL]))).run
    seen = await events(manager, paused.id)
    awaiting = [e for _, e in seen if e.get("name") == "tambo.run.awaiting_input"]
    assert awaiting[0]["value"]["pendingToolCalls"][0]["toolCallId"] == "call_1"
    assert (await store.get_run(paused.id)).status == "awaiting_input"
    waiting = await store.get_thread(PROJECT, thread.id)
    assert [p["toolCallId"] for p in waiting.pending_tool_calls] == ["call_1"]

    with pytest.raises(ApiError) as missing:
        await manager.start(waiting, user("no result", previousRunId=paused.id))
    assert missing.value.code == "INVALID_TOOL_RESULT"
    with pytest.raises(ApiError) as extra:
        await manager.start(waiting, tool_results(
            {"call_1": "noon", "call_9": "?"}, previousRunId=paused.id))
    assert extra.value.code == "INVALID_TOOL_RESULT"

    resumed = (await manager.start(waiting, tool_results(
        {"call_1": "12:00"}, previousRunId=paused.id, tools=[TIME_TOOL]))).run
    assert types(await events(manager, resumed.id))[-1] == "RUN_FINISHED"
    sent = model.requests[-1].messages
    answer = next(m for m in sent if m.get("tool_call_id") == "call_1")
    assert "12:00" in str(answer["content"])


async def test_cancel_ends_the_run_cancelled_and_keeps_the_partial_message(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    thread = await new_thread(store)
    hold = asyncio.Event()
    model.enqueue(text_turn("partial ") + [hold])
    run = (await manager.start(thread, user("go"))).run
    reader = asyncio.create_task(events(manager, run.id))
    while not manager.live_log(run.id) or manager.live_log(run.id).last < 3:
        await asyncio.sleep(0.005)
    ended = await manager.cancel(run.id)
    assert ended.status == "cancelled"
    seen = await reader
    assert seen[-1][1]["type"] == "RUN_ERROR" and seen[-1][1]["code"] == "CANCELLED"
    messages = await store.history(thread.id)
    assert messages[-1].is_cancelled and messages[-1].parts[0]["content"] == "partial "
    assert (await manager.cancel(run.id)).status == "cancelled"  # idempotent
    thread_after = await store.get_thread(PROJECT, thread.id)
    assert thread_after.run_status == "idle" and thread_after.last_run_cancelled


async def test_cancelling_an_ended_run_reports_how_it_ended(
        manager: RunManager, store: Store) -> None:
    thread = await new_thread(store)
    run = (await manager.start(thread, user("go"))).run
    await events(manager, run.id)
    for _ in range(2):
        assert (await manager.cancel(run.id)).status == "completed"
    assert not (await store.get_thread(PROJECT, thread.id)).last_run_cancelled


async def test_the_thread_of_a_cancelled_run_takes_a_new_run_at_once(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    """The cancel returns only once the thread is free: no window where a retry is refused."""
    thread = await new_thread(store)
    model.enqueue(text_turn("long ") + [asyncio.Event()], text_turn("Fresh answer."))
    run = (await manager.start(thread, user("long"))).run
    while not manager.live_log(run.id) or manager.live_log(run.id).last < 3:
        await asyncio.sleep(0.005)
    await manager.cancel(run.id)
    freed = await store.get_thread(PROJECT, thread.id)
    again = (await manager.start(freed, user("next", previousRunId=run.id))).run
    assert types(await events(manager, again.id))[-1] == "RUN_FINISHED"
    answer = [m for m in await store.history(thread.id) if m.role == "assistant"][-1]
    assert [p.get("content") for p in answer.parts] == ["Fresh answer."]


async def test_two_subscribers_of_a_live_run_get_identical_events(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    thread = await new_thread(store)
    model.enqueue(text_turn("a ") + [0.05] + text_turn("b ") + [0.05] + text_turn("c"))
    run = (await manager.start(thread, user("go"))).run
    mine, theirs = await asyncio.gather(events(manager, run.id), events(manager, run.id))
    assert mine == theirs and types(mine)[-1] == "RUN_FINISHED"


async def test_a_database_outage_at_the_end_keeps_the_answer_in_the_thread(
        manager: RunManager, store: Store, model: ScriptedDeltas,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The database goes away as the run's end is written, which holds its answer (a run's
    last message goes with its end): the end is retried, the run completes, and the thread
    holds the answer the user saw streamed (found by the soak: it was only in the run's log)."""
    thread = await new_thread(store)
    model.enqueue(text_turn("All ", "of ", "it."))
    finish = store.finish_run
    failures = iter([OSError("connection refused")])

    async def finish_while_away(*args, **kwargs):
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return await finish(*args, **kwargs)

    monkeypatch.setattr(store, "finish_run", finish_while_away)
    run = (await manager.start(thread, user("go"))).run
    seen = await events(manager, run.id)
    assert next(failures, None) is None  # the outage happened
    assert seen[-1][1]["type"] == "RUN_FINISHED"
    streamed = "".join(e["delta"] for _, e in seen if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert streamed == "All of it."
    ended = await store.get_run(run.id)
    assert ended.status == "completed"
    answer = (await store.history(thread.id))[-1]
    assert (answer.role, answer.run_id) == ("assistant", run.id)
    assert "".join(p.get("content", "") for p in answer.parts) == streamed
    assert not answer.is_cancelled
    assert (await store.get_thread(PROJECT, thread.id)).run_status == "idle"


async def test_a_database_outage_mid_run_keeps_what_it_had_said_in_the_thread(
        manager: RunManager, store: Store, model: ScriptedDeltas,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The database goes away while a run writes a message it completed (its reasoning, written
    as the answer's text starts): the run fails (`DATABASE_UNAVAILABLE`), and once its end is
    written the thread still holds the reasoning the user saw streamed, on an answer marked
    failed (`RunExecutor._keep_answer`), not only the run's log."""
    thread = await new_thread(store)
    model.enqueue(text_turn("Never said.", reasoning="Thinking it over."))
    add_message = store.add_message
    failures = iter([OSError("connection refused")])

    async def add_while_away(*args, **kwargs):
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return await add_message(*args, **kwargs)

    monkeypatch.setattr(store, "add_message", add_while_away)
    run = (await manager.start(thread, user("go"))).run
    seen = await events(manager, run.id)
    assert next(failures, None) is None  # the outage happened
    assert (seen[-1][1]["type"], seen[-1][1]["code"]) == ("RUN_ERROR", "DATABASE_UNAVAILABLE")
    shown = "".join(e["delta"] for _, e in seen if e["type"] == "THINKING_TEXT_MESSAGE_CONTENT")
    assert shown == "Thinking it over."
    assert (await store.get_run(run.id)).status == "failed"
    answer = (await store.history(thread.id))[-1]
    assert (answer.role, answer.run_id, answer.is_cancelled) == ("assistant", run.id, True)
    assert [p.get("content") for p in answer.parts] == [shown]
    assert answer.meta["runFailed"]["code"] == "DATABASE_UNAVAILABLE"


async def test_a_run_is_written_with_the_model_it_calls(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    # Its start is its only write before the model answers: the run's status names the model
    # from then on (the configured one, or the one the request asks for).
    manager = managers(model_name="openai/configured")
    model.enqueue([asyncio.Event()], [asyncio.Event()])
    configured = (await manager.start(await new_thread(store), user("hi"))).run
    asked = (await manager.start(await new_thread(store),
                                 user("hi", model="openai/asked"))).run
    assert (await store.get_run(configured.id)).model == "openai/configured"
    assert (await store.get_run(asked.id)).model == "openai/asked"
    for run in (configured, asked):
        assert (await store.get_run(run.id)).status == "running"
        await manager.cancel(run.id)


async def test_a_queued_run_runs_on_the_spec_its_row_keeps(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    """A run started here runs on the spec it was admitted with; a queued run is started later,
    maybe by another process, from its row (`RunSpec.from_row`): it gets the same spec."""
    from tests.inprocess.runs.test_multitask import streaming

    owner, other = managers(), managers()
    hold = asyncio.Event()
    thread, running = await streaming(owner, store, model, hold)
    model.enqueue(text_turn("ok"))
    queued = (await other.start(thread, user(
        "later", tools=[TIME_TOOL], maxTokens=50, temperature=0.25,
        previousRunId=running.previous_run_id, multitaskStrategy="enqueue"))).run
    hold.set()
    await events(owner, running.id)
    await events(other, queued.id)
    sent = model.requests[-1]
    assert [t["function"]["name"] for t in sent.tools] == ["get_time"]
    assert (sent.max_tokens, sent.temperature) == (50, 0.25)


async def test_a_queued_run_whose_row_was_written_before_run_spec_runs_as_it_would_have(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A row written by the gateway before the neutral spec (the Tambo request's camelCase
    keys) gives the model the same tools when its run is started from it."""
    from gateway.runs.admission import admit as admission
    from tests.inprocess.runs.test_multitask import streaming

    manager = managers()
    hold = asyncio.Event()
    thread, running = await streaming(manager, store, model, hold)
    model.enqueue(text_turn("ok"))
    monkeypatch.setattr(admission, "request_row",
                        lambda *_: {"tools": [TIME_TOOL], "maxTokens": 50})
    queued = (await manager.start(thread, user(
        "later", previousRunId=running.previous_run_id, multitaskStrategy="enqueue"))).run
    assert (await store.get_run(queued.id)).request["tools"] == [TIME_TOOL]
    hold.set()
    await events(manager, queued.id)
    sent = model.requests[-1]
    assert [t["function"]["name"] for t in sent.tools] == ["get_time"]
    assert sent.max_tokens == 50
