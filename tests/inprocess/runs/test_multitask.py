"""Double texting (`runs/admission/multitask.py`): a run request on a busy thread rejects, interrupts or
rolls back the running run; racing requests and a run in another process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest

from gateway.protocol.clock import REQUEST_ARRIVED_MS, now_ms
from gateway.protocol.problems import ApiError
from gateway.runs.manager import RunManager
from gateway.store.repository import Store
from gateway.store.tables import RunRow, ThreadRow
from tests.inprocess.conftest import (
    PROJECT,
    ManagerFactory,
    ScriptedDeltas,
    events,
    new_thread,
    text_turn,
    types,
    user,
)
from tests.inprocess.runs.test_supervisor import in_background


async def streaming(manager: RunManager, store: Store, model: ScriptedDeltas,
                    hold: asyncio.Event) -> tuple[ThreadRow, RunRow]:
    """A thread with one finished run and a second one streaming "partial " until `hold`."""
    thread = await new_thread(store)
    model.enqueue(text_turn("Done."))
    first = (await manager.start(thread, user("one"))).run
    await events(manager, first.id)
    model.enqueue(text_turn("partial ") + [hold])
    second = (await manager.start(thread, user("two", previousRunId=first.id))).run
    await until_streaming(manager, store, second)
    return thread, second


async def until_streaming(manager: RunManager, store: Store, run: RunRow) -> None:
    """Wait until `run` streams its answer (its model turn taken)."""
    while not await store.history(run.thread_id) or (await store.history(run.thread_id))[
            -1].run_id != run.id or len(manager.live_log(run.id).since(0)) < 3:
        await asyncio.sleep(0.005)


@contextlib.contextmanager
def arriving(at: int | None = None) -> Iterator[None]:
    """The request about to be handed to the manager arrives now (or at `at`): what the front
    stamps on every HTTP request (`REQUEST_ARRIVED_MS`)."""
    token = REQUEST_ARRIVED_MS.set(now_ms() if at is None else at)
    try:
        yield
    finally:
        REQUEST_ARRIVED_MS.reset(token)


async def until_after(ms: int) -> None:
    """Wait until the clock has passed `ms`: what happens next ends after it."""
    while now_ms() <= ms:
        await asyncio.sleep(0.001)


def sent_texts(model: ScriptedDeltas) -> list[str | None]:
    return [m.get("content") for m in model.requests[-1].messages]


async def test_reject_is_the_default(manager: RunManager, store: Store,
                                     model: ScriptedDeltas) -> None:
    hold = asyncio.Event()
    thread, running = await streaming(manager, store, model, hold)
    for strategy in ({}, {"multitaskStrategy": "reject"}):
        with pytest.raises(ApiError) as busy:
            await manager.start(thread, user("three", previousRunId=running.previous_run_id,
                                                      **strategy))
        assert busy.value.code == "CONCURRENT_RUN"
    hold.set()
    assert types(await events(manager, running.id))[-1] == "RUN_FINISHED"


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
async def test_interrupt_and_rollback_cancel_the_run_and_start_the_new_one(
        manager: RunManager, store: Store, model: ScriptedDeltas, strategy: str) -> None:
    hold = asyncio.Event()
    thread, running = await streaming(manager, store, model, hold)
    model.enqueue(text_turn("Three."))

    # The client still names the run before the one streaming: it has not ended for it yet.
    new = (await manager.start(thread, user(
        "three", previousRunId=running.previous_run_id, multitaskStrategy=strategy))).run

    assert types(await events(manager, new.id))[-1] == "RUN_FINISHED"
    assert (await store.get_run(running.id)).status == "cancelled"
    assert new.previous_run_id == running.id
    kept = strategy == "interrupt"
    # Rolled back, the run's answer is not shown to the model: its user message and the new one
    # are sent as one, so the roles still alternate (strict chat templates refuse them else).
    assert sent_texts(model) == (["one", "Done.", "two", "partial ", "three"] if kept
                                 else ["one", "Done.", "two\n\nthree"])
    partial = [m for m in await store.history(thread.id) if m.run_id == running.id
               and m.role == "assistant"]
    assert partial[0].is_cancelled  # the thread keeps what was said either way
    assert bool((partial[0].meta or {}).get("rolledBack")) is not kept
    hold.set()


async def test_racing_interrupts_never_run_two_at_once(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    hold = asyncio.Event()
    thread, running = await streaming(manager, store, model, hold)
    model.enqueue(*[text_turn("late ") + [hold] for _ in range(3)])
    arrived = await store.get_thread(PROJECT, thread.id)  # as each request's API reads it

    outcomes = await asyncio.gather(*[manager.start(arrived, user(
        f"again {n}", previousRunId=running.previous_run_id, multitaskStrategy="interrupt"))
        for n in range(3)], return_exceptions=True)

    started = [o.run for o in outcomes if not isinstance(o, BaseException)]
    assert len(started) >= 2, outcomes  # the later ones interrupted the earlier
    assert all(isinstance(o, ApiError) and o.code == "CONCURRENT_RUN"
               for o in outcomes if isinstance(o, BaseException))
    hold.set()
    for run in started:
        await events(manager, run.id)
    statuses = [(await store.get_run(run.id)).status for run in [running, *started]]
    assert statuses.count("completed") == 1
    assert statuses.count("cancelled") == len(statuses) - 1
    after = await store.get_thread(PROJECT, thread.id)
    assert after.run_status == "idle"


@pytest.mark.parametrize("strategy", ["interrupt", "rollback", "enqueue"])
async def test_a_request_whose_run_in_the_way_ended_before_it_started(
        manager: RunManager, store: Store, model: ScriptedDeltas, strategy: str) -> None:
    """Two tabs (or a double click) interrupt one run: this request read the thread while the
    run streamed, and the other request cancelled it before this one started. Its client could
    not know that run's end: it starts after it, not 400 INVALID_PREVIOUS_RUN."""
    hold = asyncio.Event()
    thread, running = await streaming(manager, store, model, hold)
    with arriving():
        arrived = await store.get_thread(PROJECT, thread.id)  # as this request's API read it
        assert (await manager.cancel(running.id)).status == "cancelled"  # the other request
        model.enqueue(text_turn("Three."))

        started = await manager.start(arrived, user(
            "three", previousRunId=running.previous_run_id, multitaskStrategy=strategy))

    assert not started.queued
    assert types(await events(manager, started.run.id))[-1] == "RUN_FINISHED"
    assert started.run.previous_run_id == running.id
    # A rollback leaves out the answer of the run that was in its way, whoever ended it.
    assert ("partial " in sent_texts(model)) is (strategy != "rollback")
    hold.set()


