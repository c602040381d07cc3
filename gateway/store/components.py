"""Components of a thread, their props and their revisioned state."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlmodel import select

from .base import Fence, Queries, holds_lease, operation
from .tables import ComponentRow


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
                session.add(row)
            await session.commit()
            return True

    @operation
    async def set_component_state(self, component_id: str, expected_revision: int,
                                  state: dict[str, Any], now: int) -> bool:
        """Compare-and-set: store `state` as revision `expected_revision + 1`, only if the
        component is still at `expected_revision`; False means another writer got there first."""
        async with self.session() as session:
            result = await session.execute(update(ComponentRow)
                .where(ComponentRow.id == component_id,
                       ComponentRow.revision == expected_revision)
                .values(state=state, revision=expected_revision + 1, updated_ms=now)
            )
            await session.commit()
            return result.rowcount == 1

