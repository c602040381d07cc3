"""Across processes: cancel flags, leases, the reaper, and fencing of a stalled owner."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any, NamedTuple

from gateway.protocol import timbal
from gateway.runs.manager import RunManager
from gateway.runs.supervisor import RunSupervisor
from gateway.store.repository import Store
from gateway.store.tables import RunRow, ThreadRow
from tests.inprocess.conftest import (
    ManagerFactory,
    ScriptedDeltas,
    events,
    new_thread,
    text_turn,
    user,
)

LEASE = 0.2


class Stalled(NamedTuple):
    owner: RunManager
    thread: ThreadRow
    run: RunRow
    wake: asyncio.Event  # set: the model goes on, as a stalled process does when it wakes


async def stalled_owner(managers: ManagerFactory, store: Store, model: ScriptedDeltas,
                        said: list[str], unsaid: str) -> Stalled:
    """A run whose owner has said `said` (saved to the log), then stalled past its lease
    without renewing it, as a frozen or dead process does; on waking it would say `unsaid`."""
    owner = managers(lease_seconds=LEASE)
    thread = await new_thread(store)
    wake = asyncio.Event()
    model.enqueue(text_turn(*said) + [wake] + text_turn(unsaid))
    run = (await owner.start(thread, user("go"))).run
    while len(await store.read_frames(run.id)) < 2 + len(said):  # run and message starts
        await asyncio.sleep(0.01)
    await asyncio.sleep(LEASE * 1.5)
    return Stalled(owner, thread, run, wake)


@contextlib.asynccontextmanager
async def in_background(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """A process's background task (its supervisor, its signal listener) for a block."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_stalled_owner_is_fenced_after_a_peer_reaped_its_run(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    owner, _, run, stall = await stalled_owner(managers, store, model, ["before "],
                                               "after the stall")
    assert await RunSupervisor(managers(lease_seconds=LEASE)).reap() == 1

    await RunSupervisor(owner).renew()  # the owner wakes: its lease is gone
    stall.set()
    seen = await events(owner, run.id)
    assert seen[-1][1]["code"] == "RUN_LOST"
    assert "after the stall" not in str(seen)
    row = await store.get_run(run.id)
    assert (row.status, row.error["code"]) == ("failed", "RUN_LOST")
    saved = [r.frame for r in await store.read_frames(run.id, 0, 1000)]
    assert saved[-1]["c"] == timbal.ERROR and saved[-1]["code"] == "RUN_LOST"
    assert "after the stall" not in str(saved)


async def test_a_live_owner_that_renews_in_time_is_not_reaped(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    owner = managers(lease_seconds=1.0)  # renewed every third of it
    thread = await new_thread(store)
    hold = asyncio.Event()
    model.enqueue([hold])
    run = (await owner.start(thread, user("go"))).run
    async with in_background(RunSupervisor(owner).run()):
        await asyncio.sleep(1.3)  # past the first lease
        assert await RunSupervisor(managers(lease_seconds=1.0)).reap() == 0
        hold.set()
        assert (await events(owner, run.id))[-1][1]["type"] == "RUN_FINISHED"


async def test_a_cancel_reaching_another_process_is_carried_out_by_the_owner(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    owner, other = managers(), managers()
    thread = await new_thread(store)
    model.enqueue([asyncio.Event()])
    run = (await owner.start(thread, user("go"))).run
    while (await store.get_run(run.id)).status != "running":
        await asyncio.sleep(0.01)
    # The owner's signal listener (database flags without Redis) carries the cancel out.
    async with in_background(owner.listen_for_signals()):
        ended = await other.cancel(run.id)
        assert ended.status == "cancelled"
        assert (await events(owner, run.id))[-1][1]["code"] == "CANCELLED"


async def test_a_stalled_owner_writing_before_it_renews_is_fenced_by_the_log_itself(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    """Its next batch is refused (its lease token is stale, and the positions past its log
    belong to the reaper's end): nothing of it lands."""
    owner, _, run, stall = await stalled_owner(managers, store, model, ["before "],
                                               "after the stall")
    assert await RunSupervisor(managers(lease_seconds=LEASE)).reap() == 1
    stall.set()  # no renewal: the owner goes on writing as if nothing happened
    seen = await events(owner, run.id)
    assert seen[-1][1]["code"] == "RUN_LOST"
    saved = [r.frame for r in await store.read_frames(run.id, 0, 1000)]
    assert saved[-1].get("code") == "RUN_LOST" and "after the stall" not in str(saved)
    assert (await store.get_run(run.id)).status == "failed"


async def test_cancelling_the_run_of_a_dead_process_keeps_what_it_had_said(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    owner, thread, run, stall = await stalled_owner(
        managers, store, model, ["said before ", "the crash"], "never said")

    row = await managers(lease_seconds=LEASE).cancel(run.id)
    assert row is not None and row.status == "cancelled"
    answers = [m for m in await store.history(thread.id) if m.role == "assistant"]
    assert len(answers) == 1 and answers[0].is_cancelled
    assert [p.get("content") for p in answers[0].parts] == ["said before the crash"]
    stall.set()  # the owner wakes fenced: it adds nothing
    await RunSupervisor(owner).renew()
    with contextlib.suppress(Exception):
        await events(owner, run.id)
    assert "never said" not in str(await store.history(thread.id))
