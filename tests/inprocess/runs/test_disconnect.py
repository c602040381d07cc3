"""The disconnect policy: leaving is not cancelling; an unwatched run is cancelled after its
grace window unless someone comes back; `continue` never cancels; a paused run is never
cancelled by the client closing its stream."""

from __future__ import annotations

import asyncio

from gateway.protocol.clock import now_ms
from gateway.runs.manager import RunManager
from gateway.store.repository import Store
from tests.inprocess.conftest import (
    PROJECT,
    ManagerFactory,
    ScriptedDeltas,
    events,
    finished,
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
    run = (await manager.start(thread, user("go"))).run
    await read_and_leave(manager, run.id, 2)
    assert await status_after(store, run.id, GRACE / 5) == "running"  # leaving is not cancelling
    assert await status_after(store, run.id, GRACE * 2) == "cancelled"


async def test_a_subscriber_coming_back_within_the_window_keeps_the_run(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    manager = managers(disconnect_grace_seconds=GRACE)
    thread = await new_thread(store)
    release = asyncio.Event()
    model.enqueue(text_turn("working ") + [release] + text_turn("done"))
    run = (await manager.start(thread, user("go"))).run
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
    run = (await manager.start(thread, user("go", onDisconnect="continue"))).run
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
    run = (await manager.start(thread, user("time?", tools=[tool],
                                                     onDisconnect="cancel"))).run
    seen = await events(manager, run.id)
    assert any(e.get("name") == "tambo.run.awaiting_input" for _, e in seen)
    assert await status_after(store, run.id, 0.1) == "awaiting_input"


async def test_cancel_policy_cancels_as_soon_as_the_only_subscriber_leaves(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    thread = await new_thread(store)
    model.enqueue(text_turn("working ") + [asyncio.Event()])
    run = (await manager.start(thread, user("go", onDisconnect="cancel"))).run
    await read_and_leave(manager, run.id, 2)
    await finished(manager, run.id)
    assert (await store.get_run(run.id)).status == "cancelled"
    after = await store.get_thread(PROJECT, thread.id)
    assert after.run_status == "idle" and after.last_run_cancelled
    replay = await events(manager, run.id)
    assert replay[-1][1]["type"] == "RUN_ERROR" and replay[-1][1]["code"] == "CANCELLED"


async def test_by_default_a_run_its_subscriber_left_runs_to_its_end(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    """The default grace (30 s) is longer than the run: leaving changes nothing."""
    thread = await new_thread(store)
    model.enqueue(text_turn("working ") + [0.1] + text_turn("done"))
    run = (await manager.start(thread, user("go"))).run
    await read_and_leave(manager, run.id, 2)
    await finished(manager, run.id)
    assert (await store.get_run(run.id)).status == "completed"
    answer = [m for m in await store.history(thread.id) if m.role == "assistant"][0]
    assert [p.get("content") for p in answer.parts] == ["working done"]


async def test_a_follower_in_another_process_keeps_an_unwatched_run_going(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    """It reads the log from the database and marks the run as watched; the owner's grace
    window runs out, but the run has a subscriber and goes on."""
    owner = managers(disconnect_grace_seconds=0.05)
    thread = await new_thread(store)
    model.enqueue(text_turn("working ") + [0.6] + text_turn("done"))
    run = (await owner.start(thread, user("go"))).run
    while len(await store.read_frames(run.id)) < 2:  # flushed: the follower has a log to read
        await asyncio.sleep(0.01)
    follower = asyncio.create_task(events(managers(), run.id))
    await read_and_leave(owner, run.id, 2)
    followed = await follower
    assert followed[-1][1]["type"] == "RUN_FINISHED"
    assert (await store.get_run(run.id)).status == "completed"


async def test_a_follower_in_another_process_that_left_gets_the_whole_grace(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    """The owner's own reader left long ago; a follower in another process (it only touches
    the run's `watched_ms`) then leaves too: the run is cancelled no sooner than the grace
    after the follower's last touch. The freshness margin is shrunk (as the recheck period)
    so that the grace, not the margin, is what decides."""
    grace = 1.0
    manager = managers(disconnect_grace_seconds=grace, watch_fresh_ms=100,
                       watch_recheck_seconds=0.05)
    thread = await new_thread(store)
    model.enqueue(text_turn("working ") + [asyncio.Event()])
    run = (await manager.start(thread, user("go"))).run
    await read_and_leave(manager, run.id, 2)
    for _ in range(int(grace / 0.05) + 4):  # the remote follower, past the owner's own grace
        await store.touch_watched(run.id, now_ms())
        await asyncio.sleep(0.05)
    # It left just after its last touch: 0.5 s later the run must still go on (the margin alone
    # cancelled it 0.1 s after that touch).
    assert await status_after(store, run.id, grace / 2) == "running"
    assert await status_after(store, run.id, grace * 2) == "cancelled"