async def test_a_racing_interrupt_that_arrives_after_the_other_started_interrupts_it(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    """The same race, one step later: the other request's run has started (it followed the
    run it cancelled); this request interrupts that one in turn."""
    hold, other_hold = asyncio.Event(), asyncio.Event()
    thread, running = await streaming(manager, store, model, hold)
    with arriving():
        arrived = await store.get_thread(PROJECT, thread.id)
        model.enqueue(text_turn("other ") + [other_hold], text_turn("Mine."))
        other = (await manager.start(arrived, user(
            "other", previousRunId=running.id, multitaskStrategy="interrupt"))).run
        await until_streaming(manager, store, other)

        mine = (await manager.start(arrived, user(
            "mine", previousRunId=running.previous_run_id, multitaskStrategy="interrupt"))).run

    assert types(await events(manager, mine.id))[-1] == "RUN_FINISHED"
    assert [(await store.get_run(r.id)).status for r in (running, other, mine)] == [
        "cancelled", "cancelled", "completed"]
    assert (other.previous_run_id, mine.previous_run_id) == (running.id, other.id)
    hold.set()
    other_hold.set()


@pytest.mark.parametrize("strategy", ["interrupt", "rollback", "enqueue"])
async def test_a_request_whose_run_in_the_way_ended_before_it_read_the_thread(
        manager: RunManager, store: Store, model: ScriptedDeltas, strategy: str) -> None:
    """The same race, one step earlier: the other request cancelled the run after this one
    arrived but before its API read the thread, which it finds idle after that run. Its
    client could not know that end either: it starts after it."""
    hold = asyncio.Event()
    thread, running = await streaming(manager, store, model, hold)
    model.enqueue(text_turn("Three."))
    with arriving():
        assert (await manager.cancel(running.id)).status == "cancelled"  # the other request
        idle = await store.get_thread(PROJECT, thread.id)
        assert (idle.run_status, idle.last_completed_run_id) == ("idle", running.id)

        started = await manager.start(idle, user(
            "three", previousRunId=running.previous_run_id, multitaskStrategy=strategy))

    assert types(await events(manager, started.run.id))[-1] == "RUN_FINISHED"
    assert started.run.previous_run_id == running.id
    assert ("partial " in sent_texts(model)) is (strategy != "rollback")
    hold.set()


@pytest.mark.parametrize("still_running", [False, True], ids=["ended", "running"])
@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
async def test_a_request_follows_a_chain_of_runs_that_ended_after_it_arrived(
        manager: RunManager, store: Store, model: ScriptedDeltas, strategy: str,
        still_running: bool) -> None:
    """Two racing requests before this one reaches its start: the other interrupted the run
    in the way, and its own run then finished (or still streams, and this request interrupts
    it). Both runs are news to this request's client: it follows the last, and a rollback
    leaves out both answers it would have cut."""
    hold, other_hold = asyncio.Event(), asyncio.Event()
    thread, running = await streaming(manager, store, model, hold)
    model.enqueue(text_turn("other ") + ([other_hold] if still_running else []),
                  text_turn("Mine."))
    with arriving():
        other = (await manager.start(thread, user(
            "other", previousRunId=running.previous_run_id, multitaskStrategy="interrupt"))).run
        if still_running:
            await until_streaming(manager, store, other)
        else:
            assert types(await events(manager, other.id))[-1] == "RUN_FINISHED"
        now = await store.get_thread(PROJECT, thread.id)

        mine = (await manager.start(now, user(
            "mine", previousRunId=running.previous_run_id, multitaskStrategy=strategy))).run

    assert types(await events(manager, mine.id))[-1] == "RUN_FINISHED"
    assert mine.previous_run_id == other.id
    kept = strategy == "interrupt"
    # Rolled back, the answers are not shown: the user messages are sent as one (alternating).
    assert sent_texts(model) == (["one", "Done.", "two", "partial ", "other", "other ", "mine"]
                                 if kept else ["one", "Done.", "two\n\nother\n\nmine"])
    hold.set()
    other_hold.set()


@pytest.mark.parametrize("strategy", ["reject", "interrupt"])
async def test_a_view_already_stale_on_arrival_is_still_refused(
        manager: RunManager, store: Store, model: ScriptedDeltas, strategy: str) -> None:
    """A client that missed a run that had ended before its request arrived is talking over
    an answer it has not seen: 400 INVALID_PREVIOUS_RUN, whatever its strategy."""
    hold = asyncio.Event()
    hold.set()
    thread, running = await streaming(manager, store, model, hold)
    await events(manager, running.id)
    ended = (await store.get_run(running.id)).finished_ms
    arrived = await store.get_thread(PROJECT, thread.id)
    with arriving(ended + 1), pytest.raises(ApiError) as stale:
        await manager.start(arrived, user(
            "late", previousRunId=running.previous_run_id, multitaskStrategy=strategy))
    assert stale.value.code == "INVALID_PREVIOUS_RUN"


async def test_a_view_stale_on_arrival_is_refused_whatever_ended_after(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    """The client missed a run that ended before its request arrived; another request's run
    ended after: the one it missed still makes its view stale."""
    hold = asyncio.Event()
    hold.set()
    thread, running = await streaming(manager, store, model, hold)
    await events(manager, running.id)
    ended = (await store.get_run(running.id)).finished_ms
    with arriving(ended + 1):
        await until_after(ended + 1)
        other = (await manager.start(thread, user(
            "other", previousRunId=running.id))).run
        await events(manager, other.id)
        now = await store.get_thread(PROJECT, thread.id)
        with pytest.raises(ApiError) as stale:
            await manager.start(now, user(
                "late", previousRunId=running.previous_run_id, multitaskStrategy="interrupt"))
    assert stale.value.code == "INVALID_PREVIOUS_RUN"
    assert (await store.get_run(other.id)).finished_ms > ended + 1  # it did end after


async def test_interrupting_a_run_of_another_process(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    owner, other = managers(), managers()
    hold = asyncio.Event()
    thread, running = await streaming(owner, store, model, hold)
    model.enqueue(text_turn("From the other process."))

    async with in_background(owner.listen_for_signals()):  # how the cancel reaches it
        new = (await other.start(thread, user(
            "three", previousRunId=running.previous_run_id, multitaskStrategy="interrupt"))).run

    assert types(await events(other, new.id))[-1] == "RUN_FINISHED"
    assert (await store.get_run(running.id)).status == "cancelled"
    hold.set()


async def test_enqueued_runs_wait_then_run_in_order(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    hold = asyncio.Event()
    thread, running = await streaming(manager, store, model, hold)
    model.enqueue(text_turn("Answer A."), text_turn("Answer B."))
    queued = [(await manager.start(thread, user(
        text, previousRunId=running.previous_run_id, multitaskStrategy="enqueue")))
        for text in ("A", "B")]
    assert [q.queued for q in queued] == [True, True]
    assert [(await store.get_run(q.run.id)).status for q in queued] == ["queued", "queued"]
    streams = [asyncio.create_task(events(manager, q.run.id)) for q in queued]
    gone = (await manager.start(thread, user(
        "C", previousRunId=running.previous_run_id, multitaskStrategy="enqueue"))).run
    assert (await manager.cancel(gone.id)).status == "cancelled"  # leaves the queue

    hold.set()
    for stream in streams:
        assert types(await stream)[-1] == "RUN_FINISHED"
    first, second = [await store.get_run(q.run.id) for q in queued]
    assert (first.status, second.status) == ("completed", "completed")
    assert (first.previous_run_id, second.previous_run_id) == (running.id, first.id)
    assert sent_texts(model) == ["one", "Done.", "two", "partial ", "A", "Answer A.", "B"]
    assert (await store.get_run(gone.id)).status == "cancelled"
    assert (await store.get_thread(PROJECT, thread.id)).run_status == "idle"


async def test_a_run_queued_in_another_process_starts_where_the_run_ends(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    owner, other = managers(), managers()
    hold = asyncio.Event()
    thread, running = await streaming(owner, store, model, hold)
    model.enqueue(text_turn("Queued answer."))
    queued = (await other.start(thread, user(
        "later", previousRunId=running.previous_run_id, multitaskStrategy="enqueue"))).run
    following = asyncio.create_task(events(other, queued.id))  # through the run feed

    hold.set()
    seen = await following
    assert types(seen)[0] == "RUN_STARTED" and types(seen)[-1] == "RUN_FINISHED"
    assert (await store.get_run(queued.id)).status == "completed"
