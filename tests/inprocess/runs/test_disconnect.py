"""The disconnect policy: leaving is not cancelling; an unwatched run is cancelled after its
grace window unless someone comes back; `continue` never cancels; a paused run is never
cancelled by the client closing its stream."""

from __future__ import annotations

import asyncio

from gateway.runs.manager import RunManager
from gateway.store.repository import Store
from tests.inprocess.conftest import (
    PROJECT,
    ManagerFactory,
    ScriptedDeltas,
    events,
    new_thread,
    text_turn,
    tool_turn,
    user,
)

GRACE = 0.5  # long enough that a loaded machine does not cancel early


async def read_and_leave(manager: RunManager, run_id: str, count: int) -> None:
    """A subscriber that reads `count` entries and disconnects."""
    source = manager.entries(run_id)
    for _ in range(count):
        await anext(source)
    await source.aclose()


async def status_after(store: Store, run_id: str, seconds: float) -> str:
    await asyncio.sleep(seconds)
    return (await store.get_run(run_id)).status


async def test_an_unwatched_run_is_cancelled_after_the_grace_window(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    manager = managers(disconnect_grace_seconds=GRACE)
    thread = await new_thread(store)
    model.enqueue(text_turn("working ") + [asyncio.Event()])
    run = (await manager.start(PROJECT, thread, user("go"))).run
    await read_and_leave(manager, run.id, 2)
    assert await status_after(store, run.id, GRACE / 5) == "running"  # leaving is not cancelling
    assert await status_after(store, run.id, GRACE * 2) == "cancelled"


async def test_a_subscriber_coming_back_within_the_window_keeps_the_run(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    manager = managers(disconnect_grace_seconds=GRACE)
    thread = await new_thread(store)
    release = asyncio.Event()
    model.enqueue(text_turn("working ") + [release] + text_turn("done"))
    run = (await manager.start(PROJECT, thread, user("go"))).run
    await read_and_leave(manager, run.id, 2)
    back = asyncio.create_task(events(manager, run.id))  # a reload reconnects
    assert await status_after(store, run.id, GRACE * 2) == "running"
    release.set()
    assert (await back)[-1][1]["type"] == "RUN_FINISHED"


async def test_continue_runs_to_the_end_unwatched(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    manager = managers(disconnect_grace_seconds=0.0)
    thread = await new_thread(store)
    release = asyncio.Event()
    model.enqueue(text_turn("working ") + [release] + text_turn("done"))
    run = (await manager.start(PROJECT, thread, user("go", onDisconnect="continue"))).run
    await read_and_leave(manager, run.id, 2)
    assert await status_after(store, run.id, 0.1) == "running"
    release.set()
    assert (await events(manager, run.id))[-1][1]["type"] == "RUN_FINISHED"
    assert (await store.get_run(run.id)).status == "completed"


async def test_a_paused_run_is_not_cancelled_when_its_client_leaves(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    manager = managers(disconnect_grace_seconds=0.0)
    thread = await new_thread(store)
    model.enqueue(tool_turn("call_1", "get_time", "{}"))
    tool = {"name": "get_time", "description": "", "inputSchema": {"type": "object"}}
    run = (await manager.start(PROJECT, thread, user("time?", tools=[tool],
                                                     onDisconnect="cancel"))).run
    seen = await events(manager, run.id)
    assert any(e.get("name") == "tambo.run.awaiting_input" for _, e in seen)
    assert await status_after(store, run.id, 0.1) == "awaiting_input"
