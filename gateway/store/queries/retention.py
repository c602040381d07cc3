"""Retention: deleting threads nobody has touched since a cutoff, in small batches.

A thread is old when it has not been updated since the cutoff (`updated_ms`: every run's start
and end updates it). One that is not idle (a run is live on it) or that waits for client tool
results (a paused run) is never deleted, whatever its age. Each batch is its own short
transaction: the threads are deleted first, under the same conditions re-checked in the
statement itself (`DELETE ... WHERE run_status = 'idle' ... RETURNING id`), so a run that takes
a thread's lock between the search and the delete keeps its thread (on PostgreSQL the row lock
orders the two; SQLite has one writer); then, in the same transaction, what belonged to exactly
those threads: runs, their frame logs, messages, components (and their kept states) and
idempotency keys. Usage rows
are kept: they are accounting (`tables.RunUsageRow`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, delete, exists, func, or_, select

from ..base import ACTIVE_RUN_STATUSES, Queries, operation, table
from ..engines.transaction import Transaction
from ..tables import (
    ComponentRow,
    ComponentStateHistoryRow,
    IdempotencyKeyRow,
    MessageRow,
    RunFrameRow,
    RunRow,
    ThreadRow,
)

_threads, _runs, _frames = table(ThreadRow), table(RunRow), table(RunFrameRow)
# A thread is idle (no run holds its lock) and has no run waiting to start or running (a
# queued run of another strategy may not hold the lock yet).
_IDLE = and_(_threads.c.run_status == "idle",
             ~exists().where(_runs.c.thread_id == _threads.c.id,
                             _runs.c.status.in_(ACTIVE_RUN_STATUSES)))
# What else belongs to a thread, by its `thread_id` column.
_OWNED = tuple(table(row) for row in (RunRow, MessageRow, ComponentRow,
                                      ComponentStateHistoryRow, IdempotencyKeyRow))


@dataclass(frozen=True)
class PruneCount:
    threads: int
    runs: int


class RetentionQueries(Queries):

    @operation
    async def old_threads(self, before_ms: int, limit: int, after: tuple[int, str] | None = None
                          ) -> tuple[list[str], tuple[int, str] | None]:
        """Ids of idle threads not updated since `before_ms` that wait for no client tool
        results, among the next `limit` old threads after the cursor `after` (oldest first);
        and the cursor of the next page (None: no more)."""
        query = (select(_threads.c.id, _threads.c.updated_ms, _threads.c.pending_tool_calls)
                 .where(_threads.c.updated_ms < before_ms, _IDLE))
        if after is not None:
            query = query.where(or_(_threads.c.updated_ms > after[0],
                                    and_(_threads.c.updated_ms == after[0],
                                         _threads.c.id > after[1])))
        query = query.order_by(_threads.c.updated_ms, _threads.c.id).limit(limit)
        rows = await self.transaction(lambda tx: tx.execute(query).all())
        cursor = (rows[-1].updated_ms, rows[-1].id) if len(rows) == limit else None
        return [row.id for row in rows if not row.pending_tool_calls], cursor

    @operation
    async def count_old(self, before_ms: int) -> PruneCount:
        """How many threads (and their runs) a prune at `before_ms` would delete, about: the
        paused ones are left out as the prune leaves them."""
        old = (select(_threads.c.id, _threads.c.pending_tool_calls)
               .where(_threads.c.updated_ms < before_ms, _IDLE))
        def count(tx: Transaction) -> PruneCount:
            ids = [row.id for row in tx.execute(old).all() if not row.pending_tool_calls]
            runs = 0
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                runs += int(tx.execute(select(func.count()).select_from(_runs)
                                       .where(_runs.c.thread_id.in_(chunk))).scalar_one())
            return PruneCount(len(ids), runs)

        return await self.transaction(count)

    @operation
    async def delete_old_threads(self, ids: list[str], before_ms: int) -> PruneCount:
        """Delete these threads if they are still old and idle, with everything of theirs."""
        if not ids:
            return PruneCount(0, 0)
        return await self.transaction(lambda tx: _delete(tx, ids, before_ms))


def _delete(tx: Transaction, ids: list[str], before_ms: int) -> PruneCount:
    deleted = list(tx.execute(
        delete(_threads).where(_threads.c.id.in_(ids), _threads.c.updated_ms < before_ms, _IDLE)
        .returning(_threads.c.id)).scalars())
    runs = 0
    if deleted:
        their_runs = select(_runs.c.id).where(_runs.c.thread_id.in_(deleted))
        runs = int(tx.execute(select(func.count()).select_from(their_runs.subquery()))
                   .scalar_one())
        tx.execute(delete(_frames).where(_frames.c.run_id.in_(their_runs)))
        for owned in _OWNED:
            tx.execute(delete(owned).where(owned.c.thread_id.in_(deleted)))
    return PruneCount(len(deleted), runs)
