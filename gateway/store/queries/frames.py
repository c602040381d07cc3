"""The frame log of each run, written in batches and read in pages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import bindparam, select, update
from sqlalchemy.exc import IntegrityError

from ..base import LEASE_CHECK, FrameEntry, Queries, first_as, operation, rows_as, table
from ..engines.chain import Chain, Rows, Step
from ..engines.transaction import Transaction
from ..tables import RunFrameRow, RunRow, ThreadRow

_frames, _threads, _runs = table(RunFrameRow), table(ThreadRow), table(RunRow)
# A run's log rows: most of the rows the gateway writes.
FRAMES = Rows(_frames, ("run_id", "seq", "ts_ms", "frame"))
# A batch of one owner's runs as a chain (`engines.chain`: step by step on SQLite, one
# statement on PostgreSQL): the lease check of every run (`base.holds_lease`), then, if all are
# held, the frames and the threads now streaming: a run's thread is `waiting` from its start
# until the first frames of the run are written (a run id belongs to one thread, so the pairs
# of thread and run may be matched list against list).
WRITE = Chain(Step(LEASE_CHECK, each=("run_id",)), [("new_frames", FRAMES)], [
    ("now_streaming", Step(update(_threads)
                           .where(_threads.c.id == bindparam("thread_id"),
                                  _threads.c.current_run_id == bindparam("starting"),
                                  _threads.c.run_status == "waiting")
                           .values(run_status="streaming"), each=("thread_id", "starting")))])


@dataclass(frozen=True)
class LogBatch:
    """Frames of one run to persist under its lease (`owner`, the fencing token); `thread_id`
    with the run's first frames, whose thread then shows the run as streaming."""

    run_id: str
    entries: Sequence[FrameEntry]
    owner: str | None = None
    thread_id: str | None = None


class LeaseLost(Exception):
    """A batch of a run whose lease was taken over: the shared transaction is abandoned."""


class FrameLog(Queries):

    @operation
    async def append_frames(self, run_id: str, entries: Sequence[FrameEntry],
                            owner: str | None = None) -> bool:
        """Persist a batch of the log; False if we are fenced out: with `owner` (the lease's
        fencing token) nothing is written unless that process still holds the run's lease, and
        a position already taken (another process ended this run) refuses the whole batch.

        See `base.holds_lease` for why a concurrent reaper cannot interleave.
        """
        if not entries:
            return True
        return not await self.append_frames_batch([LogBatch(run_id, entries, owner)])

    @operation
    async def append_frames_batch(self, batches: Sequence[LogBatch]) -> set[str]:
        """Persist batches of several runs' logs at once; returns the runs that were fenced
        out (see `append_frames`). The common case is one chain (`WRITE`) for all of them: one
        commit, the lease checks and one INSERT; if a run's lease is gone or a position was
        taken, each run is retried on its own to find which."""
        owners = sorted({batch.owner for batch in batches if batch.owner is not None})
        if len(owners) > 1:  # one chain per owner (a process writes under one); unfenced
            # batches with the first
            return {run_id for owner in owners for run_id in await self.append_frames_batch(
                [b for b in batches if b.owner == owner
                 or (b.owner is None and owner == owners[0])])}
        try:
            await self.hot(lambda connection: _write(connection, batches))
            return set()
        except (IntegrityError, LeaseLost):
            if len(batches) == 1:
                return {batches[0].run_id}
        return {run_id for b in batches for run_id in await self.append_frames_batch([b])}

    @operation
    async def read_frames(self, run_id: str, after_seq: int = 0,
                          limit: int | None = None) -> list[RunFrameRow]:
        query = (select(_frames).where(_frames.c.run_id == run_id, _frames.c.seq > after_seq)
                 .order_by(_frames.c.seq))
        if limit is not None:
            query = query.limit(limit)
        return rows_as(RunFrameRow, await self.transaction(lambda tx: tx.execute(query).all()))


    @operation
    async def last_frame(self, run_id: str) -> RunFrameRow | None:
        query = (select(_frames).where(_frames.c.run_id == run_id)
                 .order_by(_frames.c.seq.desc()).limit(1))
        return first_as(RunFrameRow, await self.transaction(lambda tx: tx.execute(query).all()))


def _write(connection: Transaction, batches: Sequence[LogBatch]) -> None:
    """A batch of at most one owner's runs (`WRITE`); `LeaseLost` if a lease is not held."""
    owner = next((batch.owner for batch in batches if batch.owner is not None), None)
    held = [batch.run_id for batch in batches if batch.owner is not None]
    starting = [batch for batch in batches if batch.thread_id is not None]
    run_ids = sorted(set(held))
    params = {"run_id": run_ids, "owner": owner,
              "thread_id": [b.thread_id for b in starting],
              "starting": [b.run_id for b in starting]}
    matched = WRITE.write(connection, params, {"new_frames": [
        {"run_id": batch.run_id, "seq": seq, "ts_ms": ts, "frame": frame}
        for batch in batches for seq, ts, frame in batch.entries]})
    if matched != len(run_ids):
        raise LeaseLost(owner)
