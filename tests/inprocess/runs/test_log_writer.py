"""`LogWriter`: the flushes of several runs share one commit, and a run fenced out of it (its
lease taken over, a position already written) is told so without costing the others theirs."""

from __future__ import annotations

import asyncio

from gateway.protocol.clock import now_ms
from gateway.runs.log.writer import LogWriter
from gateway.store.queries.frames import LogBatch
from gateway.store.repository import Store
from tests.inprocess.conftest import new_thread
from tests.integration.store.conftest import run_row


def frames(*texts: str) -> list[tuple[int, int, dict]]:
    return [(seq, now_ms(), {"i": "m", "a": text}) for seq, text in enumerate(texts, 1)]


async def started(store: Store, owner: str) -> str:
    run = run_row((await new_thread(store)).id, owner)
    assert await store.start_run(run, [], now_ms(), None) == "started"
    return run.id


async def test_batches_of_several_runs_land_together_and_a_fenced_one_alone_is_refused(
        store: Store) -> None:
    writer = LogWriter(store)
    mine, also_mine, taken_over = [await started(store, "process-a") for _ in range(3)]
    try:
        written = await asyncio.gather(
            writer.append(mine, frames("a", "b"), "process-a"),
            writer.append(also_mine, frames("c"), "process-a"),
            writer.append(taken_over, frames("lost"), "process-b"))  # not its lease
        assert written == [True, True, False]
        assert [r.frame["a"] for r in await store.read_frames(mine)] == ["a", "b"]
        assert [r.frame["a"] for r in await store.read_frames(also_mine)] == ["c"]
        assert await store.read_frames(taken_over) == []

        # A position already written (another process ended the run there) refuses the batch.
        again = await asyncio.gather(writer.append(mine, frames("x"), "process-a"),
                                     writer.append(also_mine, [(2, now_ms(), {"a": "d"})],
                                                   "process-a"))
        assert again == [False, True]
        assert [r.frame["a"] for r in await store.read_frames(mine)] == ["a", "b"]
    finally:
        await writer.close()




class Pending:
    """A run's log as the writer sees it: frames not written yet, and each commit's outcome."""

    def __init__(self, run_id: str) -> None:
        self.run_id, self.unwritten = run_id, frames("one")
        self.outcomes: asyncio.Queue[bool | BaseException] = asyncio.Queue()

    def claim(self) -> LogBatch | None:
        batch = LogBatch(self.run_id, self.unwritten, "process-a") if self.unwritten else None
        self.unwritten = []
        return batch

    def written(self, outcome: bool | BaseException) -> None:
        self.outcomes.put_nowait(outcome)


async def test_the_ticks_stop_with_the_last_run_and_write_the_next_one_registered(
        store: Store) -> None:
    """The timer that writes every registered run's log runs only while one is registered
    (an idle writer must not wake the loop), and a run registered after it stopped is still
    written by a tick, without a flush."""
    writer = LogWriter(store, interval=0.01)
    first, second = Pending(await started(store, "process-a")), Pending(
        await started(store, "process-a"))
    try:
        writer.register(first)
        assert writer.ticking
        assert await first.outcomes.get() is True  # written by a tick: nobody flushed it
        writer.unregister(first)
        assert not writer.ticking

        writer.register(second)
        assert writer.ticking
        assert await second.outcomes.get() is True
        assert [r.frame["a"] for r in await store.read_frames(second.run_id)] == ["one"]
        writer.unregister(second)
        assert not writer.ticking
    finally:
        await writer.close()
