"""Reading a run's log from a cursor: live, from memory, and from the database, the n-th event is
always the same event, so a resume after `n` gets exactly the rest; a reader whose cursor lies
beyond what a crashed process saved still learns how the run ended (RUN_LOST)."""

from __future__ import annotations

import asyncio

from gateway.runs.log.live import read_persisted
from gateway.runs.manager import RunManager
from gateway.runs.supervisor import RunSupervisor
from gateway.store.repository import Store
from gateway.store.tables import RunRow, ThreadRow
from tests.inprocess.conftest import (
    PROJECT,
    ManagerFactory,
    ScriptedDeltas,
    events,
    new_thread,
    text_turn,
    user,
)


async def test_a_resume_after_n_gets_exactly_the_rest_live_and_from_the_database(
        manager: RunManager, managers: ManagerFactory, store: Store,
        model: ScriptedDeltas) -> None:
    thread = await new_thread(store)
    model.enqueue(text_turn("one ", "two ", "three ", "four", reasoning="Count."))
    run = (await manager.start(thread, user("count"))).run
    everything = await events(manager, run.id)
    assert len(everything) > 8
    other_process = managers()  # no live log there: it reads the database
    for after in range(len(everything) + 1):
        assert await events(manager, run.id, after) == everything[after:]
        assert await events(other_process, run.id, after) == everything[after:]


async def test_a_follower_in_another_process_sees_a_live_run_to_its_end(
        manager: RunManager, managers: ManagerFactory, store: Store,
        model: ScriptedDeltas) -> None:
    thread = await new_thread(store)
    model.enqueue(text_turn("a ") + [0.15] + text_turn("b ") + [0.15] + text_turn("c"))
    run = (await manager.start(thread, user("go"))).run
    remote = await events(managers(), run.id)
    assert remote == await events(manager, run.id)
    assert remote[-1][1]["type"] == "RUN_FINISHED"


async def test_a_cursor_past_what_a_dead_process_saved_still_gets_run_lost(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    dead, thread, run = await _streaming(managers, store, model)
    cursor = len(await _events_so_far(dead, store, run.id))
    # The process "dies": nothing more of it runs, its lease runs out, a peer reaps the run.
    dead.active[run.id].recorder.fenced = True
    await asyncio.sleep(0.3)
    peer = managers(lease_seconds=0.2)
    assert await RunSupervisor(peer).reap() == 1
    row = await store.get_run(run.id)
    assert (row.status, row.error["code"]) == ("failed", "RUN_LOST")
    assert (await store.get_thread(PROJECT, thread.id)).run_status == "idle"
    tail = await events(peer, run.id, after=cursor + 50)
    assert [event["code"] for _, event in tail] == ["RUN_LOST"]
    assert tail[0][1]["isRetryable"] is True


async def test_the_end_of_a_dead_run_comes_after_every_event_a_reader_was_shown(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    """Its reader was shown events of frames never written (the log is written in batches):
    the end the peer gives the run takes a position past all of them, never one of theirs,
    and a resume after the last one it was shown gets that end."""
    dead, _, run = await _streaming(managers, store, model)
    dead.active[run.id].recorder.fenced = True  # it "dies": nothing more is written
    dead.live_log(run.id).append({"i": "late", "m": {"type": "agent", "messageId": "m"}})
    shown = len(await _events_so_far(dead, store, run.id))  # the last is never written
    await asyncio.sleep(0.3)
    peer = managers(lease_seconds=0.2)
    assert await RunSupervisor(peer).reap() == 1
    replay = await events(peer, run.id)
    assert replay[-1][1]["code"] == "RUN_LOST" and replay[-1][0] > shown
    assert await events(peer, run.id, after=shown) == replay[-1:]


async def _streaming(managers: ManagerFactory, store: Store, model: ScriptedDeltas
                     ) -> tuple[RunManager, ThreadRow, RunRow]:
    """A process with a short lease, streaming a run that has said a few words (and will say
    nothing more)."""
    dead = managers(lease_seconds=0.2)
    thread = await new_thread(store)
    model.enqueue(text_turn("seen ", "by ", "a ", "reader ") + [asyncio.Event()])
    run = (await dead.start(thread, user("go"))).run
    while dead.live_log(run.id).last < 6:
        await asyncio.sleep(0.005)
    return dead, thread, run


async def _events_so_far(manager: RunManager, store: Store, run_id: str) -> list[object]:
    """What a reader of the run has been shown: what memory forgot from the database, then
    memory."""
    from gateway.dialects.tambo.translate import TamboDialect

    live = manager.live_log(run_id)
    forgotten = [e async for e in read_persisted(store, run_id, 0) if e.seq <= live.first]
    translator = TamboDialect()
    return [e for entry in [*forgotten, *live.since(0)] for e in translator.feed(entry.frame)]
