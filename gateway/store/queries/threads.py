"""The thread aggregate: threads and their messages."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, delete, func, insert, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from .. import cursors
from ..base import (
    Fence,
    Page,
    Queries,
    _page,
    holds_lease,
    lease_held,
    operation,
    table,
    values_of,
)
from ..engines.prepared import Prepared
from ..engines.transaction import Transaction
from ..tables import (
    ComponentRow,
    ComponentStateHistoryRow,
    MessageRow,
    RunFrameRow,
    RunRow,
    ThreadRow,
)

_messages = table(MessageRow)
# A message a run completes (`add_message`) and a run's input (`runs`), on the driver's cursor.
INSERT_MESSAGE = Prepared(insert(_messages))


class ThreadQueries(Queries):

    @operation
    async def add(self, *rows: Any, fence: Fence | None = None) -> bool:
        """Insert the rows; with `fence`, only while that run's lease is held (else False)."""
        async with self.session() as session:
            if not await holds_lease(session, fence):
                await session.rollback()
                return False
            session.add_all(rows)
            await session.commit()
            return True

    @operation
    async def add_branch(self, original: ThreadRow, *rows: Any) -> bool:
        """Insert a branch of `original` (its thread row first, carrying the client's name
        for `original`) and move that name from `original` to it, in one transaction: the
        client's `threadId` then names the branch, and `original` answers to its own id (a
        thread without a name, whose own id the client uses, keeps none). False (nothing
        written) when the name moved meanwhile (a racing branch)."""
        async with self.session() as session:
            if original.client_id is not None:
                moved = await session.exec(update(ThreadRow).where(
                    ThreadRow.id == original.id, ThreadRow.client_id == original.client_id,
                ).values(client_id=None))
                if moved.rowcount != 1:
                    await session.rollback()
                    return False
            session.add_all(rows)
            try:
                await session.commit()
            except IntegrityError:  # another branch took the name first
                await session.rollback()
                return False
            return True

    @operation
    async def set_thread_state(self, thread_id: str, state: dict[str, Any]) -> None:
        """Store the thread's shared state (`runs/components/thread_state.py`)."""
        async with self.session() as session:
            await session.exec(update(ThreadRow).where(
                ThreadRow.id == thread_id).values(state=state))
            await session.commit()

    @operation
    async def add_message(self, row: MessageRow, fence: Fence | None = None) -> bool:
        """`add` for one message, as a Core INSERT (no unit of work: a run saves each message
        it completes this way, on its start's budget)."""
        def work(connection: Transaction) -> bool:
            if not lease_held(connection, fence):
                connection.rollback()
                return False
            INSERT_MESSAGE.execute(connection, values_of(row))
            return True

        return await self.transaction(work)

    @operation
    async def get_thread(self, project_id: str, thread_id: str) -> ThreadRow | None:
        async with self.session() as session:
            row = await session.get(ThreadRow, thread_id)
            return row if row is not None and row.project_id == project_id else None

    @operation
    async def get_thread_by_client_id(self, project_id: str, client_id: str
                                      ) -> ThreadRow | None:
        """The project's thread an AG-UI client calls `client_id` (its `threadId`): the thread
        it created under that name, else a thread that has no such name (made by the Tambo
        endpoints, or before AG-UI names existed) whose own id it is."""
        async with self.session() as session:
            found = (await session.exec(select(ThreadRow).where(
                ThreadRow.project_id == project_id,
                or_(ThreadRow.client_id == client_id,
                    and_(ThreadRow.id == client_id, ThreadRow.client_id.is_(None)))))).all()
            return min(found, key=lambda row: row.client_id is None, default=None)

    @operation
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
        return _page(rows, limit, lambda row: [row.created_ms, row.id])

    @operation
    async def count_threads(self, project_id: str, user_key: str | None, at_most: int) -> int:
        """Threads of the project (of one user scope, when given), counted up to `at_most`: the
        work stays bounded however many there are."""
        query = select(ThreadRow.id).where(ThreadRow.project_id == project_id)
        if user_key is not None:
            query = query.where(ThreadRow.user_key == user_key)
        counted = select(func.count()).select_from(query.limit(at_most).subquery())
        async with self.session() as session:
            return int((await session.exec(counted)).one())

    @operation
    async def update_thread(self, thread_id: str, **values: Any) -> None:
        async with self.session() as session:
            await session.execute(update(ThreadRow).where(ThreadRow.id == thread_id).values(**values))
            await session.commit()

    @operation
    async def delete_thread(self, thread_id: str) -> None:
        async with self.session() as session:
            run_ids = select(RunRow.id).where(RunRow.thread_id == thread_id)
            await session.execute(delete(RunFrameRow).where(RunFrameRow.run_id.in_(run_ids)))
            for table in (RunRow, MessageRow, ComponentRow, ComponentStateHistoryRow):
                await session.execute(delete(table).where(table.thread_id == thread_id))
            await session.execute(delete(ThreadRow).where(ThreadRow.id == thread_id))
            await session.commit()


    @operation
    async def history(self, thread_id: str) -> list[MessageRow]:
        async with self.session() as session:
            return list((await session.exec(_history(thread_id))).all())

    @operation
    async def thread_context(self, thread_id: str
                             ) -> tuple[list[MessageRow], dict[str, ComponentRow]]:
        """What a run on the thread starts from: its history and its components (one read)."""
        async with self.session() as session:
            rows = list((await session.exec(_history(thread_id))).all())
            components = (await session.exec(
                select(ComponentRow).where(ComponentRow.thread_id == thread_id))).all()
        return rows, {row.id: row for row in components}

    @operation
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
        return _page(rows, limit, lambda row: [row.seq])

    @operation
    async def get_message(self, thread_id: str, message_id: str) -> MessageRow | None:
        query = select(MessageRow).where(MessageRow.thread_id == thread_id,
                                         MessageRow.id == message_id)
        async with self.session() as session:
            return (await session.exec(query)).first()

    @operation
    async def save_message_parts(self, message_id: str, parts: list[dict[str, Any]],
                                 cancelled: bool = False, fence: Fence | None = None) -> bool:
        async with self.session() as session:
            if not await holds_lease(session, fence):
                await session.rollback()
                return False
            await session.execute(update(MessageRow).where(MessageRow.id == message_id)
                               .values(parts=parts, is_cancelled=cancelled))
            await session.commit()
            return True

    @operation
    async def mark_run_answer(self, run_id: str, key: str) -> int:
        """Set `key: true` on the metadata of every answer (assistant message) of the run;
        returns how many were marked."""
        async with self.session() as session:
            rows = (await session.exec(select(MessageRow).where(
                MessageRow.run_id == run_id, MessageRow.role == "assistant"))).all()
            for row in rows:
                await session.execute(update(MessageRow).where(MessageRow.id == row.id)
                                      .values(meta={**(row.meta or {}), key: True}))
            await session.commit()
            return len(rows)

    @operation
    async def save_message_meta(self, message_id: str, meta: dict[str, Any]) -> None:
        async with self.session() as session:
            await session.execute(update(MessageRow).where(MessageRow.id == message_id)
                                  .values(meta=meta))
            await session.commit()


def _history(thread_id: str) -> Any:
    return select(MessageRow).where(MessageRow.thread_id == thread_id).order_by(MessageRow.seq)
