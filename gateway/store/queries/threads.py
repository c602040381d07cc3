"""The thread aggregate: threads and their messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, and_, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel

from .. import cursors
from ..base import (
    Fence,
    Page,
    Queries,
    _page,
    column_values,
    first_as,
    lease_held,
    operation,
    rows_as,
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

_threads, _messages, _components = table(ThreadRow), table(MessageRow), table(ComponentRow)
_runs, _frames = table(RunRow), table(RunFrameRow)
# A message a run completes (`add_message`) and a run's input (`runs`), on the driver's cursor.
INSERT_MESSAGE = Prepared(insert(_messages))


def _add(tx: Transaction, rows: tuple[SQLModel, ...], fence: Fence | None) -> bool:
    if not lease_held(tx, fence):
        tx.rollback()
        return False
    for row in rows:
        tx.execute(insert(table(type(row))), values_of(row))
    return True


def _add_branch(tx: Transaction, original: ThreadRow, rows: tuple[SQLModel, ...]) -> bool:
    if original.client_id is not None:
        moved = tx.execute(update(_threads).where(
            _threads.c.id == original.id, _threads.c.client_id == original.client_id,
        ).values(client_id=None))
        if moved.rowcount != 1:
            tx.rollback()
            return False
    for row in rows:
        tx.execute(insert(table(type(row))), values_of(row))
    return True


def _delete_thread(tx: Transaction, thread_id: str) -> None:
    run_ids = select(_runs.c.id).where(_runs.c.thread_id == thread_id)
    tx.execute(delete(_frames).where(_frames.c.run_id.in_(run_ids)))
    for owned in (_runs, _messages, _components, table(ComponentStateHistoryRow)):
        tx.execute(delete(owned).where(owned.c.thread_id == thread_id))
    tx.execute(delete(_threads).where(_threads.c.id == thread_id))


def _save_parts(tx: Transaction, message_id: str, parts: list[dict[str, Any]], cancelled: bool,
                fence: Fence | None) -> bool:
    if not lease_held(tx, fence):
        tx.rollback()
        return False
    tx.execute(update(_messages).where(_messages.c.id == message_id)
               .values(parts=parts, is_cancelled=cancelled))
    return True


def _mark_answers(tx: Transaction, run_id: str, key: str) -> int:
    m = _messages
    rows = tx.execute(select(m.c.id, m.c.metadata)
                      .where(m.c.run_id == run_id, m.c.role == "assistant")).all()
    for row in rows:
        tx.execute(update(m).where(m.c.id == row[0]).values(metadata={**(row[1] or {}),
                                                                      key: True}))
    return len(rows)


class ThreadQueries(Queries):

    @operation
    async def add(self, *rows: Any, fence: Fence | None = None) -> bool:
        """Insert the rows; with `fence`, only while that run's lease is held (else False)."""
        return await self.transaction(lambda tx: _add(tx, rows, fence))

    @operation
    async def add_branch(self, original: ThreadRow, *rows: Any) -> bool:
        """Insert a branch of `original` (its thread row first, carrying the client's name
        for `original`) and move that name from `original` to it, in one transaction: the
        client's `threadId` then names the branch, and `original` answers to its own id (a
        thread without a name, whose own id the client uses, keeps none). False (nothing
        written) when the name moved meanwhile (a racing branch)."""
        try:
            return await self.transaction(lambda tx: _add_branch(tx, original, rows))
        except IntegrityError:  # another branch took the name first
            return False

    @operation
    async def set_thread_state(self, thread_id: str, state: dict[str, Any]) -> None:
        """Store the thread's shared state (`runs/components/thread_state.py`)."""
        statement = update(_threads).where(_threads.c.id == thread_id).values(state=state)
        await self.transaction(lambda tx: tx.execute(statement))

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
        """The project's thread `thread_id`: its own id, else the name a client gave it (a
        thread whose chosen id another project held first is kept under an id of the
        gateway's, with the chosen one as its name: ids a client chooses are names within
        its project). The name is looked for only when the id finds nothing."""
        t = _threads
        by_id = select(t).where(t.c.id == thread_id, t.c.project_id == project_id)
        by_name = select(t).where(t.c.project_id == project_id, t.c.client_id == thread_id)

        def work(tx: Transaction) -> Any:
            return tx.execute(by_id).all() or tx.execute(by_name).all()

        return first_as(ThreadRow, await self.transaction(work))

    @operation
    async def get_thread_by_client_id(self, project_id: str, client_id: str
                                      ) -> ThreadRow | None:
        """The project's thread an AG-UI client calls `client_id` (its `threadId`): the thread
        it created under that name, else a thread that has no such name (made by the Tambo
        endpoints, or before AG-UI names existed) whose own id it is."""
        return await self.by_client_id(ThreadRow, project_id, client_id)

    @operation
    async def list_threads(
        self, project_id: str, user_key: str | None, limit: int, cursor: str | None
    ) -> Page:
        t = _threads
        query = select(t).where(t.c.project_id == project_id)
        if user_key is not None:
            query = query.where(t.c.user_key == user_key)
        page = newest_first(query, limit, cursor)
        return thread_page(await self.transaction(lambda tx: tx.execute(page).all()), limit)

    @operation
    async def count_threads(self, project_id: str, user_key: str | None, at_most: int) -> int:
        """Threads of the project (of one user scope, when given), counted up to `at_most`: the
        work stays bounded however many there are."""
        query = select(_threads.c.id).where(_threads.c.project_id == project_id)
        if user_key is not None:
            query = query.where(_threads.c.user_key == user_key)
        counted = select(func.count()).select_from(query.limit(at_most).subquery())
        return int(await self.transaction(lambda tx: tx.execute(counted).scalar_one()))

    @operation
    async def update_thread(self, /, thread_id: str, **values: Any) -> None:
        statement = (update(_threads).where(_threads.c.id == thread_id)
                     .values(column_values(ThreadRow, values)))
        await self.transaction(lambda tx: tx.execute(statement))

    @operation
    async def delete_thread(self, thread_id: str) -> None:
        await self.transaction(lambda tx: _delete_thread(tx, thread_id))

    @operation
    async def history(self, thread_id: str) -> list[MessageRow]:
        query = _history(thread_id)
        return rows_as(MessageRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def thread_context(self, thread_id: str
                             ) -> tuple[list[MessageRow], dict[str, ComponentRow]]:
        """What a run on the thread starts from: its history and its components (one read)."""
        def read(tx: Transaction) -> tuple[list[MessageRow], list[ComponentRow]]:
            components = select(_components).where(_components.c.thread_id == thread_id)
            return (rows_as(MessageRow, tx.execute(_history(thread_id)).all()),
                    rows_as(ComponentRow, tx.execute(components).all()))

        rows, components = await self.transaction(read)
        return rows, {row.id: row for row in components}

    @operation
    async def list_messages(
        self, thread_id: str, limit: int, cursor: str | None, descending: bool
    ) -> Page:
        m = _messages
        query = select(m).where(m.c.thread_id == thread_id)
        if cursor:
            (seq,) = cursors.decode(cursor, (int,))
            query = query.where(m.c.seq < seq if descending else m.c.seq > seq)
        query = query.order_by(m.c.seq.desc() if descending else m.c.seq).limit(limit + 1)
        rows = rows_as(MessageRow, await self.transaction(lambda tx: tx.execute(query).all()))
        return _page(rows, limit, lambda row: [row.seq])

    @operation
    async def run_messages(self, thread_id: str, run_id: str) -> list[MessageRow]:
        """The messages a run added to its thread (its input, its answer, its tool results),
        in order."""
        m = _messages
        query = select(m).where(m.c.thread_id == thread_id, m.c.run_id == run_id
                                ).order_by(m.c.seq)
        return rows_as(MessageRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def get_message(self, thread_id: str, message_id: str) -> MessageRow | None:
        query = (select(_messages)
                 .where(_messages.c.thread_id == thread_id, _messages.c.id == message_id))
        return first_as(MessageRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def save_message_parts(self, message_id: str, parts: list[dict[str, Any]],
                                 cancelled: bool = False, fence: Fence | None = None) -> bool:
        return await self.transaction(
            lambda tx: _save_parts(tx, message_id, parts, cancelled, fence))

    @operation
    async def mark_run_answer(self, run_id: str, key: str) -> int:
        """Set `key: true` on the metadata of every answer (assistant message) of the run;
        returns how many were marked."""
        return await self.transaction(lambda tx: _mark_answers(tx, run_id, key))

    @operation
    async def save_message_meta(self, message_id: str, meta: dict[str, Any]) -> None:
        statement = update(_messages).where(_messages.c.id == message_id).values(metadata=meta)
        await self.transaction(lambda tx: tx.execute(statement))


def _history(thread_id: str) -> Select[Any]:
    return select(_messages).where(_messages.c.thread_id == thread_id).order_by(_messages.c.seq)


def newest_first(query: Select[Any], limit: int, cursor: str | None) -> Select[Any]:
    """`query`'s threads newest first, after `cursor`, one more than `limit` (`thread_page`):
    the thread list's order and cursor, filtered or not."""
    t = _threads
    if cursor:
        created, thread_id = cursors.decode(cursor, (int, str))
        query = query.where(or_(t.c.created_ms < created,
                                and_(t.c.created_ms == created, t.c.id < thread_id)))
    return query.order_by(t.c.created_ms.desc(), t.c.id.desc()).limit(limit + 1)


def thread_page(rows: Sequence[Any], limit: int) -> Page:
    """The page of threads `newest_first` read, with the cursor to the next."""
    threads = rows_as(ThreadRow, rows)
    return _page(threads, limit, lambda row: [row.created_ms, row.id])
