"""Components of a thread, their props and their revisioned state, and the states they had
as of earlier messages (for forks)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import func, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import select

from ..base import Fence, Queries, holds_lease, operation
from ..tables import ComponentRow, ComponentStateHistoryRow, MessageRow


class ComponentQueries(Queries):

    @operation
    async def components_of(self, thread_id: str) -> dict[str, ComponentRow]:
        query = select(ComponentRow).where(ComponentRow.thread_id == thread_id)
        async with self.session() as session:
            return {row.id: row for row in (await session.exec(query)).all()}

    @operation
    async def get_component(self, thread_id: str, component_id: str) -> ComponentRow | None:
        async with self.session() as session:
            row = await session.get(ComponentRow, component_id)
            return row if row is not None and row.thread_id == thread_id else None

    @operation
    async def put_component(self, row: ComponentRow, fence: Fence | None = None) -> bool:
        """Create the component, or refresh its props, name and message if it exists.

        Never touches an existing row's state, revision or schema: after creation the state
        belongs to `set_component_state`, so a run finishing its props cannot undo an update.
        """
        async with self.session() as session:
            if not await holds_lease(session, fence):
                await session.rollback()
                return False
            result = await session.execute(update(ComponentRow)
                .where(ComponentRow.id == row.id)
                .values(props=row.props, name=row.name, message_id=row.message_id)
            )
            if result.rowcount == 0:
                row.message_seq = await _newest_message(session, row.thread_id)
                session.add(row)
            await session.commit()
            return True

    @operation
    async def set_component_state(self, current: ComponentRow, state: dict[str, Any],
                                  now: int) -> bool:
        """Compare-and-set: store `state` as revision `current.revision + 1`, only if the
        component is still at `current.revision` (the row as the caller read it); False means
        another writer got there first.

        If a message arrived on the thread since `current`'s state was written, that state was
        the thread's state as of that message: it is kept in `ComponentStateHistoryRow` (in the
        same transaction) for a fork at that message to copy.
        """
        async with self.session() as session:
            newest = await _newest_message(session, current.thread_id) or 0
            result = await session.execute(update(ComponentRow)
                .where(ComponentRow.id == current.id,
                       ComponentRow.revision == current.revision)
                .values(state=state, revision=current.revision + 1, updated_ms=now,
                        message_seq=newest)
            )
            if result.rowcount != 1:
                await session.rollback()
                return False
            if (current.message_seq or 0) < newest:
                session.add(ComponentStateHistoryRow(
                    component_id=current.id, revision=current.revision,
                    thread_id=current.thread_id, state=current.state,
                    message_seq=current.message_seq or 0))
            await session.commit()
            return True

    @operation
    async def component_states_as_of(self, component_ids: Collection[str], message_seq: int
                                     ) -> dict[str, ComponentStateHistoryRow]:
        """Of these components, the kept states that held at message `message_seq` (the newest
        kept state of each written at or before it); a component without one is absent."""
        if not component_ids:
            return {}
        query = (select(ComponentStateHistoryRow)
                 .where(ComponentStateHistoryRow.component_id.in_(list(component_ids)),
                        ComponentStateHistoryRow.message_seq <= message_seq)
                 .order_by(ComponentStateHistoryRow.revision))
        async with self.session() as session:
            return {row.component_id: row for row in (await session.exec(query)).all()}


async def _newest_message(session: AsyncSession, thread_id: str) -> int | None:
    """The `seq` of the thread's newest message (None: it has none)."""
    query = select(func.max(MessageRow.seq)).where(MessageRow.thread_id == thread_id)
    return (await session.execute(query)).scalar_one_or_none()
