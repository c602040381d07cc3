"""A run's log read from this process's memory, which keeps only what is not on disk yet and
what its readers have not read: a reader behind that (a reconnect from an old cursor) reads the
database first."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.engine.deltas import TextDelta
from gateway.runs.log.live import Entry, LiveLog, read_persisted
from gateway.runs.manager import RunManager
from gateway.store.repository import Store
from gateway.store.tables import RunRow
from tests.inprocess.conftest import (
    ScriptedDeltas,
    Step,
    events,
    finished,
    new_thread,
    user,
)

TOKENS = 80


def paced_tokens(hold: asyncio.Event) -> list[Step]:
    """80 tokens 10 ms apart (several of the log writer's 100 ms batches), then held open."""
    steps: list[Step] = []
    for k in range(TOKENS):
        steps += [TextDelta(f"t{k} "), 0.01]
    return [*steps, hold]


async def read(manager: RunManager, run_id: str, after: int = 0, pause_after: int | None = None,
               resume: asyncio.Event | None = None) -> list[Entry]:
    entries: list[Entry] = []
    async for entry in manager.entries(run_id, after):
        entries.append(entry)
        if pause_after is not None and len(entries) == pause_after and resume is not None:
            await resume.wait()
    return entries


async def start_paced(manager: RunManager, store: Store, model: ScriptedDeltas,
                      hold: asyncio.Event) -> tuple[RunRow, LiveLog]:
    model.enqueue(paced_tokens(hold))
    run = (await manager.start(await new_thread(store), user("go"))).run
    live = manager.live_log(run.id)
    assert live is not None
    return run, live


async def on_disk(store: Store, run_id: str) -> list[tuple[int, dict[str, Any]]]:
    """The run's whole log as the database has it: what every reader must have got."""
    return [(e.seq, e.frame) async for e in read_persisted(store, run_id, 0)]


def got(entries: list[Entry]) -> list[tuple[int, dict[str, Any]]]:
    return [(e.seq, e.frame) for e in entries]


async def until(condition: Any) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


async def test_memory_keeps_the_tail_and_a_late_reader_gets_every_entry_once(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    hold = asyncio.Event()
    run, live = await start_paced(manager, store, model, hold)
    follower = asyncio.create_task(read(manager, run.id))
    await until(lambda: live.first > 30)
    assert len(live.entries) < live.last - 30  # the head is no longer in memory
    late = asyncio.create_task(read(manager, run.id))  # from the start, after it was forgotten
    await until(lambda: live.last >= TOKENS)
    hold.set()
    await finished(manager, run.id)

    whole = await on_disk(store, run.id)
    assert [seq for seq, _ in whole] == list(range(1, len(whole) + 1))
    assert len(whole) > TOKENS
    for reader in (follower, late):
        assert got(await asyncio.wait_for(reader, 10)) == whole


async def test_memory_keeps_what_a_slow_reader_has_not_read(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    hold, resume = asyncio.Event(), asyncio.Event()
    run, live = await start_paced(manager, store, model, hold)
    slow = asyncio.create_task(read(manager, run.id, pause_after=3, resume=resume))
    await until(lambda: live.last >= TOKENS // 2)  # several batches on disk by now
    assert live.first <= 3  # nothing the slow reader has not read was forgotten
    resume.set()
    await until(lambda: live.first > TOKENS // 2)  # once it reads on, memory lets go
    hold.set()
    await finished(manager, run.id)
    assert got(await asyncio.wait_for(slow, 10)) == await on_disk(store, run.id)


async def test_a_reconnect_from_a_forgotten_cursor_sees_the_same_events_as_a_live_reader(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    hold = asyncio.Event()
    run, live = await start_paced(manager, store, model, hold)
    following = asyncio.create_task(events(manager, run.id))
    await until(lambda: live.first > 30)
    reconnect = asyncio.create_task(events(manager, run.id, after=10))
    hold.set()
    everything = await asyncio.wait_for(following, 10)
    assert await asyncio.wait_for(reconnect, 10) == everything[10:]
    text = "".join(e.get("delta", "") for _, e in everything if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "".join(f"t{k} " for k in range(TOKENS))
