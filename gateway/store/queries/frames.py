"""The frame log of each run, written in batches and read in pages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, any_, bindparam, insert, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import IntegrityError

from ..base import (
    ACTIVE_RUN_STATUSES,
    HOLD_LEASE,
    FrameEntry,
    Queries,
    first_as,
    is_active,
    operation,
    rows_as,
    table,
)
from ..engines.one_statement import Guard, OneStatement, Rows
from ..engines.prepared import Prepared
from ..engines.transaction import Transaction
from ..tables import RunFrameRow, RunRow, ThreadRow

_frames, _threads, _runs = table(RunFrameRow), table(ThreadRow), table(RunRow)
# On the driver's cursor (`prepared`): in the group commits and in a run's end.
INSERT = Prepared(insert(_frames))
# `base.holds_lease` for many runs of one owner at once: all are held if all rows match.
_HOLD_LEASES = (update(_runs)
                .where(_runs.c.id.in_(bindparam("run_ids", expanding=True)),
                       _runs.c.lease_owner == bindparam("owner"),
                       _runs.c.status.in_(ACTIVE_RUN_STATUSES))
                .values(lease_owner=bindparam("owner")))
# A run's thread is `waiting` from its start until the first frames of the run are written.
# (A run id belongs to one thread, so matching both lists matches the pairs.)
_STREAMING = (update(_threads)
              .where(_threads.c.id.in_(bindparam("thread_ids", expanding=True)),
                     _threads.c.current_run_id.in_(bindparam("run_ids", expanding=True)),
                     _threads.c.run_status == "waiting")
              .values(run_status="streaming"))
# The same for one run, the usual batch of a process with little to write: on the driver's
# cursor (`prepared`), without SQLAlchemy's execution of an expanding `IN`.
STREAMING_ONE = Prepared(update(_threads)
                         .where(_threads.c.id == bindparam("thread_id"),
                                _threads.c.current_run_id == bindparam("run_id"),
                                _threads.c.run_status == "waiting")
                         .values(run_status="streaming"))

# On PostgreSQL, a batch of one owner's runs as one statement (`one_statement`): the lease
# check of every run, then, if all are held, the frames and the threads now streaming.
ROWS = Rows(_frames, ("run_id", "seq", "ts_ms", "frame"))
_NAMES = ARRAY(String)
_RUN_IDS = bindparam("run_ids", type_=_NAMES)
_HELD = (update(_runs)
         .where(_runs.c.id == any_(_RUN_IDS),
                _runs.c.lease_owner == bindparam("owner"), is_active(_runs.c.status))
         .values(lease_owner=bindparam("owner")).returning(_runs.c.id))
_NOW_STREAMING = (update(_threads)
                  .where(_threads.c.id == any_(bindparam("thread_ids", type_=_NAMES)),
                         _threads.c.current_run_id == any_(bindparam("starting", type_=_NAMES)),
                         _threads.c.run_status == "waiting")
                  .values(run_status="streaming"))
WRITE_ALONE = OneStatement(Guard("held", _HELD, all_of=_RUN_IDS), [("new_frames", ROWS)],
                           [("now_streaming", _NOW_STREAMING)])


@dataclass(frozen=True)
class LogBatch:
    """Frames of one run to persist under its lease (`owner`, the fencing token); `thread_id`
    with the run's first frames, whose thread then shows the run as streaming."""

    run_id: str
    entries: Sequence[FrameEntry]
    owner: str | None = None
    thread_id: str | None = None


def insert_frames(connection: Transaction, run_id: str, entries: Sequence[FrameEntry]) -> None:
    """One INSERT for a batch of log frames, on the driver's cursor (`Prepared`): a run's log
    is most of the rows the gateway writes."""
    if entries:
        INSERT.execute(connection, [{"run_id": run_id, "seq": seq, "ts_ms": ts, "frame": frame}
                                    for seq, ts, frame in entries])


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
        """Persist batches of several runs' logs in one transaction; returns the runs that were
        fenced out (see `append_frames`). The common case is one commit for all of them, with
        one lease check per owner and one INSERT; if a run's lease is gone or a position was
        taken, each run is retried on its own to find which."""
        try:
            one_owner = len({b.owner for b in batches} - {None}) <= 1
            await self.hot(lambda connection: _write(connection, batches),
                           (lambda connection: _write_alone(connection, batches))
                           if one_owner else None)
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
    """The group commit's statements, in one switch to the synchronous side
    (`Queries.transaction`); the lease checks and the thread update have one row per run, so
    they stay SQLAlchemy's (expanding `IN`), the frames go on the driver's cursor."""
    owners: dict[str, set[str]] = {}
    for batch in batches:
        if batch.owner is not None:
            owners.setdefault(batch.owner, set()).add(batch.run_id)
    one_by_one = connection.cheap_statements  # (see `transaction`)
    for owner, run_ids in owners.items():  # see `base.holds_lease`
        if len(run_ids) == 1 or one_by_one:
            held = sum(HOLD_LEASE.execute(connection, {"run_id": run_id, "owner": owner})
                       for run_id in sorted(run_ids))
        else:
            held = connection.execute(_HOLD_LEASES, {"run_ids": sorted(run_ids),
                                                     "owner": owner}).rowcount
        if held != len(run_ids):
            raise LeaseLost(owner)
    rows: list[Mapping[str, Any]] = [{"run_id": batch.run_id, "seq": seq, "ts_ms": ts, "frame": frame}
            for batch in batches for seq, ts, frame in batch.entries]
    if rows:
        INSERT.execute(connection, rows)
    starting = [batch for batch in batches if batch.thread_id is not None]
    if len(starting) == 1 or one_by_one:
        for batch in starting:
            STREAMING_ONE.execute(connection, {"thread_id": batch.thread_id,
                                               "run_id": batch.run_id})
    elif starting:
        connection.execute(_STREAMING, {"thread_ids": [b.thread_id for b in starting],
                                        "run_ids": [b.run_id for b in starting]})


def _write_alone(connection: Transaction, batches: Sequence[LogBatch]) -> None:
    """`_write` on PostgreSQL, for batches of at most one owner, as one statement."""
    owner = next((batch.owner for batch in batches if batch.owner is not None), None)
    run_ids = sorted({batch.run_id for batch in batches if batch.owner is not None})
    starting = [batch for batch in batches if batch.thread_id is not None]
    held = WRITE_ALONE.execute(connection, {
        "run_ids": run_ids, "owner": owner, "thread_ids": [b.thread_id for b in starting],
        "starting": [b.run_id for b in starting]}, {"new_frames": [
            {"run_id": batch.run_id, "seq": seq, "ts_ms": ts, "frame": frame}
            for batch in batches for seq, ts, frame in batch.entries]})
    if held != len(run_ids):
        raise LeaseLost(owner)
