"""Queries. Every write that must be atomic is one statement or one transaction here, so the
callers (`runs`, `api`) never hold a session across an await on anything else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from sqlalchemy import and_, delete, func, or_, update
from sqlmodel import select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from . import cursors
from .db import session_factory
from .tables import ComponentRow, MessageRow, RunFrameRow, RunRow, ThreadRow

ACTIVE_RUN_STATUSES = ("queued", "running")


@dataclass(frozen=True)
class Page:
    rows: Sequence[Any]
    has_more: bool
    next_cursor: str | None


class Store:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sessions = session_factory(engine)

    def session(self) -> AsyncSession:
        return self._sessions()

    # -- threads ------------------------------------------------------------------------------

    async def add(self, *rows: Any) -> None:
        async with self.session() as session:
            session.add_all(rows)
            await session.commit()

    async def get_thread(self, project_id: str, thread_id: str) -> ThreadRow | None:
        async with self.session() as session:
            row = await session.get(ThreadRow, thread_id)
            return row if row is not None and row.project_id == project_id else None

    async def list_threads(
        self, project_id: str, user_key: str | None, limit: int, cursor: str | None
    ) -> Page:
        query = select(ThreadRow).where(ThreadRow.project_id == project_id)
        if user_key is not None:
            query = query.where(ThreadRow.user_key == user_key)
        if cursor:
            created, thread_id = cursors.decode(cursor, (int, str))
            query = query.where(
                or_(ThreadRow.created_ms < created,
                    and_(ThreadRow.created_ms == created, ThreadRow.id < thread_id))
            )
        query = query.order_by(ThreadRow.created_ms.desc(), ThreadRow.id.desc()).limit(limit + 1)
        async with self.session() as session:
            rows = list((await session.exec(query)).all())
        has_more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = cursors.encode([rows[-1].created_ms, rows[-1].id]) if has_more else None
        return Page(rows, has_more, next_cursor)

    async def update_thread(self, thread_id: str, **values: Any) -> None:
        async with self.session() as session:
            await session.execute(update(ThreadRow).where(ThreadRow.id == thread_id).values(**values))
            await session.commit()

    async def delete_thread(self, thread_id: str) -> None:
        async with self.session() as session:
            run_ids = select(RunRow.id).where(RunRow.thread_id == thread_id)
            await session.execute(delete(RunFrameRow).where(RunFrameRow.run_id.in_(run_ids)))
            for table in (RunRow, MessageRow, ComponentRow):
                await session.execute(delete(table).where(table.thread_id == thread_id))
            await session.execute(delete(ThreadRow).where(ThreadRow.id == thread_id))
            await session.commit()

    # -- the run lock --------------------------------------------------------------------------

    async def try_lock_thread(self, thread_id: str, run_id: str, now: int) -> bool:
        """Take the thread's run lock in one atomic statement; False if a run holds it."""
        async with self.session() as session:
            result = await session.execute(update(ThreadRow)
                .where(ThreadRow.id == thread_id, ThreadRow.run_status == "idle")
                .values(run_status="waiting", current_run_id=run_id, updated_ms=now)
            )
            await session.commit()
            return result.rowcount == 1

    async def unlock_thread(self, thread_id: str, run_id: str) -> None:
        """Give back a lock taken for a run that was refused before it started."""
        async with self.session() as session:
            await session.execute(update(ThreadRow)
                .where(ThreadRow.id == thread_id, ThreadRow.current_run_id == run_id)
                .values(run_status="idle", current_run_id=None)
            )
            await session.commit()

    async def begin_run(self, run: RunRow, inputs: Sequence[MessageRow], now: int) -> None:
        """Persist the run and its input, and clear the previous run's outcome, atomically."""
        async with self.session() as session:
            session.add(run)
            session.add_all(inputs)
            await session.execute(update(ThreadRow)
                .where(ThreadRow.id == run.thread_id)
                .values(last_run_cancelled=False, last_run_error=None, pending_tool_calls=None,
                        updated_ms=now)
            )
            await session.commit()

    async def mark_running(self, run_id: str, thread_id: str, owner: str, now: int,
                           lease_until: int) -> None:
        async with self.session() as session:
            await session.execute(update(RunRow).where(RunRow.id == run_id)
                .values(status="running", started_ms=now, lease_owner=owner,
                        lease_expires_ms=lease_until)
            )
            await session.execute(update(ThreadRow)
                .where(ThreadRow.id == thread_id, ThreadRow.current_run_id == run_id)
                .values(run_status="streaming")
            )
            await session.commit()

    async def finish_run(
        self,
        run_id: str,
        thread_id: str,
        status: str,
        now: int,
        *,
        pending: list[dict[str, Any]] | None = None,
        error: dict[str, Any] | None = None,
        only_if_active: bool = False,
    ) -> bool:
        """Record a run's terminal state and release the thread, in one transaction.

        Every terminal state sets `lastCompletedRunId`: the clients send it back as
        `previousRunId` whatever the outcome. With `only_if_active`, a run that already ended
        (a race between a reaper and its owner) is left alone and False is returned.
        """
        async with self.session() as session:
            query = update(RunRow).where(RunRow.id == run_id)
            if only_if_active:
                query = query.where(RunRow.status.in_(ACTIVE_RUN_STATUSES))
            result = await session.execute(
                query.values(status=status, finished_ms=now, pending_tool_calls=pending,
                             error=error, lease_owner=None, lease_expires_ms=None)
            )
            if result.rowcount != 1:
                await session.rollback()
                return False
            await session.execute(update(ThreadRow)
                .where(ThreadRow.id == thread_id, ThreadRow.current_run_id == run_id)
                .values(run_status="idle", current_run_id=None, last_completed_run_id=run_id,
                        last_run_cancelled=status == "cancelled",
                        last_run_error=_thread_error(error), pending_tool_calls=pending,
                        updated_ms=now)
            )
            await session.commit()
            return True

    # -- runs ---------------------------------------------------------------------------------

    async def get_run(self, run_id: str) -> RunRow | None:
        async with self.session() as session:
            return await session.get(RunRow, run_id)

    async def find_run_by_idempotency_key(self, thread_id: str, key: str) -> RunRow | None:
        async with self.session() as session:
            query = select(RunRow).where(RunRow.thread_id == thread_id,
                                         RunRow.idempotency_key == key)
            return (await session.exec(query)).first()

    async def list_runs(self, thread_id: str, limit: int, cursor: str | None) -> Page:
        query = select(RunRow).where(RunRow.thread_id == thread_id)
        if cursor:
            created, run_id = cursors.decode(cursor, (int, str))
            query = query.where(or_(RunRow.created_ms < created,
                                    and_(RunRow.created_ms == created, RunRow.id < run_id)))
        query = query.order_by(RunRow.created_ms.desc(), RunRow.id.desc()).limit(limit + 1)
        async with self.session() as session:
            rows = list((await session.exec(query)).all())
        has_more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = cursors.encode([rows[-1].created_ms, rows[-1].id]) if has_more else None
        return Page(rows, has_more, next_cursor)

    async def renew_leases(self, run_ids: Sequence[str], owner: str, until: int) -> None:
        if not run_ids:
            return
        async with self.session() as session:
            await session.execute(update(RunRow)
                .where(RunRow.id.in_(list(run_ids)), RunRow.lease_owner == owner)
                .values(lease_expires_ms=until)
            )
            await session.commit()

    async def expired_runs(self, now: int) -> list[RunRow]:
        query = select(RunRow).where(RunRow.status.in_(ACTIVE_RUN_STATUSES),
                                     RunRow.lease_expires_ms < now)
        async with self.session() as session:
            return list((await session.exec(query)).all())

    # -- the run log --------------------------------------------------------------------------

    async def append_frames(self, run_id: str, entries: Sequence[tuple[int, int, dict]]) -> None:
        if not entries:
            return
        async with self.session() as session:
            session.add_all(RunFrameRow(run_id=run_id, seq=seq, ts_ms=ts, frame=frame)
                            for seq, ts, frame in entries)
            await session.commit()

    async def read_frames(self, run_id: str, after_seq: int = 0) -> list[RunFrameRow]:
        query = (select(RunFrameRow)
                 .where(RunFrameRow.run_id == run_id, RunFrameRow.seq > after_seq)
                 .order_by(RunFrameRow.seq))
        async with self.session() as session:
            return list((await session.exec(query)).all())

    async def last_frame_seq(self, run_id: str) -> int:
        query = select(func.max(RunFrameRow.seq)).where(RunFrameRow.run_id == run_id)
        async with self.session() as session:
            return (await session.exec(query)).one() or 0

    # -- messages -----------------------------------------------------------------------------

    async def history(self, thread_id: str) -> list[MessageRow]:
        query = select(MessageRow).where(MessageRow.thread_id == thread_id).order_by(MessageRow.seq)
        async with self.session() as session:
            return list((await session.exec(query)).all())

    async def count_messages(self, thread_id: str) -> int:
        query = select(func.count()).select_from(MessageRow).where(MessageRow.thread_id == thread_id)
        async with self.session() as session:
            return (await session.exec(query)).one()

    async def list_messages(
        self, thread_id: str, limit: int, cursor: str | None, descending: bool
    ) -> Page:
        query = select(MessageRow).where(MessageRow.thread_id == thread_id)
        if cursor:
            (seq,) = cursors.decode(cursor, (int,))
            query = query.where(MessageRow.seq < seq if descending else MessageRow.seq > seq)
        order = MessageRow.seq.desc() if descending else MessageRow.seq
        query = query.order_by(order).limit(limit + 1)
        async with self.session() as session:
            rows = list((await session.exec(query)).all())
        has_more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = cursors.encode([rows[-1].seq]) if has_more else None
        return Page(rows, has_more, next_cursor)

    async def get_message(self, thread_id: str, message_id: str) -> MessageRow | None:
        query = select(MessageRow).where(MessageRow.thread_id == thread_id,
                                         MessageRow.id == message_id)
        async with self.session() as session:
            return (await session.exec(query)).first()

    async def save_message_parts(self, message_id: str, parts: list[dict[str, Any]],
                                 cancelled: bool = False) -> None:
        async with self.session() as session:
            await session.execute(update(MessageRow).where(MessageRow.id == message_id)
                               .values(parts=parts, is_cancelled=cancelled))
            await session.commit()

    async def save_message_meta(self, message_id: str, meta: dict[str, Any]) -> None:
        async with self.session() as session:
            await session.execute(update(MessageRow).where(MessageRow.id == message_id)
                                  .values(meta=meta))
            await session.commit()

    # -- components ---------------------------------------------------------------------------

    async def components_of(self, thread_id: str) -> dict[str, ComponentRow]:
        query = select(ComponentRow).where(ComponentRow.thread_id == thread_id)
        async with self.session() as session:
            return {row.id: row for row in (await session.exec(query)).all()}

    async def upsert_component(self, row: ComponentRow) -> None:
        async with self.session() as session:
            await session.merge(row)
            await session.commit()


def _thread_error(error: dict[str, Any] | None) -> dict[str, Any] | None:
    if not error or error.get("code") == "CANCELLED":
        return None
    return {"message": error.get("message", ""), "code": error.get("code")}
