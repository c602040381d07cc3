"""Schedules: created, listed and deleted by their owner; the due ones read by every process,
and each due time taken by one of them with a conditional update of `next_due_ms`."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, update
from sqlmodel import select

from ..base import Queries, operation
from ..tables import CronRow


class CronQueries(Queries):

    @operation
    async def add_cron(self, row: CronRow) -> None:
        async with self.session() as session:
            session.add(row)
            await session.commit()

    @operation
    async def get_cron(self, project_id: str, cron_id: str) -> CronRow | None:
        async with self.session() as session:
            row = await session.get(CronRow, cron_id)
            return row if row is not None and row.project_id == project_id else None

    @operation
    async def list_crons(self, project_id: str, user_key: str | None, limit: int
                         ) -> Sequence[CronRow]:
        """The project's schedules, oldest first; only `user_key`'s when it is given (the
        operator's listing gives none)."""
        query = select(CronRow).where(CronRow.project_id == project_id)
        if user_key is not None:
            query = query.where(CronRow.user_key == user_key)
        async with self.session() as session:
            return (await session.exec(query.order_by(CronRow.created_ms).limit(limit))).all()

    @operation
    async def count_crons(self, project_id: str) -> int:
        async with self.session() as session:
            rows = await session.exec(select(CronRow.id).where(CronRow.project_id == project_id))
            return len(rows.all())

    @operation
    async def delete_cron(self, project_id: str, cron_id: str, user_key: str | None) -> bool:
        """Delete a schedule of the project (of `user_key` when given): False if none."""
        query = delete(CronRow).where(CronRow.id == cron_id, CronRow.project_id == project_id)
        if user_key is not None:
            query = query.where(CronRow.user_key == user_key)
        async with self.session() as session:
            result = await session.execute(query)
            await session.commit()
            return result.rowcount == 1

    @operation
    async def due_crons(self, now: int, limit: int) -> Sequence[CronRow]:
        """Schedules whose next due time has come, the most overdue first."""
        query = (select(CronRow).where(CronRow.next_due_ms.is_not(None),
                                       CronRow.next_due_ms <= now)
                 .order_by(CronRow.next_due_ms).limit(limit))
        async with self.session() as session:
            return (await session.exec(query)).all()

    @operation
    async def take_due_time(self, cron_id: str, due: int, next_due: int | None) -> bool:
        """Move a schedule from `due` to `next_due`: True for the one process whose update
        found `due` still there (it fires it); False when another process took it first, or
        the schedule was deleted."""
        async with self.session() as session:
            result = await session.execute(update(CronRow).where(
                CronRow.id == cron_id, CronRow.next_due_ms == due
            ).values(next_due_ms=next_due, last_due_ms=due))
            await session.commit()
            return result.rowcount == 1

    @operation
    async def cron_fired(self, cron_id: str, run_id: str | None, error: str | None) -> None:
        """What the last due time did: the run it started, or the code of its refusal."""
        values: dict[str, object] = {"last_error": error}
        if run_id is not None:
            values.update(last_run_id=run_id, runs_started=CronRow.runs_started + 1)
        async with self.session() as session:
            await session.execute(update(CronRow).where(CronRow.id == cron_id).values(**values))
            await session.commit()
