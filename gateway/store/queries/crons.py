"""Schedules: created, listed and deleted by their owner; the due ones read by every process,
and each due time taken by one of them with a conditional update of `next_due_ms`."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, insert, select, update

from ..base import Queries, first_as, operation, rows_as, table, values_of
from ..tables import CronRow

_crons = table(CronRow)


class CronQueries(Queries):

    @operation
    async def add_cron(self, row: CronRow) -> None:
        await self.transaction(lambda tx: tx.execute(insert(_crons), values_of(row)))

    @operation
    async def get_cron(self, project_id: str, cron_id: str) -> CronRow | None:
        c = _crons
        query = select(c).where(c.c.id == cron_id, c.c.project_id == project_id)
        return first_as(CronRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def list_crons(self, project_id: str, user_key: str | None, limit: int
                         ) -> Sequence[CronRow]:
        """The project's schedules, oldest first; only `user_key`'s when it is given (the
        operator's listing gives none)."""
        c = _crons
        query = select(c).where(c.c.project_id == project_id)
        if user_key is not None:
            query = query.where(c.c.user_key == user_key)
        query = query.order_by(c.c.created_ms).limit(limit)
        return rows_as(CronRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def count_crons(self, project_id: str) -> int:
        query = select(func.count()).select_from(_crons).where(
            _crons.c.project_id == project_id)
        return int(await self.transaction(lambda tx: tx.execute(query).scalar_one()))

    @operation
    async def delete_cron(self, project_id: str, cron_id: str, user_key: str | None) -> bool:
        """Delete a schedule of the project (of `user_key` when given): False if none."""
        c = _crons
        statement = delete(c).where(c.c.id == cron_id, c.c.project_id == project_id)
        if user_key is not None:
            statement = statement.where(c.c.user_key == user_key)
        return await self.transaction(lambda tx: tx.execute(statement).rowcount == 1)

    @operation
    async def due_crons(self, now: int, limit: int) -> Sequence[CronRow]:
        """Schedules whose next due time has come, the most overdue first."""
        c = _crons
        query = (select(c).where(c.c.next_due_ms.is_not(None), c.c.next_due_ms <= now)
                 .order_by(c.c.next_due_ms).limit(limit))
        return rows_as(CronRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def take_due_time(self, cron_id: str, due: int, next_due: int | None) -> bool:
        """Move a schedule from `due` to `next_due`: True for the one process whose update
        found `due` still there (it fires it); False when another process took it first, or
        the schedule was deleted."""
        c = _crons
        statement = (update(c).where(c.c.id == cron_id, c.c.next_due_ms == due)
                     .values(next_due_ms=next_due, last_due_ms=due))
        return await self.transaction(lambda tx: tx.execute(statement).rowcount == 1)

    @operation
    async def give_back_due_time(self, cron_id: str, due: int, next_due: int | None,
                                 error: str) -> bool:
        """Undo `take_due_time` for a due time whose run could not start for a moment (a 503:
        the process drains, or its database or Redis is away): the schedule is due at `due`
        again, for any process's next look, within the catch-up window as any late due time;
        `error` says why meanwhile. False if the schedule moved on or went (nothing to undo)."""
        c = _crons
        moved = c.c.next_due_ms.is_(None) if next_due is None else c.c.next_due_ms == next_due
        statement = (update(c).where(c.c.id == cron_id, moved, c.c.last_due_ms == due)
                     .values(next_due_ms=due, last_error=error))
        return await self.transaction(lambda tx: tx.execute(statement).rowcount == 1)

    @operation
    async def cron_fired(self, cron_id: str, run_id: str | None, error: str | None) -> None:
        """What the last due time did: the run it started, or the code of its refusal."""
        c = _crons
        statement = update(c).where(c.c.id == cron_id)
        if run_id is not None:
            statement = statement.values(last_error=None, last_run_id=run_id,
                                         runs_started=c.c.runs_started + 1)
        else:
            statement = statement.values(last_error=error)
        await self.transaction(lambda tx: tx.execute(statement))
